#!/usr/bin/env python3
"""interop/check_gpt_interop.py — do memgrad and PyTorch read each other's GPT-2 checkpoints
and compute the same logits from them? Drives build/gpt_logits (interop/gpt_logits.cpp)
against a plain torch.nn GPT-2 under memgrad's parameter names (interop/torch_gpt.py) and
prints one line per check:

  torch -> memgrad logits   a seeded torch GPT-2 (nanoGPT's initialisation, then random
                    LayerNorm weights and biases, so that none is a silent 1 or 0) saved
                    as safetensors; memgrad loads it strictly and computes the logits of
                    random tokens, which must match torch's
  memgrad file      gpt_logits --save writes well-formed safetensors, laid out as the
                    reference writer does, tagged format=pt, without lm_head.weight (tied)
  memgrad init      memgrad's initial values follow nanoGPT's recipe (N(0, 0.02) weights,
                    N(0, 0.02 / sqrt(2 n_layer)) residual projections, biases 0, LayerNorm 1)
  memgrad -> torch  torch's load_state_dict(strict=True) takes that file, every tensor with
                    torch's dtype and shape and memgrad's values
  memgrad -> torch logits   the logits comparison with memgrad's initial weights
  ... bf16 logits   both comparisons again with both frameworks under bfloat16 autocast

float32: TF32 off in both frameworks; the error is the largest over positions of
||memgrad - torch|| / ||torch|| (each position's logits a vector), bound --tolerance (1e-4).
Each side's error against a float64 run of the model on the CPU is printed beside it, to
tell which side drifted when the check fails.
bfloat16: the logits must come out in bfloat16 in both, and the error is
max |memgrad - torch| / max |torch float32 logits|, bound --bf16-tolerance (3e-2): bfloat16
keeps 8 significant bits (a relative step of 2^-8 = 3.9e-3 per rounding), the frameworks
round at different places (which ops autocast casts, attention's accumulation), and the
rounding errors add up over the layers; each side's error against torch's float32 logits
is printed beside it.

Sizes: --config gpt2 (124M: 12 layers, 12 heads, 768 wide, vocab 50257, block 1024; the
default on cuda) or tiny (2 layers, 4 heads, 64 wide, vocab 512, block 64; the default on
the CPU), tokens (--batch 2, --steps 128, or 32 for tiny) drawn uniformly from the vocabulary.
Exit code: 0 all checks passed, 1 a check failed, 2 could not start.

safetensors I/O: the `safetensors` package's safetensors.torch when it is installed (the
first line says which), else interop/safetensors_file.py's reader and writer of the format.

  python3 interop/check_gpt_interop.py --binary build/gpt_logits --device cuda
"""
import copy
import math
import os
import sys

import torch

import interop_checks
from interop_checks import Checks, row_relative_error
import torch_gpt

CONFIGS = {"gpt2": torch_gpt.PRESETS["gpt2"],
           "tiny": torch_gpt.GPTConfig(n_layer=2, n_head=4, n_embd=64, vocab_size=512, block_size=64)}


def parse_args(argv):
    parser = interop_checks.argument_parser("memgrad <-> PyTorch GPT-2 checkpoint and logits check.", "gpt_logits")
    parser.add_argument("--config", default=None, choices=sorted(CONFIGS),
                        help="model sizes (default: gpt2 on cuda, tiny on the CPU)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="tokens per sequence (default 128; 32 for tiny)")
    parser.add_argument("--bf16-tolerance", type=float, default=3e-2)
    args = parser.parse_args(argv)
    interop_checks.resolve_device(args)
    if args.config is None:
        args.config = "gpt2" if args.device == "cuda" else "tiny"
    if args.steps is None:
        args.steps = 32 if args.config == "tiny" else 128
    return args


def model_flags(config):
    """gpt_logits's flags for `config`'s sizes (every one given: no preset's default counts)."""
    return ["--layers", str(config.n_layer), "--heads", str(config.n_head), "--embd", str(config.n_embd),
            "--vocab", str(config.vocab_size), "--block", str(config.block_size)]


def check_memgrad_init(checks, state, config):
    """memgrad's initial values against nanoGPT's recipe, by statistics."""
    problems = []
    residual_std = 0.02 / math.sqrt(2 * config.n_layer)
    for name, tensor in state.items():
        tensor = tensor.double()
        if tensor.dim() == 2:
            expected = residual_std if name.endswith("c_proj.weight") else 0.02
            std, mean = tensor.std().item(), tensor.mean().item()
            if abs(std / expected - 1) > 0.1 or abs(mean) > 0.1 * expected:
                problems.append(f"{name}: mean {mean:.3g}, std {std:.4g}, expected N(0, {expected:.4g})")
        else:
            value = 0 if name.endswith(".bias") else 1  # biases 0, LayerNorm weights 1
            if not torch.all(tensor == value):
                problems.append(f"{name}: expected all {value}")
    checks.report(not problems, "memgrad init", "; ".join(problems[:5]) if problems else
                  f"weights ~ N(0, 0.02), residual projections ~ N(0, {residual_std:.4g}), biases 0, "
                  f"LayerNorm weights 1 (as nanoGPT)")


def load_into_torch(checks, load_file, path, model):
    """Loads a memgrad-written state_dict into `model` strictly; True when it arrived whole."""
    state = load_file(path)
    problems = interop_checks.load_strictly(model, state)
    checks.report(not problems, "memgrad -> torch", "; ".join(problems[:5]) if problems else
                  f"{len(state)} tensors loaded with strict=True, each with torch's dtype, shape and "
                  f"memgrad's values")
    return not problems


def max_error(logits, reference, scale):
    """max |logits - reference| / scale."""
    return (logits.double().cpu() - reference.double().cpu()).abs().max().item() / scale


def compare_logits(checks, name, memgrad_logits, model, tokens, tolerance):
    """memgrad's float32 logits against torch's of the same model; each also against a
    float64 run of the model on the CPU, so that a failure says which side drifted."""
    with torch.no_grad():
        torch_logits = model(tokens)
        exact = copy.deepcopy(model).double().cpu()(tokens.cpu())
    if memgrad_logits.shape != torch_logits.shape or memgrad_logits.dtype != torch.float32:
        checks.report(False, name, f"memgrad's logits are {memgrad_logits.dtype} {tuple(memgrad_logits.shape)}, "
                                   f"torch's {torch_logits.dtype} {tuple(torch_logits.shape)}")
        return
    error = row_relative_error(memgrad_logits, torch_logits)
    same_token = (memgrad_logits.cpu().argmax(-1) == torch_logits.cpu().argmax(-1)).sum().item()
    max_abs = max_error(memgrad_logits, torch_logits, 1.0)
    passed = math.isfinite(error) and error < tolerance
    checks.report(passed, name,
                  f"logits {tuple(torch_logits.shape)} on {tokens.device.type}: max relative error {error:.3e} "
                  f"(per position ||memgrad - torch|| / ||torch||, bound {tolerance:.0e}); against float64: "
                  f"memgrad {row_relative_error(memgrad_logits, exact):.3e}, torch "
                  f"{row_relative_error(torch_logits, exact):.3e}; max |difference| {max_abs:.3e} (|torch| up to "
                  f"{torch_logits.abs().max().item():.3g}); same argmax {same_token}/{tokens.numel()}")


def compare_bf16_logits(checks, name, memgrad_logits, model, tokens, tolerance):
    """memgrad's logits under bfloat16 autocast against torch's under it, relative to the
    largest float32 logit; each side also against torch's float32 logits."""
    with torch.no_grad():
        reference = model(tokens)
        with torch.autocast(device_type=tokens.device.type, dtype=torch.bfloat16):
            torch_logits = model(tokens)
    if memgrad_logits.shape != torch_logits.shape or memgrad_logits.dtype != torch_logits.dtype:
        checks.report(False, name, f"memgrad's logits are {memgrad_logits.dtype} {tuple(memgrad_logits.shape)}, "
                                   f"torch's {torch_logits.dtype} {tuple(torch_logits.shape)} under autocast")
        return
    scale = reference.abs().max().item()
    error = max_error(memgrad_logits, torch_logits, scale)
    same_token = (memgrad_logits.cpu().argmax(-1) == torch_logits.cpu().argmax(-1)).sum().item()
    passed = math.isfinite(error) and error < tolerance
    checks.report(passed, name,
                  f"{torch_logits.dtype} logits {tuple(torch_logits.shape)} on {tokens.device.type}: "
                  f"max |memgrad - torch| / max |float32 logit| {error:.3e} (bound {tolerance:.0e}, max |logit| "
                  f"{scale:.3g}); against torch's float32 logits: memgrad {max_error(memgrad_logits, reference, scale):.3e}, "
                  f"torch {max_error(torch_logits, reference, scale):.3e}; same argmax {same_token}/{tokens.numel()}")


def run_memgrad(checks, name, args, load_file, arguments, out):
    """Runs gpt_logits with `arguments`; the logits it wrote to `out`, or None (reported)."""
    error = interop_checks.run_binary(args.binary, *arguments, "--out", out)
    if error:
        checks.report(False, name, error)
        return None
    return load_file(out)["logits"]


def run_checks(args, workdir):
    load_file, save_file, io_name = interop_checks.safetensors_io(args.safetensors)
    device = torch.device(args.device)
    config = CONFIGS[args.config]
    print(f"torch {torch.__version__} on {args.device}; safetensors I/O: {io_name}; model {args.config} "
          f"({config.n_layer} layers, {config.n_head} heads, {config.n_embd} wide, vocab {config.vocab_size}, "
          f"block {config.block_size}); tokens ({args.batch}, {args.steps})")
    checks = Checks()
    files = {name: os.path.join(workdir, f"{name}.safetensors")
             for name in ("tokens", "torch_weights", "memgrad_weights", "logits")}
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.steps),
                           generator=torch.Generator().manual_seed(args.seed + 2), dtype=torch.int64)
    save_file({"tokens": tokens}, files["tokens"], metadata={"format": "pt"})
    tokens = tokens.to(device)
    common = ["--tokens", files["tokens"], "--device", args.device, *model_flags(config)]

    # torch -> memgrad: a seeded torch model with non-trivial LayerNorms and biases.
    torch.manual_seed(args.seed)
    torch_model = torch_gpt.GPT(config)
    torch_gpt.randomise_norms_and_biases(torch_model, torch.Generator().manual_seed(args.seed + 1))
    torch_model.to(device).eval()
    save_file({k: v.detach().cpu().contiguous() for k, v in torch_model.state_dict().items()},
              files["torch_weights"], metadata={"format": "pt"})
    for amp, compare, tolerance in (("fp32", compare_logits, args.tolerance),
                                    ("bf16", compare_bf16_logits, args.bf16_tolerance)):
        name = "torch -> memgrad logits" + (" bf16" if amp == "bf16" else "")
        logits = run_memgrad(checks, name, args, load_file,
                                ["--load", files["torch_weights"], "--amp", amp, *common], files["logits"])
        if logits is not None:
            compare(checks, name, logits, torch_model, tokens, tolerance)
    del torch_model

    # memgrad -> torch: memgrad's initial weights, loaded strictly.
    logits = run_memgrad(checks, "memgrad -> torch logits", args, load_file,
                            ["--init-seed", str(args.seed + 3), "--save", files["memgrad_weights"], *common],
                            files["logits"])
    if logits is None or not interop_checks.check_memgrad_file(
            checks, files["memgrad_weights"], absent={"lm_head.weight": "it is tied to transformer.wte.weight"}):
        return checks
    check_memgrad_init(checks, load_file(files["memgrad_weights"]), config)
    memgrad_model = torch_gpt.GPT(config).to(device).eval()
    if not load_into_torch(checks, load_file, files["memgrad_weights"], memgrad_model):
        return checks
    compare_logits(checks, "memgrad -> torch logits", logits, memgrad_model, tokens, args.tolerance)
    logits = run_memgrad(checks, "memgrad -> torch logits bf16", args, load_file,
                            ["--load", files["memgrad_weights"], "--amp", "bf16", *common], files["logits"])
    if logits is not None:
        compare_bf16_logits(checks, "memgrad -> torch logits bf16", logits, memgrad_model, tokens,
                            args.bf16_tolerance)
    return checks


def main(argv):
    args = parse_args(argv)
    error = interop_checks.start_error(args, "gpt_logits")
    if error is None and args.steps > CONFIGS[args.config].block_size:
        error = f"--steps {args.steps} exceeds the {args.config} model's block size {CONFIGS[args.config].block_size}"
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return interop_checks.run_all(args, run_checks, "memgrad-gpt-interop-")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
