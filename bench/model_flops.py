"""bench/model_flops.py — the GPT runs' model FLOP rate and MFU, for bench/summarize.py.

memgrad's `gpt --bench` writes model_flops_per_token (6 N + 12 L T C: nn::GPT::
training_flops_per_token, the count llm.c and PaLM use); a PyTorch run of the same
configuration is credited with the same count, so the TFLOP/s compare the two at equal work.
MFU is that rate over the card's dense peak: 989.4 TFLOP/s for 16-bit tensor-core products and
66.9 for float32 (no TF32) on an H100 SXM or H200 (NVIDIA's datasheets; both cards share
them).
"""

PEAK_TFLOP_PER_S = {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}


def _configuration(result):
    return (result.get("model"), result.get("batch"), result.get("accum", 1), result.get("amp") or "fp32",
            result.get("checkpoint") in (True, "whole"), bool(result.get("cuda_graph")))


def flops_rows(results):
    """One row per GPT run that reports tokens/s, where a memgrad run of its configuration
    gives the FLOPs per token."""
    per_token = {_configuration(r): r["model_flops_per_token"] for r in results if "model_flops_per_token" in r}
    rows = []
    for result in results:
        flops = per_token.get(_configuration(result))
        if flops is None or not result.get("tokens_per_s"):
            continue
        model, batch, accum, amp, checkpoint, graph = _configuration(result)
        framework = result.get("framework", "?") + (" compile" if result.get("compile") else "")
        tflops = flops * result["tokens_per_s"] / 1e12
        peak = PEAK_TFLOP_PER_S.get(amp)
        rows.append({
            "config": f"{model} b{batch}{f' x {accum}' if accum > 1 else ''} {amp}"
                      f"{' checkpoint' if checkpoint else ''}{' cuda-graph' if graph else ''}",
            "framework": framework,
            "tokens_per_s": f"{result['tokens_per_s']:.0f}",
            "tflops": f"{tflops:.1f}",
            "mfu": f"{100 * tflops / peak:.1f}%" if peak else "-",
        })
    return rows


FLOPS_HEADERS = ["config", "framework", "tokens/s", "model TFLOP/s", "MFU"]
FLOPS_KEYS = ["config", "framework", "tokens_per_s", "tflops", "mfu"]
