#!/usr/bin/env python3
"""bench/torch_host_adam.py — PyTorch's CPU AdamW on the same work as bench/host_adam.cpp:
one float32 parameter of N elements (default 1e7), float32 gradient, lr 1e-4, weight decay
0.01, the best of R steps after one warm-up step, with torch's intra-op threads set to T
(default: every core, as bench_host_adam's OpenMP). Three implementations:

  default   what torch.optim.AdamW picks for CPU tensors (the single-tensor for loop)
  foreach   foreach=True (the multi-tensor path, PyTorch's default on CUDA)
  fused     fused=True (one fused CPU kernel per tensor)

Prints one row per implementation in bench_host_adam's format (28 bytes per element:
param, exp_avg, exp_avg_sq and the gradient read, the first three written), and a last
line of JSON with ns per element of each.

  python3 bench/torch_host_adam.py [elements] [repeats] [threads]
"""
import json
import os
import sys
import time

import torch


def best_seconds(repeats, work):
    work()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    count = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__} CPU AdamW, {count} elements, {torch.get_num_threads()} threads, "
          f"best of {repeats}")
    results = {}
    for name, options in (("default", {}), ("foreach", {"foreach": True}), ("fused", {"fused": True})):
        param = torch.full((count,), 0.5, requires_grad=True)
        param.grad = torch.full((count,), 1e-3)
        optimizer = torch.optim.AdamW([param], lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                      **options)
        with torch.no_grad():
            seconds = best_seconds(repeats, optimizer.step)
        results[name] = seconds * 1e9 / count
        print(f"{'torch AdamW ' + name:<34} {seconds * 1e3:8.3f} ms {seconds * 1e9 / count:8.3f} ns/element "
              f"{28.0 * count / seconds / 1e9:6.1f} GB/s  (28.0 bytes/element)")
    print(json.dumps({"torch_adamw_ns_per_element": results, "elements": count, "threads": threads}))


if __name__ == "__main__":
    main()
