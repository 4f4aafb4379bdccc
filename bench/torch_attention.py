#!/usr/bin/env python3
"""bench/torch_attention.py — PyTorch's torch.nn.functional.scaled_dot_product_attention
(its default backend choice) doing what bench_attention (bench/attention.cpp) does, for a
side-by-side comparison on the same GPU: q, k, v (B, H, T, D) leaves requiring grad,
out = sdpa(q, k, v, is_causal, dropout_p), out.backward(grad_output), the leaves' grads
set to None before each step; the same flags and the same JSON fields.

  * every one of --steps steps after --warmup steps is bracketed by torch.cuda.Event marks
    and the median interval is reported (interpolated between ranks as memgrad's
    examples/common/timeline.h does), first for the forward alone, then for forward +
    backward;
  * peak_allocated: torch.cuda.reset_peak_memory_stats(), one forward + backward step after
    the warm-up, torch.cuda.max_memory_allocated() (q, k, v and grad_output included, as in
    bench_attention).

  python3 bench/torch_attention.py --batch 8 --heads 12 --seq 1024 --head-dim 64 \\
      --dtype bf16 --causal --steps 50 --warmup 10
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv):
    parser = argparse.ArgumentParser(description="PyTorch reference for bench_attention (same flags, same JSON).")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50)
    return parser.parse_args(argv)


def quantile(values, q):
    """NumPy's default (linear) quantile, as examples/common/timeline.h computes it."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median_ms(step, warmup, steps):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    marks[0].record()
    for i in range(steps):
        step()
        marks[i + 1].record()
    torch.cuda.synchronize()
    return quantile([marks[i].elapsed_time(marks[i + 1]) for i in range(steps)], 0.5)


def main(argv):
    args = parse_args(argv)
    device = torch.device("cuda")
    dtype = DTYPES[args.dtype]
    generator = torch.Generator(device=device).manual_seed(0)
    sizes = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(sizes, dtype=dtype, device=device, generator=generator).requires_grad_()
               for _ in range(3))
    grad_output = torch.randn(sizes, dtype=dtype, device=device, generator=generator)

    def reset_grads():
        q.grad = k.grad = v.grad = None

    def forward():
        reset_grads()
        return F.scaled_dot_product_attention(q, k, v, dropout_p=args.dropout, is_causal=args.causal)

    def forward_backward():
        forward().backward(grad_output)

    ms_forward = median_ms(forward, args.warmup, args.steps)
    ms_forward_backward = median_ms(forward_backward, args.warmup, args.steps)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    forward_backward()
    torch.cuda.synchronize()
    peak_allocated = torch.cuda.max_memory_allocated()

    print(json.dumps({
        "framework": "pytorch",
        "op": "sdpa",
        "backend": "torch-default",
        "dtype": args.dtype,
        "B": args.batch,
        "H": args.heads,
        "T": args.seq,
        "D": args.head_dim,
        "causal": args.causal,
        "dropout": args.dropout,
        "warmup": args.warmup,
        "steps": args.steps,
        "ms_forward": ms_forward,
        "ms_forward_backward": ms_forward_backward,
        "peak_allocated": peak_allocated,
        "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
