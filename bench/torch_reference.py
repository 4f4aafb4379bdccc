#!/usr/bin/env python3
"""bench/torch_reference.py — PyTorch eager doing what bench_train_step does, for a
side-by-side comparison on the same GPU: the same 784-512-256-10 MLP (nn.Linear's default
initialisation, as memgrad's Linear), a fixed random batch on the device, cross-entropy,
the same optimizer with torch.optim's defaults (Adam: lr 1e-3, foreach), zero_grad with
set_to_none, and the same measurements:

  * every one of --steps steps after --warmup steps is bracketed by torch.cuda.Event marks
    (the host clock on the CPU); median, p10 and p90 of those intervals, interpolated
    linearly between ranks exactly as bench/train_step.cpp does;
  * mean_ms: wall time of the whole timed loop (to the final synchronize) / --steps;
  * peak memory of one step after the warm-up: reset_peak_memory_stats(), one step,
    max_memory_allocated() and max_memory_reserved();
  * TF32 is off for matmuls and cuDNN, so both frameworks compute in full float32.

--host-overhead times a chain of tiny ops (y = y * 1.0001 + 0.5 on one element, no grad)
and reports the host's microseconds per op. Output: one JSON line per run on stdout, in the
same format as bench_train_step with "framework": "pytorch".

  python3 bench/torch_reference.py --model mlp --batch 128 --optim adam --device cuda \\
      --warmup 50 --steps 500
  python3 bench/torch_reference.py --host-overhead --device cuda
"""
import argparse
import json
import math
import sys
import time

import torch

PIXELS = 28 * 28
CLASSES = 10


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="PyTorch eager reference for bench_train_step (same flags, same JSON line).")
    parser.add_argument("--model", default="mlp", choices=["mlp"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--optim", default="adam", choices=["sgd", "adam", "adamw", "adagrad"])
    parser.add_argument("--lr", type=float, default=None,
                        help="default: torch.optim's (sgd: 0.01 with momentum 0.9)")
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--host-overhead", action="store_true",
                        help="time a chain of tiny ops instead of training steps")
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    for name, minimum in (("batch", 1), ("warmup", 0), ("steps", 1), ("ops", 2), ("repeats", 1)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name} must be at least {minimum}, got {getattr(args, name)}")
    if args.lr is not None and not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"--lr must be a positive number, got {args.lr}")
    return args


def disable_tf32():
    """Full float32 in cuBLAS and cuDNN, as memgrad computes by default."""
    matmul = torch.backends.cuda.matmul
    cudnn = torch.backends.cudnn
    # NOTE: PyTorch 2.9 added the fp32_precision settings and deprecated allow_tf32; mixing
    # the two kinds of setting is refused, so use the new one where it exists.
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
        for backend in (cudnn, getattr(cudnn, "conv", None), getattr(cudnn, "rnn", None)):
            if backend is not None and hasattr(backend, "fp32_precision"):
                backend.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
        cudnn.allow_tf32 = False


def quantile(values, q):
    """The q-quantile with linear interpolation between the two nearest ranks (NumPy's
    default; bench/train_step.cpp computes the same)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Timeline:
    """Marks points on the device's timeline without waiting (CUDA events on the current
    stream, or the host clock on the CPU) and reports the time between them afterwards."""

    def __init__(self, device, marks):
        self.device = device
        self.marks = []
        if device.type == "cuda":
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(marks)]
            # NOTE: a torch.cuda.Event creates its CUDA event at its first record(); recording
            # each once here keeps that cost out of the timed steps (memgrad does the same).
            for event in self.events:
                event.record()
            synchronize(device)

    def mark(self):
        if self.device.type == "cuda":
            event = self.events[len(self.marks)]
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def intervals_ms(self):
        synchronize(self.device)
        if self.device.type == "cuda":
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1000.0 for a, b in zip(self.marks, self.marks[1:])]


def build_mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(PIXELS, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES))


def make_optimizer(args, params):
    if args.optim == "sgd":
        return torch.optim.SGD(params, lr=args.lr or 0.01, momentum=0.9)
    if args.optim == "adam":
        return torch.optim.Adam(params, lr=args.lr or 1e-3)
    if args.optim == "adamw":
        return torch.optim.AdamW(params, lr=args.lr or 1e-3)
    return torch.optim.Adagrad(params, lr=args.lr or 1e-2)


def run_train_step(args, device):
    torch.manual_seed(args.seed)
    model = build_mlp().to(device)
    optimizer = make_optimizer(args, model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    # Made on the host and copied over, as a data loader's batch arrives; reused by every step.
    data_generator = torch.Generator().manual_seed(args.seed + 1)
    inputs = torch.randn(args.batch, PIXELS, generator=data_generator).to(device)
    targets = torch.randint(0, CLASSES, (args.batch,), generator=data_generator).to(device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()

    # Peak memory of one step, from the state a step starts in.
    peak_allocated = peak_reserved = None
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step()
    synchronize(device)
    if device.type == "cuda":
        peak_allocated = torch.cuda.max_memory_allocated(device)
        peak_reserved = torch.cuda.max_memory_reserved(device)

    timeline = Timeline(device, args.steps + 1)
    loop_start = time.perf_counter()
    timeline.mark()
    for _ in range(args.steps):
        step()
        timeline.mark()
    synchronize(device)
    loop_ms = (time.perf_counter() - loop_start) * 1000.0
    step_ms = timeline.intervals_ms()
    mean_ms = loop_ms / args.steps

    return {
        "framework": "pytorch",
        "model": args.model,
        "batch": args.batch,
        "optim": args.optim,
        "device": args.device,
        "warmup": args.warmup,
        "steps": args.steps,
        "step_ms_median": quantile(step_ms, 0.5),
        "step_ms_p10": quantile(step_ms, 0.1),
        "step_ms_p90": quantile(step_ms, 0.9),
        "mean_ms": mean_ms,
        "samples_per_s": args.batch / (mean_ms / 1000.0),
        "peak_allocated_bytes": peak_allocated,
        "peak_reserved_bytes": peak_reserved,
        "peak_bytes_by_category": None,  # PyTorch does not say what its bytes are for
        "torch_version": torch.__version__,
    }


def run_host_overhead(args, device):
    """Host time to issue one tiny op: a chain of dependent ops on one element, timed from
    the first issue to the last (the device runs behind and is not waited for), repeated and
    the median taken; us_per_op_synced includes waiting for the device."""
    ops = args.ops // 2 * 2
    with torch.no_grad():
        y = torch.ones(1, device=device)

        def chain(y):
            for _ in range(ops // 2):  # two ops per turn
                y = y * 1.0001 + 0.5
            return y

        y = chain(y)  # warm-up
        synchronize(device)
        issue_us, synced_us = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            y = chain(y)
            issued = time.perf_counter()
            synchronize(device)
            done = time.perf_counter()
            issue_us.append((issued - start) * 1e6 / ops)
            synced_us.append((done - start) * 1e6 / ops)
        result = y.item()
    return {
        "framework": "pytorch",
        "benchmark": "host_overhead",
        "device": args.device,
        "ops": ops,
        "repeats": args.repeats,
        "us_per_op": quantile(issue_us, 0.5),
        "us_per_op_synced": quantile(synced_us, 0.5),
        "result": result,
        "torch_version": torch.__version__,
    }


def main(argv):
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda, but PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        disable_tf32()
    result = run_host_overhead(args, device) if args.host_overhead else run_train_step(args, device)
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
