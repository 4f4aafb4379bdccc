"""bench/torch_reference_runs.py — the runs bench/torch_reference.py times, each returning
its JSON line as a dict: the training step of the MLP, the CNN and the ResNets (as one CUDA
graph with --cuda-graph), GPT-2's step (eager, then torch.compile'd), and the chain of tiny
ops that --host-overhead times.
"""
import gc
import time

import torch
import torch.nn.parallel

from torch_reference_harness import add_ddp_fields, measure_steps, quantile, rank, synchronize
from torch_reference_models import GPT_TOKENS, build_gpt, build_model, checkpoint_stages, gpt_optimizer, make_optimizer


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


def run_gpt_steps(args, device, compiled):
    """`gpt --bench`'s step on GPT-2 124M (see bench/torch_reference.py's doc), eager or
    torch.compile'd."""
    torch.manual_seed(args.seed)
    model = build_gpt(args.checkpoint, args.preset)
    model = model.to(device)
    model.train()
    optimizer = gpt_optimizer(model, args.lr or 1e-3)
    forward = model
    if args.ddp:
        forward = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    if compiled:
        # NOTE: the budget is read when the backward graph is partitioned, during the first
        # compiled step (the warm-up); 1.0 (the default) saves what Inductor's min-cut keeps.
        torch._functorch.config.activation_memory_budget = args.activation_memory_budget
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
        "preset": args.preset,
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
        "activation_memory_budget": args.activation_memory_budget if compiled else None,
        "memory_cap_bytes": args.memory_cap,
        "tf32_matmul": False,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    try:
        result.update(measure_steps(step, device, args.warmup, args.steps, args.batch))
    except torch.cuda.OutOfMemoryError as error:
        # Under --memory-cap an out-of-memory is a result (it shows what does not fit), not a crash.
        if args.memory_cap is None:
            raise
        del model, forward, optimizer, inputs, targets
        gc.collect()
        torch.cuda.empty_cache()
        result["out_of_memory"] = str(error).splitlines()[0]
        result["torch_version"] = torch.__version__
        return result
    result["out_of_memory"] = None
    if args.ddp:
        add_ddp_fields(result, args.batch)
    result["tokens_per_s"] = result["samples_per_s"] * block_size
    result["peak_bytes_by_category"] = None
    result["torch_version"] = torch.__version__
    result["model_source"] = "interop/torch_gpt.py"
    return result


def run_gpt(args, device):
    """The eager run, then (--compile) the compiled one, each on a fresh model; the first's
    tensors are freed before the second starts, so that its peak is its own. --compiled-only
    runs the compiled one alone."""
    if args.compiled_only:
        return [run_gpt_steps(args, device, compiled=True)]
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
