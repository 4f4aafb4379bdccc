#!/usr/bin/env python3
"""bench/torch_reference.py — PyTorch eager doing what memgrad's benchmarks do, for a
side-by-side comparison on the same GPU, with the same model, a fixed random batch on the
device, cross-entropy, the same optimizer, zero_grad with set_to_none:

  * --model mlp, as bench_train_step: the 784-512-256-10 MLP (nn.Linear's default
    initialisation, as memgrad's Linear) and torch.optim's defaults (Adam: lr 1e-3, foreach
    on cuda, its per-parameter loop on the CPU; sgd: lr 0.01, momentum 0.9). Defaults:
    --batch 128 --warmup 50 --steps 500 --optim adam. --device cpu --threads N runs on N CPU
    threads (torch.set_num_threads); the peak-memory fields are then null.
  * --model cnn, as bench_train_step --model cnn: memgrad's nn::MnistCnn (PyTorch's MNIST
    example net, returning logits instead of log_softmax: the loss is cross-entropy in
    both) layer for layer on (B, 1, 28, 28) inputs, torch.nn's default initialisation, and
    the MLP's optimizers and defaults.
  * --model resnet18 / resnet50, as `resnet --bench` (examples/resnet/bench.cpp): resnet18
    with the small-image stem (3x3 stride-1 first convolution, no max pool) on 3x32x32
    inputs and 10 classes, resnet50 as on ImageNet (3x224x224, 1000 classes), torchvision's
    model and initialisation (interop/torch_resnet.py: torchvision when installed, else a
    faithful torch.nn copy), float32, in training mode; SGD with lr 0.1, momentum 0.9,
    weight decay 5e-4 and Nesterov momentum, exactly as examples/resnet/bench.cpp (the only
    optimizer there). Defaults: --batch 256 --warmup 5 --steps 20 --optim sgd, as there.
    --channels-last stores the model and the batch channels-last (NHWC). --amp fp16|bf16
    runs the forward under torch.autocast in that dtype, with a torch.amp.GradScaler for
    fp16, as `resnet --bench --amp` does; --checkpoint recomputes the stem and each
    residual block of layer1..layer4 in backward (torch.utils.checkpoint, non-reentrant),
    as `resnet --bench --checkpoint`.
    NOTE: torch.backends.cudnn.benchmark keeps PyTorch's default (off) unless
    --cudnn-benchmark: the reference is PyTorch eager as a user gets it.
  * --model gpt2, as `gpt --bench` (examples/gpt/bench.cpp): GPT-2 124M (12 layers, 12
    heads, 768 wide, T = 1024, GPT-2's 50257 tokens with the table padded to 50304) in
    plain torch.nn (interop/torch_gpt.py: F.scaled_dot_product_attention, the head tied to
    the token table, nanoGPT's initialisation), one batch of random tokens (below 50257)
    from a seeded generator; a step is zero_grad, forward, the cross-entropy of every
    position, backward, clip_grad_norm_(1.0) and torch.optim.AdamW(fused=True on cuda) with
    the training run's settings: betas 0.9 / 0.99, weight decay 0.1 on the matrices (2-d
    parameters: the Linear weights and both embedding tables), none on biases and
    LayerNorms. --amp bf16 runs the forward under autocast bfloat16 (fp16 adds a
    GradScaler, unscaled before clipping); --checkpoint recomputes each block in backward.
    Defaults: --batch 16 --warmup 5 --steps 20 --optim adamw --lr 1e-3. --compile times
    torch.compile(model) as well, after the eager run in the same call (two JSON lines:
    "framework" "pytorch", then "pytorch-compile"; the compile happens in the warm-up);
    --compiled-only leaves the eager run out.
    --preset gpt2-medium|gpt2-large|gpt2-xl takes those sizes instead of 124M's, as `gpt
    --preset`. --activation-memory-budget F (0 < F <= 1, with --compile) sets
    torch._functorch.config.activation_memory_budget for the compiled run: Inductor then
    recomputes in backward what it must so that the saved activations are at most F of what
    it saves by default (torch.compile's only memory lever; memgrad's --memory-budget is
    compared with it at the same measured peak).

--memory-cap BYTES (cuda) caps what PyTorch's caching allocator may reserve, with
torch.cuda.set_per_process_memory_fraction(BYTES / the card's memory), as a smaller card
would; a run that then runs out of memory prints its JSON line with "out_of_memory" (the
error's first line) instead of the timings, and the program still exits 0 (the result is
what the cap allowed). Without a cap, "out_of_memory" is null and an out-of-memory error
ends the program as usual.

and the same measurements:

  * every one of --steps steps after --warmup steps is bracketed by torch.cuda.Event marks
    (the host clock on the CPU); median, p10 and p90 of those intervals, interpolated
    linearly between ranks exactly as bench/train_step.cpp does;
  * mean_ms: wall time of the whole timed loop (to the final synchronize) / --steps;
  * host_issue_ms: the host's time to issue the peak-memory step to an idle device (near
    the step time: the step is bound by the host);
  * peak memory of one step after the warm-up: reset_peak_memory_stats(), one step,
    max_memory_allocated() and max_memory_reserved();
  * TF32 as memgrad's defaults (which are PyTorch's): off for matmuls (cuBLAS), allowed
    for convolutions (cuDNN), recorded in the JSON line as tf32_matmul / tf32_cudnn. The
    MLP so computes in full float32; the ResNets' convolutions may use TF32 in both.

--cuda-graph (mlp and cnn on cuda, float32, sgd/adam/adamw) captures the whole step as
one CUDA graph, as PyTorch's documentation does for whole-network capture: the optimizer
made with capturable=True (Adam, AdamW), three warm-up steps on a side stream,
zero_grad(set_to_none=True) before torch.cuda.graph(g) records forward, loss, backward and
step; each timed step is then g.replay() (the --warmup steps replay too). Compare with
bench_train_step --cuda-graph.

--ddp (resnets and gpt2 on cuda, started by torchrun) is PyTorch's DistributedDataParallel
doing what `resnet --bench --distributed` and `gpt --bench --distributed` do: one process
per GPU (cuda:LOCAL_RANK), the NCCL backend, DDP with its defaults (buckets of 25 MiB, the
first 1 MiB), --batch per rank, each rank its own random batch (seed + 1 + rank). Every
rank times its own steps; rank 0 prints the JSON line, with "world_size", the job's
"samples_per_s" (world_size x batch / rank 0's mean step) and every rank's median step and
peak allocated bytes (gathered). Scaling efficiency: samples_per_s with N GPUs over N x
the 1-GPU run's (torchrun --nproc-per-node 1).

  torchrun --nproc-per-node 2 bench/torch_reference.py --ddp --model resnet50 --batch 128 \
      --amp fp16 --channels-last

--host-overhead times a chain of tiny ops (y = y * 1.0001 + 0.5 on one element, no grad)
and reports the host's microseconds per op. Output: one JSON line per run on stdout, in the
same format as bench_train_step with "framework": "pytorch".

  python3 bench/torch_reference.py --model mlp --batch 128 --optim adam --device cuda \\
      --warmup 50 --steps 500
  python3 bench/torch_reference.py --model cnn --device cpu --threads 2 --warmup 5 --steps 30
  python3 bench/torch_reference.py --model resnet50 --batch 64 --device cuda [--channels-last]
  python3 bench/torch_reference.py --model gpt2 --batch 16 --amp bf16 --device cuda --compile
  python3 bench/torch_reference.py --host-overhead --device cuda

This file is the command line; the rest lives beside it: torch_reference_models.py (the
models and their optimizers), torch_reference_runs.py (the runs: training steps, GPT-2,
host overhead) and torch_reference_harness.py (the measurements and the TF32 settings).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.distributed

from torch_reference_harness import rank, set_tf32
from torch_reference_models import RESNET_SHAPES
from torch_reference_runs import run_gpt, run_host_overhead, run_train_step

# Per model: (batch, warmup, steps, optimizer) when not given on the command line.
DEFAULTS = {"mlp": (128, 50, 500, "adam"), "cnn": (128, 50, 500, "adam"), "resnet18": (256, 5, 20, "sgd"),
            "resnet50": (256, 5, 20, "sgd"), "gpt2": (16, 5, 20, "adamw")}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="PyTorch eager reference for bench_train_step and resnet --bench (same flags, "
                    "same JSON line).")
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", *RESNET_SHAPES, "gpt2"])
    parser.add_argument("--batch", type=int, default=None,
                        help="default: 128 (mlp, cnn), 256 (resnets), 16 (gpt2)")
    parser.add_argument("--optim", default=None, choices=["sgd", "adam", "adamw", "adagrad"],
                        help="default: adam (mlp, cnn), sgd (resnets, the only choice there)")
    parser.add_argument("--lr", type=float, default=None,
                        help="default: torch.optim's (sgd: 0.01 with momentum 0.9); resnets: 0.1")
    parser.add_argument("--channels-last", action="store_true",
                        help="resnets: model and batch in channels-last (NHWC) memory format")
    parser.add_argument("--amp", default="fp32", choices=["fp32", "fp16", "bf16"],
                        help="resnets: forward under torch.autocast (fp16 with a GradScaler)")
    parser.add_argument("--checkpoint", action="store_true",
                        help="resnets: checkpoint the stem and each residual block of layer1..layer4; "
                             "gpt2: each transformer block")
    parser.add_argument("--compile", action="store_true",
                        help="gpt2: time torch.compile(model) too, after the eager run (a second JSON line)")
    parser.add_argument("--compiled-only", action="store_true",
                        help="gpt2 with --compile: the compiled run alone, no eager run before it (for a "
                             "profile of torch.compile's step, bench/kernel_profile.py)")
    parser.add_argument("--preset", default="gpt2", choices=["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"],
                        help="gpt2: the model's sizes (default: 124M's), as `gpt --preset`")
    parser.add_argument("--activation-memory-budget", type=float, default=1.0,
                        help="gpt2 with --compile: torch._functorch.config.activation_memory_budget "
                             "(0 < F <= 1; default 1.0, Inductor's own choice)")
    parser.add_argument("--memory-cap", type=int, default=None,
                        help="cuda: the bytes PyTorch's allocator may reserve (set_per_process_memory_fraction); "
                             "an out-of-memory is then reported in the JSON line")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="mlp, cnn: capture the whole step as a CUDA graph and time its replays")
    parser.add_argument("--cudnn-benchmark", action="store_true",
                        help="torch.backends.cudnn.benchmark = True: time cuDNN's candidate convolution "
                             "engines at each new shape and keep the fastest (as `resnet --bench --cudnn-benchmark`)")
    parser.add_argument("--ddp", action="store_true",
                        help="DistributedDataParallel over NCCL under torchrun (resnets and gpt2 on cuda)")
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--warmup", type=int, default=None, help="default: 50 (mlp, cnn), 5 (resnets, gpt2)")
    parser.add_argument("--steps", type=int, default=None, help="default: 500 (mlp, cnn), 20 (resnets, gpt2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--host-overhead", action="store_true",
                        help="time a chain of tiny ops instead of training steps")
    parser.add_argument("--tiny-op", default="add", choices=["add", "conv"],
                        help="host overhead chain: y * 1.0001 + 0.5 on one element (add), or a 3x3 "
                             "convolution of a (1, 16, 8, 8) channels-last batch, float16 on cuda (conv)")
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    for name, default in zip(("batch", "warmup", "steps", "optim"), DEFAULTS[args.model]):
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.model in RESNET_SHAPES and args.optim != "sgd" and not args.host_overhead:
        parser.error(f"--model {args.model} trains with sgd only, as examples/resnet's --bench")
    if args.model == "gpt2" and args.optim != "adamw" and not args.host_overhead:
        parser.error("--model gpt2 trains with adamw only, as `gpt --bench`")
    if args.model in ("mlp", "cnn") and (args.channels_last or args.amp != "fp32" or args.checkpoint):
        parser.error("--channels-last, --amp and --checkpoint are for the resnets and gpt2")
    if args.model == "gpt2" and args.channels_last:
        parser.error("--channels-last is for the resnets")
    if args.compile and args.model != "gpt2":
        parser.error("--compile is for --model gpt2")
    if args.preset != "gpt2" and args.model != "gpt2":
        parser.error("--preset is for --model gpt2")
    if args.compiled_only and not args.compile:
        parser.error("--compiled-only leaves the eager run out of a --compile run: give --compile too")
    if args.activation_memory_budget != 1.0 and not args.compile:
        parser.error("--activation-memory-budget sets torch.compile's budget: give --compile too")
    if not (0.0 < args.activation_memory_budget <= 1.0):
        parser.error(f"--activation-memory-budget must be in (0, 1], got {args.activation_memory_budget}")
    if args.memory_cap is not None and (args.device != "cuda" or args.model != "gpt2" or args.memory_cap < 1):
        parser.error("--memory-cap BYTES (a positive number) caps --model gpt2's memory on --device cuda")
    if args.cuda_graph and (args.model not in ("mlp", "cnn") or args.device != "cuda" or
                            args.optim not in ("sgd", "adam", "adamw")):
        parser.error("--cuda-graph is for --model mlp or cnn on --device cuda with sgd, adam or adamw")
    if args.ddp and (args.model not in (*RESNET_SHAPES, "gpt2") or args.device != "cuda" or args.cuda_graph or
                     args.compile or args.host_overhead):
        parser.error("--ddp is for the resnets and gpt2 on --device cuda, without --cuda-graph, --compile "
                     "and --host-overhead")
    if args.ddp and "LOCAL_RANK" not in os.environ:
        parser.error("--ddp runs under torchrun (it reads LOCAL_RANK, RANK and WORLD_SIZE), e.g. "
                     "torchrun --nproc-per-node 2 bench/torch_reference.py --ddp ...")
    if args.amp == "fp16" and args.device != "cuda":
        parser.error("--amp fp16 needs --device cuda (CPU autocast computes in bfloat16)")
    for name, minimum in (("batch", 1), ("warmup", 0), ("steps", 1), ("ops", 2), ("repeats", 1)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name} must be at least {minimum}, got {getattr(args, name)}")
    if args.lr is not None and not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"--lr must be a positive number, got {args.lr}")
    return args


def main(argv):
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda, but PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.ddp:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        torch.distributed.init_process_group("nccl", device_id=device)
    if device.type == "cuda":
        # memgrad's defaults, which are PyTorch's: matmuls in full float32 (mg::cuda::
        # allow_tf32() off), convolutions free to use TF32 (mg::cuda::cudnn_allow_tf32() on).
        set_tf32(matmul=False, cudnn=True)
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
    if args.memory_cap is not None:
        total = torch.cuda.get_device_properties(device).total_memory
        if args.memory_cap > total:
            print(f"error: --memory-cap {args.memory_cap} is more than the card's {total} bytes", file=sys.stderr)
            return 1
        # NOTE: an index, not torch.device("cuda"): the call refuses a device without one.
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.set_per_process_memory_fraction(args.memory_cap / total, index)
    if args.host_overhead:
        results = [run_host_overhead(args, device)]
    elif args.model == "gpt2":
        results = run_gpt(args, device)
    else:
        results = [run_train_step(args, device)]
    if rank() == 0:
        for result in results:
            print(json.dumps(result, separators=(",", ":")), flush=True)
    if args.ddp:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
