"""bench/budget_summary.py — the tables of gpu-check's `budget` stage (issue 40), from the JSON
lines of `gpt --bench` and `resnet --bench`, for bench/summarize.py.

A run planned with --memory-budget carries what the planner predicted for its choice
(memory_budget_bytes, predicted_peak_reserved_bytes, predicted_step_ms: examples/common/
budget_plan.h) beside what it measured (peak_reserved_bytes, step_ms_median). A run of the
same model, effective batch (batch x accum) and precision without a budget is a point of the
hand sweep of the same levers (the `gpt-sweep` part) or the obvious plan (--checkpoint whole).
For each budget: does the chosen plan's measured peak stay within it, how far is its
predicted step from the measured one, and is it as fast as whole-model checkpointing and
as the fastest swept plan whose measured peak fits?
"""

GIB = float(1 << 30)


def _problem(result):
    """What a plan must train: the runs of one problem are compared."""
    return (result.get("model"), result.get("batch", 0) * result.get("accum", 1), result.get("amp"),
            result.get("memory_format"), result.get("device"))


def _levers(result):
    return (f"{result.get('checkpoint')}, {result.get('optimizer_state')}, "
            f"{result.get('batch')} x {result.get('accum', 1)}")


def _measured(result):
    return result.get("framework") == "memgrad" and "step_ms_median" in result and not result.get("cuda_graph")


def budget_rows(results):
    """One row per run planned for a budget (measured, not predicted only)."""
    planned = [r for r in results if _measured(r) and r.get("memory_budget_bytes")]
    unplanned = [r for r in results if _measured(r) and not r.get("memory_budget_bytes")]
    rows = []
    for run in planned:
        budget = run["memory_budget_bytes"]
        same = [r for r in unplanned if _problem(r) == _problem(run)]
        # The obvious plan: every block checkpointed, the whole batch at once, AdamW as usual.
        whole = [r for r in same
                 if r.get("checkpoint") == "whole" and r.get("accum", 1) == 1 and r.get("optimizer_state") == "device"]
        fitting = [r for r in same if r["peak_reserved_bytes"] <= budget]
        best = min(fitting, key=lambda r: r["step_ms_median"]) if fitting else None
        measured_ms, predicted_ms = run["step_ms_median"], run["predicted_step_ms"]
        model, batch, amp = _problem(run)[:3]
        rows.append({
            "problem": f"{model} b{batch} {amp}",
            "budget": f"{budget / GIB:.2f} GiB",
            "plan": _levers(run),
            "predicted_peak": f"{run['predicted_peak_reserved_bytes'] / GIB:.2f} GiB",
            "measured_peak": f"{run['peak_reserved_bytes'] / GIB:.2f} GiB",
            "within": "yes" if run["peak_reserved_bytes"] <= budget else "NO",
            "predicted_ms": f"{predicted_ms:.1f}",
            "measured_ms": f"{measured_ms:.1f}",
            "time_error": f"{100 * (predicted_ms / measured_ms - 1):+.0f}%",
            "whole_ms": (f"{whole[0]['step_ms_median']:.1f}"
                         f"{'' if whole[0]['peak_reserved_bytes'] <= budget else ' (over budget)'}") if whole else "-",
            "sweep_best": f"{best['step_ms_median']:.1f} ({_levers(best)})" if best else "-",
            "vs_sweep": f"{measured_ms / best['step_ms_median']:.2f}x" if best else "-",
        })
    return rows


BUDGET_HEADERS = ["problem", "budget", "plan chosen", "predicted peak", "measured peak", "within",
                  "predicted ms", "measured ms", "time error", "whole ckpt ms", "sweep best ms (plan)",
                  "chosen / sweep"]
BUDGET_KEYS = ["problem", "budget", "plan", "predicted_peak", "measured_peak", "within", "predicted_ms",
               "measured_ms", "time_error", "whole_ms", "sweep_best", "vs_sweep"]
