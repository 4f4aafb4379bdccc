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
    "framework" "pytorch", then "pytorch-compile"; the compile happens in the warm-up).

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
"""
import argparse
import gc
import json
import math
import os
import sys
import time

import torch
import torch.distributed
import torch.nn.parallel
import torch.utils.checkpoint

# The ResNet and GPT definitions are shared with the interop checks, which need the very
# same models.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop"))
import torch_gpt  # noqa: E402
import torch_resnet  # noqa: E402

IMAGE_SIZE = 28
PIXELS = IMAGE_SIZE * IMAGE_SIZE
CLASSES = 10
# (channels, height, width) of the input, classes, small-image stem — as examples/resnet/bench.cpp.
RESNET_SHAPES = {"resnet18": ((3, 32, 32), 10, True), "resnet50": ((3, 224, 224), 1000, False)}
# GPT-2's tokenizer's tokens, and the model's table padded to a multiple of 64 (as
# examples/gpt/bench.h's kBenchTokens and kBenchVocabulary).
GPT_TOKENS = 50257
GPT_VOCABULARY = 50304
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


def build_mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(PIXELS, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES))


def build_cnn():
    """memgrad's nn::MnistCnn (memgrad/nn/mnist_cnn.cpp) layer for layer: conv 1->32 3x3,
    ReLU, conv 32->64 3x3, ReLU, max-pool 2, dropout 0.25, flatten, fc 9216->128, ReLU,
    dropout 0.5, fc 128->10; logits out (no log_softmax: the loss is cross-entropy)."""
    pooled = (IMAGE_SIZE - 4) // 2
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Dropout(0.25), torch.nn.Flatten(1),
        torch.nn.Linear(64 * pooled * pooled, 128), torch.nn.ReLU(), torch.nn.Dropout(0.5),
        torch.nn.Linear(128, CLASSES))


def make_optimizer(args, params):
    # Adam's step counters live on the host unless capturable, and a CUDA graph cannot
    # advance host state.
    capturable = {"capturable": True} if args.cuda_graph and args.optim in ("adam", "adamw") else {}
    if args.model in RESNET_SHAPES:
        # examples/resnet/bench.cpp's SGDOptions, field for field.
        return torch.optim.SGD(params, lr=args.lr or 0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    if args.optim == "sgd":
        return torch.optim.SGD(params, lr=args.lr or 0.01, momentum=0.9)
    if args.optim == "adam":
        return torch.optim.Adam(params, lr=args.lr or 1e-3, **capturable)
    if args.optim == "adamw":
        return torch.optim.AdamW(params, lr=args.lr or 1e-3, **capturable)
    return torch.optim.Adagrad(params, lr=args.lr or 1e-2)


def build_model(args):
    """(model on the CPU, its description, input shape without the batch, classes)."""
    if args.model == "mlp":
        return build_mlp(), "torch.nn.Sequential", (PIXELS,), CLASSES
    if args.model == "cnn":
        return build_cnn(), "torch.nn.Sequential", (1, IMAGE_SIZE, IMAGE_SIZE), CLASSES
    image, classes, small_image_stem = RESNET_SHAPES[args.model]
    model, source = torch_resnet.build_resnet(args.model, classes, small_image_stem)
    return model, source, image, classes


class Checkpointed(torch.nn.Module):
    """A segment whose activations are recomputed in backward: only its input is kept."""

    def __init__(self, segment):
        super().__init__()
        self.segment = segment

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.segment, x, use_reentrant=False)


def checkpoint_stages(model):
    """The stem and every residual block of layer1..layer4 checkpointed, each its own segment,
    as memgrad's ResNetOptions::checkpoint_stages."""
    stem = torch.nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool)
    model.conv1 = Checkpointed(stem)
    model.bn1 = model.relu = model.maxpool = torch.nn.Identity()
    for name in ("layer1", "layer2", "layer3", "layer4"):
        stage = getattr(model, name)
        setattr(model, name, torch.nn.Sequential(*(Checkpointed(block) for block in stage)))


def run_train_step(args, device):
    torch.manual_seed(args.seed)
    model, model_source, input_shape, classes = build_model(args)
    if args.checkpoint:
        checkpoint_stages(model)
    model = model.to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    optimizer = make_optimizer(args, model.parameters())
    if args.ddp:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    loss_fn = torch.nn.CrossEntropyLoss()
    # Made on the host and copied over, as a data loader's batch arrives; reused by every step.
    data_generator = torch.Generator().manual_seed(args.seed + 1 + rank())
    inputs = torch.randn(args.batch, *input_shape, generator=data_generator).to(device)
    if args.channels_last:
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    targets = torch.randint(0, classes, (args.batch,), generator=data_generator).to(device)

    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.amp)
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp == "fp16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype or torch.float16, enabled=amp_dtype is not None):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    if args.cuda_graph:
        step = captured_step(model, loss_fn, optimizer, inputs, targets)

    result = {
        "framework": "pytorch",
        "cuda_graph": args.cuda_graph,
        "model": args.model,
        "batch": args.batch,
        "optim": args.optim,
        "memory_format": "channels_last" if args.channels_last else "contiguous",
        "amp": args.amp,
        "checkpoint": args.checkpoint,
        "device": args.device,
        "tf32_matmul": False,
        "tf32_cudnn": device.type == "cuda",
        "cudnn_benchmark": args.cudnn_benchmark,
    }
    if args.threads:
        result["threads"] = args.threads
    result.update(measure_steps(step, device, args.warmup, args.steps, args.batch))
    if args.ddp:
        add_ddp_fields(result, args.batch)
    result["peak_bytes_by_category"] = None  # PyTorch does not say what its bytes are for
    result["torch_version"] = torch.__version__
    result["model_source"] = model_source
    return result


def captured_step(model, loss_fn, optimizer, inputs, targets):
    """The whole training step as one CUDA graph (PyTorch's whole-network capture): three
    warm-up steps on a side stream, then forward, loss, backward and step recorded once;
    returns the graph's replay."""
    def body():
        loss_fn(model(inputs), targets).backward()
        optimizer.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()
    return graph.replay


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
    loop_start = time.perf_counter()
    timeline.mark()
    for _ in range(steps):
        step()
        timeline.mark()
    synchronize(device)
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


def gpt_optimizer(model, lr):
    """AdamW with the gpt example's groups and settings (examples/gpt/main.cpp,
    optim/param_groups.h): weight decay 0.1 on every parameter of two or more dimensions,
    none on the others; betas 0.9 / 0.99; the fused kernel on cuda (torch's CPU build may
    lack it)."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
    fused = next(iter(parameters)).device.type == "cuda"
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=fused)


def run_gpt_steps(args, device, compiled):
    """`gpt --bench`'s step on GPT-2 124M (see the module's doc), eager or torch.compile'd."""
    torch.manual_seed(args.seed)
    model = torch_gpt.GPT(torch_gpt.GPTConfig(vocab_size=GPT_VOCABULARY))
    if args.checkpoint:
        model.transformer.h = torch.nn.ModuleList(Checkpointed(block) for block in model.transformer.h)
    model = model.to(device)
    model.train()
    optimizer = gpt_optimizer(model, args.lr or 1e-3)
    forward = model
    if args.ddp:
        forward = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    if compiled:
        forward = torch.compile(forward)
    block_size = model.config.block_size
    # Made on the host and copied over, as a data loader's batch arrives; reused by every step.
    data_generator = torch.Generator().manual_seed(args.seed + 1 + rank())
    inputs = torch.randint(0, GPT_TOKENS, (args.batch, block_size), generator=data_generator).to(device)
    targets = torch.randint(0, GPT_TOKENS, (args.batch * block_size,), generator=data_generator).to(device)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.amp)
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp == "fp16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
            logits = forward(inputs)  # (B, T, vocabulary)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # a no-op unless fp16
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()

    result = {
        "framework": "pytorch-compile" if compiled else "pytorch",
        "model": "gpt2",
        "n_layer": model.config.n_layer,
        "n_head": model.config.n_head,
        "n_embd": model.config.n_embd,
        "block_size": block_size,
        "vocab_size": model.config.vocab_size,
        "batch": args.batch,
        "accum": 1,
        "checkpoint": args.checkpoint,
        "optim": "adamw",
        "device": args.device,
        "amp": args.amp,
        "compile": compiled,
        "tf32_matmul": False,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    result.update(measure_steps(step, device, args.warmup, args.steps, args.batch))
    if args.ddp:
        add_ddp_fields(result, args.batch)
    result["tokens_per_s"] = result["samples_per_s"] * block_size
    result["peak_bytes_by_category"] = None
    result["torch_version"] = torch.__version__
    result["model_source"] = "interop/torch_gpt.py"
    return result


def run_gpt(args, device):
    """The eager run, then (--compile) the compiled one, each on a fresh model; the first's
    tensors are freed before the second starts, so that its peak is its own."""
    results = [run_gpt_steps(args, device, compiled=False)]
    if args.compile:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        results.append(run_gpt_steps(args, device, compiled=True))
    return results


def run_host_overhead(args, device):
    """Host time to issue one tiny op: a chain of dependent ops on one element, timed from
    the first issue to the last (the device runs behind and is not waited for), repeated and
    the median taken; us_per_op_synced includes waiting for the device."""
    ops = args.ops // 2 * 2
    with torch.no_grad():
        if args.tiny_op == "conv":
            dtype = torch.float16 if args.device == "cuda" else torch.float32
            y = torch.ones(1, 16, 8, 8, device=device, dtype=dtype).to(memory_format=torch.channels_last)
            # A 3x3 window that averages, so the chain's values stay near 1 in float16.
            weight = torch.full((16, 16, 3, 3), 1.0 / 144, device=device, dtype=dtype).to(
                memory_format=torch.channels_last)

            def chain(y):
                for _ in range(ops):
                    y = torch.nn.functional.conv2d(y, weight, padding=1)
                return y
        else:
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
        result = y.sum().item()
    return {
        "framework": "pytorch",
        "benchmark": "host_overhead",
        "tiny_op": args.tiny_op,
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
    if args.ddp:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        torch.distributed.init_process_group("nccl", device_id=device)
    if device.type == "cuda":
        # memgrad's defaults, which are PyTorch's: matmuls in full float32 (mg::cuda::
        # allow_tf32() off), convolutions free to use TF32 (mg::cuda::cudnn_allow_tf32() on).
        set_tf32(matmul=False, cudnn=True)
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
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
