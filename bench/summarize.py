#!/usr/bin/env python3
"""bench/summarize.py — the table of a benchmark run: reads the JSON lines that
bench_train_step, `resnet --bench` and bench/torch_reference.py printed (bench.jsonl) and
compares memgrad with PyTorch per configuration — (model, batch, optimizer, device, CPU
threads, memory format, autocast, checkpointing); a line without "threads" ran on the
default threads, without "memory_format" is "contiguous" (NCHW), without "amp" fp32,
without "checkpoint" unchecked —:
median step time of each run and their ratio, peak allocated bytes and their ratio (memgrad
must not use more), and memgrad's peak bytes by category per configuration (what
checkpointing and autocast change), and memgrad's predicted peaks (lines with a
"prediction" section) against the measured ones. Optionally also the test counts from a ctest log and the accuracy from
the mnist example's --summary-json. GPT-2's step (`gpt --bench`) stands beside PyTorch
eager and, where torch_reference.py --compile ran ("pytorch-compile" lines), torch.compile
too. The GPT loss curves (bench/gpt_loss_reference.py --compare's JSON: PyTorch's final
validation loss, memgrad's beside it) get a table of their own, within 2% or not.

Attention alone (lines with "op": "sdpa", from bench_attention and bench/torch_attention.py)
has tables of its own and stays out of the training-step ones: per shape, dtype, causal and
memgrad backend, the median ms of forward and of forward + backward of each run, their ratio
against PyTorch (best runs) and the peak allocated bytes; and per T what one call keeps for
backward (activation_bytes) on the fused and the math path, with the growth from the T before
(fused linear in T, math quadratic).

  python3 bench/summarize.py bench.jsonl [--ctest-log ctest.log] [--training-json summary.json ...]
  python3 bench/summarize.py bench.jsonl --markdown     # rows for docs/benchmarks.md
  python3 bench/summarize.py bench.jsonl --gpt-loss-json gpt_loss_pytorch_bf16.json ...
      (without it: gpt_loss_pytorch_*.json beside bench.jsonl, where gpu-check writes them)

Lines that are not JSON objects (a crashed run's error text, say) are skipped with a note.
The ratio uses each framework's best (lowest) median over its runs, which is the least
disturbed by other work on the machine; every run's median is shown beside it.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys
from collections import OrderedDict

from budget_summary import BUDGET_HEADERS, BUDGET_KEYS, budget_rows
from model_flops import FLOPS_HEADERS, FLOPS_KEYS, flops_rows


def read_results(path):
    results, skipped = [], 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(result, dict) and "framework" in result:
                results.append(result)
            else:
                skipped += 1
    return results, skipped


def mib(value):
    return "-" if value is None else f"{value / 2**20:.2f} MiB"


def ms(value):
    return "-" if value is None else f"{value:.3f}"


def ctest_counts(path):
    """(passed, failed, skipped, total) from ctest's closing lines, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            text = log.read()
    except OSError:
        return None
    # Older ctest: "100% tests passed, 0 tests failed out of N"; CMake 4: "... passed out of N".
    match = re.search(r"tests passed(?:, (\d+) tests? failed)? out of (\d+)", text)
    if not match:
        return None
    failed, total = int(match.group(1) or 0), int(match.group(2))
    skipped = len(re.findall(r"\(Skipped\)\s*$", text, flags=re.MULTILINE))
    return total - failed - skipped, failed, skipped, total


def ratio_text(numerator, denominator):
    return "-" if numerator is None or not denominator else f"{numerator / denominator:.2f}x"


def config_name(result):
    """"resnet50 b128 sgd cuda channels_last amp fp16 checkpoint cuda-graph", "cnn b128 adam cpu 2
    threads": the options that are not the default are named, so the plain rows read as
    before."""
    name = f"{result.get('model')} b{result.get('batch')} {result.get('optim')} {result.get('device')}"
    if result.get("threads"):
        name += f" {result['threads']} threads"
    if (result.get("memory_format") or "contiguous") != "contiguous":
        name += f" {result['memory_format']}"
    if (result.get("amp") or "fp32") != "fp32":
        name += f" amp {result['amp']}"
    # memgrad writes "none", "selective" or "whole" (before 2026-12-07, and PyTorch's
    # reference still, a bool: true meant whole blocks).
    checkpoint = result.get("checkpoint")
    if checkpoint is True or checkpoint == "whole":
        name += " checkpoint"
    elif checkpoint == "selective":
        name += " selective-checkpoint"
    if result.get("cuda_graph"):
        name += " cuda-graph"
    if result.get("cudnn_benchmark"):
        name += " cudnn-benchmark"
    for switch, default, suffix in MEMGRAD_ONLY_SWITCHES:
        if result.get(switch, default) != default:
            name += suffix
    if result.get("memory_timeline"):
        name += RECORDING
    return name


RECORDING = " recording"  # config_name's suffix for a run with the memory Recorder on
# memgrad's cuDNN fusion and launch switches (key, default, suffix when not the default),
# which PyTorch has no twin of: such a row is compared with the PyTorch runs of its
# configuration without the suffix.
MEMGRAD_ONLY_SWITCHES = (("cudnn_fusion", True, " no-cudnn-fusion"),
                         ("cudnn_backward_fusion", True, " no-backward-fusion"),
                         ("dependent_launch", False, " dependent-launch"),
                         ("wgrad_stream", False, " wgrad-stream"))


def recorder_overhead_rows(results):
    """memgrad's median step time with the memory Recorder on against the same configuration
    without it (each the median of its runs' medians)."""
    groups = group_by_config(results)
    rows = []
    for config, by_framework in groups.items():
        if not config.endswith(RECORDING):
            continue
        plain = groups.get(config[:-len(RECORDING)], {}).get("memgrad", [])
        recorded = by_framework.get("memgrad", [])
        if not plain or not recorded:
            continue
        plain_ms = statistics.median(r["step_ms_median"] for r in plain)
        recorded_ms = statistics.median(r["step_ms_median"] for r in recorded)
        rows.append({"config": config[:-len(RECORDING)], "plain": f"{plain_ms:.3f}",
                     "recording": f"{recorded_ms:.3f}", "overhead": f"{(recorded_ms / plain_ms - 1) * 100:+.1f}%"})
    return rows


def is_attention(result):
    """A line of bench_attention or torch_attention.py: its own tables, not a training step."""
    return result.get("op") == "sdpa"


def group_by_config(results):
    """{config name: {framework: [results]}}, in the order of first appearance."""
    groups = OrderedDict()
    for result in results:
        if result.get("benchmark") != "host_overhead" and "prediction" not in result:
            groups.setdefault(config_name(result), {}).setdefault(result["framework"], []).append(result)
    return groups


def prediction_rows(results):
    """Per configuration predicted (`resnet --bench --predict-memory`, a line with a
    "prediction" section): the predicted peak allocated bytes against memgrad's measured
    ones in the same file (highest run), the error, and the WORKSPACE peaks beside, since
    cuDNN's workspace is the part a prediction without a GPU can only estimate."""
    measured = group_by_config(results)
    rows = []
    for result in results:
        if "prediction" not in result:
            continue
        config = config_name(result)
        runs = [r for r in measured.get(config, {}).get("memgrad", []) if r.get("peak_allocated_bytes") is not None]
        predicted = result["memory"]["peak_allocated_bytes"]
        actual = max((r["peak_allocated_bytes"] for r in runs), default=None)
        actual_workspace = max((r.get("peak_bytes_by_category", {}).get("WORKSPACE", 0) for r in runs), default=None)
        rows.append({
            "config": config,
            "predicted": mib(predicted),
            "measured": mib(actual),
            "error": f"{(predicted / actual - 1) * 100:+.2f}%" if actual else "-",
            "predicted_workspace": mib(result["memory"]["peak_bytes_by_category"].get("WORKSPACE", 0)),
            "measured_workspace": mib(actual_workspace),
            "cudnn": ("-" if result["prediction"].get("target") != "cuda"
                      else "estimated" if "ESTIMATED" in result["prediction"].get("scratch_model", "") else "asked"),
        })
    return rows


def training_table(results):
    """Rows per configuration: memgrad vs pytorch, and where torch.compile ran (the
    "pytorch-compile" lines of torch_reference.py --compile) its runs and memgrad's ratio to
    them (best runs); the compile keys are absent from a configuration without such runs."""
    rows = []
    groups = group_by_config(results)
    for config, by_framework in groups.items():
        memgrad = by_framework.get("memgrad", [])
        pytorch = by_framework.get("pytorch", [])
        if not pytorch:
            base = config
            for _, _, suffix in MEMGRAD_ONLY_SWITCHES:
                base = base.replace(suffix, "")
            pytorch = groups.get(base, {}).get("pytorch", [])
        best = {name: min((r["step_ms_median"] for r in runs), default=None)
                for name, runs in (("memgrad", memgrad), ("pytorch", pytorch))}
        peak = {name: max((r["peak_allocated_bytes"] for r in runs
                           if r.get("peak_allocated_bytes") is not None), default=None)
                for name, runs in (("memgrad", memgrad), ("pytorch", pytorch))}
        ratio = (best["memgrad"] / best["pytorch"]
                 if best["memgrad"] is not None and best["pytorch"] else None)
        if peak["memgrad"] is None or peak["pytorch"] is None:
            memory_ok = "-"
        else:
            memory_ok = "yes" if peak["memgrad"] <= peak["pytorch"] else "NO"
        row = {
            "config": config,
            "memgrad_runs": " / ".join(ms(r["step_ms_median"]) for r in memgrad) or "-",
            "pytorch_runs": " / ".join(ms(r["step_ms_median"]) for r in pytorch) or "-",
            "ratio": ratio_text(best["memgrad"], best["pytorch"]),
            "faster": "-" if ratio is None else ("yes" if ratio < 1.0 else "NO"),
            "memgrad_peak": mib(peak["memgrad"]),
            "pytorch_peak": mib(peak["pytorch"]),
            "memory_ratio": ratio_text(peak["memgrad"], peak["pytorch"]),
            "memory_ok": memory_ok,
        }
        compiled = by_framework.get("pytorch-compile", [])
        if compiled:
            row["compile_runs"] = " / ".join(ms(r["step_ms_median"]) for r in compiled)
            row["compile_ratio"] = ratio_text(best["memgrad"], lowest(compiled, "step_ms_median"))
        rows.append(row)
    return rows


def attention_shape(result):
    """"B8 H12 T1024 D64 bf16 causal": what both frameworks ran (the backend aside); the
    warm-up and step counts are part of it, so a short run (stage attention-memory) is not
    ranked against a long one."""
    name = f"B{result.get('B')} H{result.get('H')} T{result.get('T')} D{result.get('D')} {result.get('dtype')}"
    if result.get("causal"):
        name += " causal"
    if result.get("dropout"):
        name += f" dropout {result['dropout']}"
    return name + f" ({result.get('warmup')}+{result.get('steps')} steps)"


def lowest(runs, key):
    return min((r[key] for r in runs if r.get(key) is not None), default=None)


def highest(runs, key):
    return max((r[key] for r in runs if r.get(key) is not None), default=None)


def attention_backend(result):
    """"fused own", "fused cudnn", "fused auto" or "math": the backend and, for the fused one
    on CUDA, the engine that ran it (bench_attention --engine)."""
    backend, engine = result.get("backend"), result.get("engine")
    return f"{backend} {engine}" if backend == "fused" and engine else backend


def attention_rows(results):
    """Per attention shape and memgrad backend (and engine): every run's median forward + backward ms (and
    forward alone), the ratio of the best runs memgrad / pytorch, and each framework's peak
    allocated bytes (highest run). PyTorch's runs (its default backend) stand beside every
    memgrad backend of the same shape."""
    by_shape = OrderedDict()
    for result in results:
        if is_attention(result):
            by_shape.setdefault(attention_shape(result), []).append(result)
    rows = []
    for shape, runs in by_shape.items():
        pytorch = [r for r in runs if r["framework"] == "pytorch"]
        backends = OrderedDict()
        for r in runs:
            if r["framework"] == "memgrad":
                backends.setdefault(attention_backend(r), []).append(r)
        for backend, memgrad in (backends.items() or [("-", [])]):
            rows.append({
                "shape": shape,
                "backend": backend,
                "memgrad_fb": " / ".join(ms(r.get("ms_forward_backward")) for r in memgrad) or "-",
                "pytorch_fb": " / ".join(ms(r.get("ms_forward_backward")) for r in pytorch) or "-",
                "ratio_fb": ratio_text(lowest(memgrad, "ms_forward_backward"),
                                       lowest(pytorch, "ms_forward_backward")),
                "memgrad_f": " / ".join(ms(r.get("ms_forward")) for r in memgrad) or "-",
                "pytorch_f": " / ".join(ms(r.get("ms_forward")) for r in pytorch) or "-",
                "ratio_f": ratio_text(lowest(memgrad, "ms_forward"), lowest(pytorch, "ms_forward")),
                "memgrad_peak": mib(highest(memgrad, "peak_allocated")),
                "pytorch_peak": mib(highest(pytorch, "peak_allocated")),
            })
    return rows


ATTENTION_BACKENDS = ("fused", "math")


def attention_memory_rows(results):
    """Per T (within each B, H, D, dtype, causal): memgrad's activation_bytes on the fused and
    the math path (highest run; the count is deterministic) and each one's growth from the
    T before it: x2 per doubling of T on the fused path (O(T)), nearing x4 on the math one
    (the (T, T) weights)."""
    by_setting = OrderedDict()
    for result in results:
        if (is_attention(result) and result["framework"] == "memgrad"
                and result.get("activation_bytes") is not None and result.get("backend") in ATTENTION_BACKENDS):
            setting = (f"B{result.get('B')} H{result.get('H')} D{result.get('D')} {result.get('dtype')}"
                       + (" causal" if result.get("causal") else ""))
            by_t = by_setting.setdefault(setting, {}).setdefault(result["T"], {})
            by_t[result["backend"]] = max(by_t.get(result["backend"], 0), result["activation_bytes"])
    rows = []
    for setting, by_t in by_setting.items():
        previous = {}
        for t in sorted(by_t):
            row = {"setting": setting, "T": t}
            for backend in ATTENTION_BACKENDS:
                current = by_t[t].get(backend)
                row[backend] = mib(current)
                row[backend + "_growth"] = ratio_text(current, previous.get(backend))
                if current is not None:
                    previous[backend] = current
            row["math_over_fused"] = ratio_text(by_t[t].get("math"), by_t[t].get("fused"))
            rows.append(row)
    return rows


CATEGORIES = ("ACTIVATION", "TEMPORARY", "WORKSPACE", "AUTOCAST_CACHE", "COMMUNICATION")


def category_rows(results):
    """memgrad's peak bytes per category (MiB, highest run) for each configuration."""
    rows = []
    for config, by_framework in group_by_config(results).items():
        runs = [r for r in by_framework.get("memgrad", []) if r.get("peak_bytes_by_category")]
        if not runs:
            continue
        row = {"config": config}
        for category in CATEGORIES:
            row[category] = mib(max(r["peak_bytes_by_category"].get(category, 0) for r in runs))
        rows.append(row)
    return rows


def host_issue_rows(results):
    """Per configuration, each framework's host time to issue one step (lowest run) beside
    its step time: a step whose issue time nears its step time is bound by the host."""
    rows = []
    for config, by_framework in group_by_config(results).items():
        row = {"config": config}
        for name in ("memgrad", "pytorch"):
            runs = [r for r in by_framework.get(name, []) if r.get("host_issue_ms") is not None]
            row[name] = (f"{min(r['host_issue_ms'] for r in runs):.2f} of "
                         f"{min(r['step_ms_median'] for r in runs):.2f}") if runs else "-"
        if row["memgrad"] != "-" or row["pytorch"] != "-":
            rows.append(row)
    return rows


def host_overhead_rows(results):
    by_framework = OrderedDict()
    for result in results:
        if result.get("benchmark") == "host_overhead":
            key = (result["framework"], result.get("device"), result.get("tiny_op", "add"))
            by_framework.setdefault(key, []).append(result)
    return [{"framework": framework, "device": device, "tiny_op": tiny_op,
             "us_per_op": " / ".join(f"{r['us_per_op']:.2f}" for r in runs),
             "us_per_op_synced": " / ".join(f"{r['us_per_op_synced']:.2f}" for r in runs)}
            for (framework, device, tiny_op), runs in by_framework.items()]


LOSS_TOLERANCE = 0.02  # bench/gpt_loss_reference.py's default --tolerance


def read_json_file(path):
    """The JSON object in `path` (one line or a whole file), or None if it holds none (the
    run crashed before writing it)."""
    try:
        with open(path, encoding="utf-8") as file:
            value = json.loads(file.read().strip() or "null")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def gpt_loss_paths(args):
    """--gpt-loss-json's files, or else gpu-check's gpt_loss_pytorch_<precision>.json beside
    the bench file (its stage gpt-loss-reference writes them into the same folder)."""
    if args.gpt_loss_json:
        return args.gpt_loss_json
    folder = os.path.dirname(os.path.abspath(args.jsonl))
    return sorted(glob.glob(os.path.join(folder, "gpt_loss_pytorch_*.json")))


def gpt_loss_rows(paths):
    """Per gpt_loss_reference.py output (PyTorch's curve, with memgrad's beside it in its
    "compare" section): the final validation loss of each and their relative difference
    memgrad / pytorch - 1, within LOSS_TOLERANCE or not. Without a compare section memgrad's
    loss comes from its --summary-json, gpt_loss_memgrad_<precision>.json beside; a run that
    wrote nothing shows "-"."""
    rows = []
    for path in paths:
        pytorch = read_json_file(path) or {}
        compare = pytorch.get("compare") or {}
        memgrad_loss = compare.get("memgrad_val_loss")
        if memgrad_loss is None:
            folder, name = os.path.split(path)
            memgrad = read_json_file(os.path.join(folder, name.replace("gpt_loss_pytorch_", "gpt_loss_memgrad_")))
            memgrad_loss = (memgrad or {}).get("val_loss")
        pytorch_loss = pytorch.get("val_loss")
        relative = memgrad_loss / pytorch_loss - 1 if memgrad_loss is not None and pytorch_loss else None
        precision = pytorch.get("amp") or re.sub(r"^gpt_loss_pytorch_|\.json$", "", os.path.basename(path))
        run = (f"{pytorch['preset']} {pytorch['steps']} steps b{pytorch['batch_size']}"
               if all(key in pytorch for key in ("preset", "steps", "batch_size")) else os.path.basename(path))
        rows.append({
            "run": run,
            "precision": precision,
            "memgrad": "-" if memgrad_loss is None else f"{memgrad_loss:.4f}",
            "pytorch": "-" if pytorch_loss is None else f"{pytorch_loss:.4f}",
            "relative": "-" if relative is None else f"{relative:+.2%}",
            "within": "-" if relative is None else ("yes" if abs(relative) <= LOSS_TOLERANCE else "NO"),
        })
    return rows


def print_table(headers, rows, keys, markdown):
    cells = [[str(row[key]) for key in keys] for row in rows]
    if markdown:
        print("| " + " | ".join(headers) + " |")
        print("|" + "|".join(" --- " for _ in headers) + "|")
        for line in cells:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(h), *(len(line[i]) for line in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    for line in cells:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)))


def main(argv):
    parser = argparse.ArgumentParser(description="Summarise bench.jsonl (memgrad vs PyTorch).")
    parser.add_argument("jsonl", help="JSON lines from bench_train_step and torch_reference.py")
    parser.add_argument("--ctest-log", help="ctest's output, for the test counts")
    parser.add_argument("--training-json", action="append", default=[],
                        help="an example's --summary-json file (mnist, resnet); may repeat")
    parser.add_argument("--gpt-loss-json", action="append", default=[],
                        help="bench/gpt_loss_reference.py --compare's output (PyTorch's loss curve, memgrad's "
                             "beside); may repeat; default: gpt_loss_pytorch_*.json beside JSONL, as gpu-check "
                             "writes them")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)

    if args.ctest_log:
        counts = ctest_counts(args.ctest_log)
        if counts is None:
            print(f"tests: no ctest summary in {args.ctest_log}")
        else:
            passed, failed, skipped, total = counts
            print(f"tests: {passed} passed, {failed} failed, {skipped} skipped (of {total})")
    for path in args.training_json:
        try:
            with open(path, encoding="utf-8") as file:
                run = json.load(file)
            amp = f" amp {run['amp']}" if run.get("amp", "fp32") != "fp32" else ""
            print(f"{run.get('model', 'training')}{amp}: test accuracy {100 * run['test_accuracy']:.2f}% after "
                  f"{run['epochs']} epochs on {run['device']}, {run['seconds']:.1f} s, "
                  f"{run['samples_per_s']:.0f} samples/s")
        except (OSError, ValueError, KeyError) as error:
            print(f"training: no summary ({path}: {error})")

    try:
        results, skipped = read_results(args.jsonl)
    except OSError as error:
        print(f"benchmarks: cannot read {args.jsonl}: {error}")
        return 1
    if skipped:
        print(f"({skipped} line(s) of {args.jsonl} were not benchmark results)")
    attention_results = [r for r in results if is_attention(r)]
    results = [r for r in results if not is_attention(r)]
    rows = training_table(results)
    if rows:
        headers = ["config", "memgrad ms", "pytorch ms", "ratio", "faster"]
        keys = ["config", "memgrad_runs", "pytorch_runs", "ratio", "faster"]
        compile_note = ""
        # NOTE: the compile columns only where torch.compile ran, so that a run without it
        # (ResNet, MLP) prints the table it always has.
        if any("compile_runs" in row for row in rows):
            headers += ["compile ms", "ratio to compile"]
            keys += ["compile_runs", "compile_ratio"]
            compile_note = " compile = PyTorch under torch.compile, ratio to compile = memgrad / it, best runs;"
            for row in rows:
                row.setdefault("compile_runs", "-")
                row.setdefault("compile_ratio", "-")
        print("\nTraining step (median ms of each run; ratio = memgrad / pytorch, best runs;" + compile_note +
              " peak = allocated bytes during one step, highest run; mem ratio = memgrad / pytorch):")
        print_table(headers + ["memgrad peak", "pytorch peak", "mem ratio", "mem <= torch"], rows,
                    keys + ["memgrad_peak", "pytorch_peak", "memory_ratio", "memory_ok"], args.markdown)
    categories = category_rows(results)
    if categories:
        print("\nmemgrad's peak bytes by category during one step (highest run):")
        print_table(["config", *CATEGORIES], categories, ["config", *CATEGORIES], args.markdown)
    issue = host_issue_rows(results)
    if issue:
        print("\nHost time to issue one step, of the step's median (ms):")
        print_table(["config", "memgrad", "pytorch"], issue, ["config", "memgrad", "pytorch"], args.markdown)
    recorder = recorder_overhead_rows(results)
    if recorder:
        print("\nThe memory Recorder's cost (memgrad median step ms, without / with --memory-timeline):")
        print_table(["config", "plain", "recording", "overhead"], recorder,
                    ["config", "plain", "recording", "overhead"], args.markdown)
    predictions = prediction_rows(results)
    if predictions:
        print("\nPredicted peak memory (resnet --bench --predict-memory) against memgrad's measured peak "
              "(allocated bytes of one step; error = predicted / measured - 1; cuDNN's workspace asked of the GPU "
              "or estimated):")
        print_table(["config", "predicted", "measured", "error", "predicted WORKSPACE", "measured WORKSPACE",
                     "cuDNN"], predictions,
                    ["config", "predicted", "measured", "error", "predicted_workspace", "measured_workspace",
                     "cudnn"], args.markdown)
    model_flops = flops_rows(results)
    if model_flops:
        print("\nGPT model FLOPs (6 N + 12 L T C a token; MFU of the dense peak, bench/model_flops.py):")
        print_table(FLOPS_HEADERS, model_flops, FLOPS_KEYS, args.markdown)
    budgets = budget_rows(results)
    if budgets:
        print("\nPlans for a memory budget (--memory-budget): the chosen plan predicted and measured (peak "
              "reserved bytes, median step); whole ckpt = --checkpoint whole at the same batch; sweep best = the "
              "fastest run without a budget of the same problem whose measured peak fits (the hand sweep):")
        print_table(BUDGET_HEADERS, budgets, BUDGET_KEYS, args.markdown)
    overhead = host_overhead_rows(results)
    if overhead:
        print("\nHost overhead per tiny op (µs; issue only / including the wait for the device):")
        print_table(["framework", "device", "op", "µs/op issued", "µs/op synced"], overhead,
                    ["framework", "device", "tiny_op", "us_per_op", "us_per_op_synced"], args.markdown)
    attention = attention_rows(attention_results)
    if attention:
        print("\nAttention alone (sdpa; median ms of each run, forward + backward and forward; ratio = memgrad / "
              "pytorch, best runs; peak = allocated bytes during one forward + backward, highest run):")
        print_table(["shape", "backend", "memgrad fwd+bwd", "pytorch fwd+bwd", "ratio", "memgrad fwd",
                     "pytorch fwd", "ratio fwd", "memgrad peak", "pytorch peak"], attention,
                    ["shape", "backend", "memgrad_fb", "pytorch_fb", "ratio_fb", "memgrad_f", "pytorch_f",
                     "ratio_f", "memgrad_peak", "pytorch_peak"], args.markdown)
    attention_memory = attention_memory_rows(attention_results)
    if attention_memory:
        print("\nAttention memory (what one call keeps for backward, activation_bytes; growth = this T / "
              "the T before, x2 expected fused, near x4 math):")
        print_table(["setting", "T", "fused", "fused growth", "math", "math growth", "math / fused"],
                    attention_memory,
                    ["setting", "T", "fused", "fused_growth", "math", "math_growth", "math_over_fused"], args.markdown)
    losses = gpt_loss_rows(gpt_loss_paths(args))
    if losses:
        print("\nGPT loss curves (final validation loss, memgrad against PyTorch from the same weights and "
              "batches; relative = memgrad / pytorch - 1):")
        print_table(["run", "precision", "memgrad val loss", "pytorch val loss", "relative",
                     f"within {LOSS_TOLERANCE:.0%}"], losses,
                    ["run", "precision", "memgrad", "pytorch", "relative", "within"], args.markdown)
    if not rows and not overhead and not predictions and not attention:
        print(f"benchmarks: no results in {args.jsonl}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
