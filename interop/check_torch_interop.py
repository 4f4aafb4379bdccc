#!/usr/bin/env python3
"""interop/check_torch_interop.py — do memgrad and PyTorch read each other's checkpoints
and compute the same thing from them? Drives build/resnet_logits (interop/resnet_logits.cpp)
against a torchvision-style ResNet-18 (interop/torch_resnet.py) and prints one line per check:

  definition        with torchvision installed: interop/torch_resnet.py's plain copies of
                    ResNet-18 and -50 have torchvision's keys (in order), shapes, dtypes
                    and, from the same seed, values (so a machine without torchvision
                    checks and benchmarks the same model)
  memgrad file      resnet_logits --save-init writes well-formed safetensors, laid out as
                    the reference writer does (interop/safetensors_file.py checks it)
  memgrad init      memgrad's initial values follow torchvision's recipe (kaiming fan_out
                    convolutions, BatchNorm 1/0 with running stats 0/1, nn.Linear's fc)
  memgrad -> torch  torch's load_state_dict(strict=True) takes that file, and every tensor
                    arrives with torch's dtype and shape (num_batches_tracked: int64, 0-d)
                    and memgrad's values — checked explicitly, since load_state_dict would
                    silently convert a float counter into int64
  torch -> memgrad logits   a seeded torch ResNet-18 with non-trivial BatchNorm state
                    (random affine parameters, running statistics gathered from random
                    batches, num_batches_tracked 2) saved as safetensors; memgrad loads it
                    strictly and computes eval-mode logits of a random (4, 3, 224, 224)
                    batch, which must match torch's
  memgrad -> torch logits   the same comparison with memgrad's initial weights

Logits are compared in float32 with TF32 off in both frameworks: the error is the largest
over the batch of ||memgrad - torch|| / ||torch|| per sample, and must stay below
--tolerance (1e-4). Each side's error against a float64 run of the model on the CPU is
printed beside it, to tell which side drifted when the check fails. Exit code: 0 all checks passed, 1 a check failed, 2 could not start.

safetensors I/O: the `safetensors` package's safetensors.torch when it is installed (the
first line says which), else interop/safetensors_file.py's reader and writer of the format.

  python3 interop/check_torch_interop.py --binary build/resnet_logits --device cuda
"""
import copy
import math
import os
import sys

import torch

import interop_checks
from interop_checks import Checks, row_relative_error, run_binary, state_mismatches
import torch_resnet

ARCH = "resnet18"
IMAGE = (3, 224, 224)
CLASSES = 1000


def parse_args(argv):
    parser = interop_checks.argument_parser("memgrad <-> PyTorch checkpoint and logits check.", "resnet_logits")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--model-source", default="auto", choices=["auto", "torchvision", "plain"],
                        help="torch's ResNet-18: torchvision's, or interop/torch_resnet.py's copy")
    args = parser.parse_args(argv)
    interop_checks.resolve_device(args)
    return args


def check_definition(checks, seed):
    if not torch_resnet.torchvision_available():
        print("SKIP definition: torchvision is not installed; torch's side uses interop/torch_resnet.py")
        return
    problems, counts = [], []
    # resnet50 too: bench/torch_reference.py times it with the same copy where torchvision is missing.
    for arch in ("resnet18", "resnet50"):
        states = {}
        for source in ("torchvision", "plain"):
            torch.manual_seed(seed)
            model, _ = torch_resnet.build_resnet(arch, CLASSES, source=source)
            states[source] = model.state_dict()
        reference, copy = states["torchvision"], states["plain"]
        problems += [f"{arch}: {problem}" for problem in state_mismatches(reference, copy)]
        if list(reference) != list(copy) and set(reference) == set(copy):
            problems.append(f"{arch}: the keys come in a different order")
        different = [k for k, v in reference.items()
                     if k in copy and v.shape == copy[k].shape and not torch.equal(v, copy[k])]
        if different:
            problems.append(f"{arch}: different seeded values in {different[:5]}")
        counts.append(f"{len(reference)} {arch} tensors")
    checks.report(not problems, "definition",
                  "; ".join(problems) if problems else
                  f"interop/torch_resnet.py's ResNets equal torchvision's ({', '.join(counts)}: same keys "
                  f"in the same order, dtypes, shapes and seeded values)")


def check_memgrad_init(checks, state):
    """memgrad's initial values against torchvision's recipe, by statistics."""
    problems = []
    for name, tensor in state.items():
        if tensor.dim() == 4:  # a convolution: kaiming_normal_, fan_out, gain sqrt(2)
            fan_out = tensor.shape[0] * tensor.shape[2] * tensor.shape[3]
            expected = math.sqrt(2.0 / fan_out)
            std = tensor.float().std().item()
            if abs(std / expected - 1) > 0.1 or abs(tensor.float().mean().item()) > 0.1 * expected:
                problems.append(f"{name}: mean {tensor.mean().item():.3g}, std {std:.4g}, expected "
                                f"N(0, {expected:.4g})")
        elif name.startswith("fc."):  # nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
            bound = 1.0 / math.sqrt(state["fc.weight"].shape[1])
            if tensor.abs().max().item() > bound or tensor.std().item() < 0.5 * bound / math.sqrt(3):
                problems.append(f"{name}: not U(-{bound:.4g}, {bound:.4g})-like")
        else:  # BatchNorm: weight 1, bias 0, running_mean 0, running_var 1, counter 0
            value = 1 if name.endswith((".weight", "running_var")) else 0
            if not torch.all(tensor == value):
                problems.append(f"{name}: expected all {value}")
    checks.report(not problems, "memgrad init",
                  "; ".join(problems[:5]) if problems else
                  "convolutions ~ N(0, 2/fan_out), BatchNorm weight 1 bias 0 running stats 0/1, "
                  "counters 0, fc uniform within 1/sqrt(512) (as torchvision)")


def load_into_torch(checks, name, load_file, path, model):
    """Loads a memgrad-written state_dict into `model` strictly; True when it arrived whole."""
    state = load_file(path)
    problems = interop_checks.load_strictly(model, state)
    counters = [k for k in state if k.endswith("num_batches_tracked")]
    parameters = sum(1 for _ in model.named_parameters())
    checks.report(not problems, name,
                  "; ".join(problems[:5]) if problems else
                  f"{len(state)} tensors ({parameters} parameters, {len(state) - parameters} buffers) "
                  f"loaded with strict=True, each with torch's dtype, shape and memgrad's values "
                  f"({len(counters)} num_batches_tracked: {state[counters[0]].dtype}, "
                  f"shape {tuple(state[counters[0]].shape)})")
    return not problems


def randomise_batch_norm(model, generator_seed, device):
    """Non-trivial BatchNorm state: random affine parameters, then running statistics that
    are the exact averages over two random batches (momentum None), num_batches_tracked 2."""
    generator = torch.Generator().manual_seed(generator_seed)
    batch_norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for bn in batch_norms:
            bn.weight.copy_(torch.rand(bn.weight.shape, generator=generator) + 0.5)
            bn.bias.copy_(0.2 * torch.randn(bn.bias.shape, generator=generator))
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average
        model.train()
        for _ in range(2):
            model(torch.randn(8, *IMAGE, generator=generator).to(device))
        for bn in batch_norms:
            bn.momentum = 0.1
    model.eval()


def compare_logits(checks, name, memgrad_logits, model, inputs, tolerance):
    """memgrad's logits against torch's float32 eval-mode logits of the same model; each is
    also measured against a float64 run of the model on the CPU, so that a failure says
    which side drifted."""
    with torch.no_grad():
        torch_logits = model.eval()(inputs)
        exact = copy.deepcopy(model).double().cpu()(inputs.double().cpu())
    if memgrad_logits.shape != torch_logits.shape:
        checks.report(False, name, f"memgrad's logits have shape {tuple(memgrad_logits.shape)}, "
                                   f"torch's {tuple(torch_logits.shape)}")
        return
    error = row_relative_error(memgrad_logits, torch_logits)
    same_class = (memgrad_logits.cpu().argmax(1) == torch_logits.cpu().argmax(1)).sum().item()
    max_abs = (memgrad_logits.double().cpu() - torch_logits.double().cpu()).abs().max().item()
    passed = math.isfinite(error) and error < tolerance
    checks.report(passed, name,
                  f"{ARCH} logits {tuple(torch_logits.shape)} on {inputs.device.type}: max relative error "
                  f"{error:.3e} (per sample ||memgrad - torch|| / ||torch||, bound {tolerance:.0e}); "
                  f"against float64: memgrad {row_relative_error(memgrad_logits, exact):.3e}, torch "
                  f"{row_relative_error(torch_logits, exact):.3e}; max |difference| {max_abs:.3e} (|torch| up "
                  f"to {torch_logits.abs().max().item():.3g}); same argmax {same_class}/{torch_logits.shape[0]}")


def run_checks(args, workdir):
    load_file, save_file, io_name = interop_checks.safetensors_io(args.safetensors)
    device = torch.device(args.device)
    print(f"torch {torch.__version__} on {args.device}; safetensors I/O: {io_name}")
    checks = Checks()
    check_definition(checks, args.seed)
    files = {name: os.path.join(workdir, f"{name}.safetensors")
             for name in ("memgrad_init", "torch_weights", "input", "logits_torch_weights",
                          "logits_memgrad_weights")}

    # memgrad -> torch: memgrad's initial weights, loaded strictly.
    error = run_binary(args.binary, "--save-init", files["memgrad_init"], "--seed", str(args.seed))
    if error:
        checks.report(False, "memgrad init", error)
        return checks
    if not interop_checks.check_memgrad_file(checks, files["memgrad_init"]):
        return checks
    check_memgrad_init(checks, load_file(files["memgrad_init"]))
    memgrad_model, source = torch_resnet.build_resnet(ARCH, CLASSES, source=args.model_source)
    print(f"torch's {ARCH}: {source}")
    memgrad_model.to(device)
    loaded = load_into_torch(checks, "memgrad -> torch", load_file, files["memgrad_init"], memgrad_model)

    # torch -> memgrad: a seeded torch model with non-trivial BatchNorm state.
    torch.manual_seed(args.seed)
    torch_model, _ = torch_resnet.build_resnet(ARCH, CLASSES, source=args.model_source)
    torch_model.to(device)
    randomise_batch_norm(torch_model, args.seed + 1, device)
    save_file({k: v.detach().cpu().contiguous() for k, v in torch_model.state_dict().items()},
              files["torch_weights"], metadata={"format": "pt"})
    inputs = torch.randn(args.batch, *IMAGE, generator=torch.Generator().manual_seed(args.seed + 2))
    save_file({"input": inputs}, files["input"], metadata={"format": "pt"})
    inputs = inputs.to(device)

    common = ["--input", files["input"], "--device", args.device]
    error = run_binary(args.binary, "--weights", files["torch_weights"], "--output",
                       files["logits_torch_weights"], *common)
    if error:
        checks.report(False, "torch -> memgrad logits", error)
    else:
        compare_logits(checks, "torch -> memgrad logits", load_file(files["logits_torch_weights"])["logits"],
                       torch_model, inputs, args.tolerance)

    if loaded:
        error = run_binary(args.binary, "--weights", files["memgrad_init"], "--output",
                           files["logits_memgrad_weights"], *common)
        if error:
            checks.report(False, "memgrad -> torch logits", error)
        else:
            compare_logits(checks, "memgrad -> torch logits",
                           load_file(files["logits_memgrad_weights"])["logits"],
                           memgrad_model, inputs, args.tolerance)
    return checks


def main(argv):
    args = parse_args(argv)
    error = interop_checks.start_error(args, "resnet_logits")
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return interop_checks.run_all(args, run_checks, "memgrad-interop-")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
