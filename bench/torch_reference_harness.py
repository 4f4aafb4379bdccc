"""bench/torch_reference_harness.py — how bench/torch_reference.py measures, the same way
as memgrad's benchmarks (bench/train_step.cpp): the TF32 settings, a timeline of CUDA
events (or the host clock), the step measurements (median, p10, p90, mean, the host's
issue time, peak memory), the quantiles, and the figures a --ddp run gathers from every
rank. Also imported by bench/gpt_loss_reference.py and interop/interop_checks.py
(set_tf32).
"""
import math
import time

import torch
import torch.distributed


def rank():
    """This process's rank under --ddp (torchrun), else 0."""
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


def add_ddp_fields(result, batch):
    """--ddp: the job's figures in rank 0's result (every rank calls this: it gathers)."""
    world_size = torch.distributed.get_world_size()
    mine = torch.tensor([result["step_ms_median"], float(result["peak_allocated_bytes"] or 0)],
                        dtype=torch.float64, device="cuda")
    everyone = [torch.empty_like(mine) for _ in range(world_size)]
    torch.distributed.all_gather(everyone, mine)
    result["world_size"] = world_size
    result["ddp"] = True
    result["samples_per_s"] = world_size * batch / (result["mean_ms"] / 1000.0)
    result["per_rank_step_ms_median"] = [float(each[0]) for each in everyone]
    result["per_rank_peak_allocated_bytes"] = [int(each[1]) for each in everyone]


def set_tf32(matmul, cudnn):
    """Whether float32 matmuls (cuBLAS) and convolutions (cuDNN) may run on TF32 tensor
    cores (about 10 mantissa bits in the products) or must compute in full float32."""
    backends = torch.backends
    # NOTE: PyTorch 2.9 added the fp32_precision settings and deprecated allow_tf32; mixing
    # the two kinds of setting is refused, so use the new one where it exists.
    if hasattr(backends.cuda.matmul, "fp32_precision"):
        backends.cuda.matmul.fp32_precision = "tf32" if matmul else "ieee"
        for backend in (backends.cudnn, getattr(backends.cudnn, "conv", None), getattr(backends.cudnn, "rnn", None)):
            if backend is not None and hasattr(backend, "fp32_precision"):
                backend.fp32_precision = "tf32" if cudnn else "ieee"
    else:
        backends.cuda.matmul.allow_tf32 = matmul
        backends.cudnn.allow_tf32 = cudnn


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


def measure_steps(step, device, warmup, steps, batch):
    """bench/train_step.cpp's measurements of `step` (which issues one training step and does
    not wait): `warmup` untimed steps, one from reset_peak_memory_stats() for the peak memory
    and the host's issue time, then `steps` steps between timeline marks."""
    for _ in range(warmup):
        step()

    # Peak memory of one step, from the state a step starts in.
    peak_allocated = peak_reserved = None
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    issue_start = time.perf_counter()
    step()
    host_issue_ms = (time.perf_counter() - issue_start) * 1000.0  # as memgrad's host_issue_ms
    synchronize(device)
    if device.type == "cuda":
        peak_allocated = torch.cuda.max_memory_allocated(device)
        peak_reserved = torch.cuda.max_memory_reserved(device)

    timeline = Timeline(device, steps + 1)
    # The timed steps alone for a profiler started with its capture off (as memgrad's
    # cuda::ProfilerRange; bench/kernel_profile.py --timed-steps-only).
    if device.type == "cuda":
        torch.cuda.profiler.start()
    loop_start = time.perf_counter()
    timeline.mark()
    for _ in range(steps):
        step()
        timeline.mark()
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.profiler.stop()
    loop_ms = (time.perf_counter() - loop_start) * 1000.0
    step_ms = timeline.intervals_ms()
    mean_ms = loop_ms / steps
    return {
        "warmup": warmup,
        "steps": steps,
        "step_ms_median": quantile(step_ms, 0.5),
        "step_ms_p10": quantile(step_ms, 0.1),
        "step_ms_p90": quantile(step_ms, 0.9),
        "mean_ms": mean_ms,
        "host_issue_ms": host_issue_ms,
        "samples_per_s": batch / (mean_ms / 1000.0),
        "peak_allocated_bytes": peak_allocated,
        "peak_reserved_bytes": peak_reserved,
    }
