#!/usr/bin/env python3
"""interop/check_training_checkpoint.py — does PyTorch read a whole training checkpoint
that mg::save_checkpoint wrote (memgrad/training/checkpoint.h)? Drives build/gpt (a tiny
GPT, a few AdamW steps on a text this script writes, --save and --save-init) and reads its
checkpoint with safetensors.torch.load_file, printing one line per check:

  load_file         safetensors.torch.load_file reads the checkpoint (the `safetensors`
                    package is required here: that it reads memgrad's file is the claim)
  metadata          __metadata__ holds format=pt, memgrad_checkpoint=1, optimizer=AdamW and
                    the program's own model=gpt and amp
  model             the model.* entries, prefix removed, load strictly into
                    interop/torch_gpt.py's GPT (every key, dtype and shape, and the values
                    arrive whole), and differ from the --save-init weights (they trained)
  optimizer         the optimizer.* entries, turned into torch's optimizer.state_dict()
                    form ({"state": {i: {...}}, "param_groups": [...]}), load into a
                    torch.optim.AdamW over that GPT's parameters in memgrad's order (the
                    groups of optim/param_groups.h: matrices decayed, the rest not); every
                    moment has its parameter's shape, the step counters say how many steps
                    ran, and torch takes one more step from them
  run state         scheduler.last_epoch and run.step are the steps run, the scheduler's
                    last lrs are the optimizer groups' lrs, rng.default and rng.windows are
                    (seed, offset) pairs, and with --amp fp16 the scaler's scale is there
Exit code: 0 all checks passed, 1 a check failed, 2 could not start.

  python3 interop/check_training_checkpoint.py --binary build/gpt --device cuda
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

import interop_checks
from interop_checks import Checks
import torch_gpt

STEPS = 4
TINY = dict(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=256)  # gpt --preset tiny
TEXT = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.\n" * 200


def parse_args(argv):
    parser = argparse.ArgumentParser(description="PyTorch reads mg::save_checkpoint's file.")
    parser.add_argument("--binary", default="build/gpt", help="memgrad's gpt example")
    parser.add_argument("--device", default=None, choices=["cpu", "cuda"],
                        help="where gpt trains (default: cuda when torch sees one)")
    parser.add_argument("--workdir", default=None, help="keep the files here (default: a temp dir)")
    args = parser.parse_args(argv)
    interop_checks.resolve_device(args)
    return args


def run_gpt(args, workdir):
    """Trains the tiny GPT for STEPS steps; returns (checkpoint, initial weights, amp) or raises."""
    text = os.path.join(workdir, "text.txt")
    with open(text, "w", encoding="utf-8") as file:
        file.write(TEXT)
    checkpoint, init = os.path.join(workdir, "run.safetensors"), os.path.join(workdir, "init.safetensors")
    amp = "fp16" if args.device == "cuda" else "fp32"  # fp16: a GradScaler's state too
    command = [args.binary, "--data", text, "--preset", "tiny", "--steps", str(STEPS), "--batch", "2",
               "--eval-interval", str(STEPS), "--eval-iters", "1", "--device", args.device, "--amp", amp,
               "--save", checkpoint, "--save-init", init]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {result.returncode}: {result.stderr.strip()}")
    return checkpoint, init, amp


def with_prefix(entries, prefix):
    return {key[len(prefix):]: value for key, value in entries.items() if key.startswith(prefix)}


def torch_optimizer_state(entries):
    """optimizer.* entries -> (torch's state_dict form, {group: [param indices]}, hyper-parameters per group)."""
    optimizer = with_prefix(entries, "optimizer.")
    groups = sorted({int(key.split(".")[1]) for key in optimizer if key.startswith("param_groups.")})
    state, param_groups = {}, []
    for g in groups:
        fields = with_prefix(optimizer, f"param_groups.{g}.")
        param_groups.append({"params": fields["params"].tolist(), "lr": fields["lr"].item(),
                             "betas": (fields["beta1"].item(), fields["beta2"].item()), "eps": fields["eps"].item(),
                             "weight_decay": fields["weight_decay"].item(), "amsgrad": bool(fields["amsgrad"].item())})
    for key, value in optimizer.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    return {"state": state, "param_groups": param_groups}


def check_optimizer(checks, entries, model):
    saved = torch_optimizer_state(entries)
    # memgrad's order: optim/param_groups.h's weight_decay_groups, matrices (2-d and up) first.
    named = list(model.named_parameters())
    decayed = [p for _, p in named if p.dim() >= 2]
    kept = [p for _, p in named if p.dim() < 2]
    ordered = decayed + kept
    problems = []
    if [len(g["params"]) for g in saved["param_groups"]] != [len(decayed), len(kept)]:
        problems.append(f"groups of {[len(g['params']) for g in saved['param_groups']]} parameters, expected "
                        f"{[len(decayed), len(kept)]}")
    for index, param_state in saved["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            if index >= len(ordered) or param_state[name].shape != ordered[index].shape:
                problems.append(f"state.{index}.{name} is {tuple(param_state[name].shape)}")
        if param_state["step"].item() != STEPS:
            problems.append(f"state.{index}.step is {param_state['step'].item()}, not {STEPS}")
    if len(saved["state"]) != len(ordered):
        problems.append(f"state for {len(saved['state'])} of {len(ordered)} parameters")
    if not problems:
        hyper = saved["param_groups"]
        optimizer = torch.optim.AdamW([{"params": decayed, **{k: v for k, v in hyper[0].items() if k != "params"}},
                                       {"params": kept, **{k: v for k, v in hyper[1].items() if k != "params"}}])
        try:
            optimizer.load_state_dict(saved)
            for param in ordered:
                param.grad = torch.ones_like(param)
            optimizer.step()
        except (RuntimeError, ValueError, KeyError) as error:
            problems.append(f"torch.optim.AdamW: {error}")
        else:
            steps = {optimizer.state[p]["step"].item() for p in ordered}
            if steps != {STEPS + 1}:
                problems.append(f"after one torch step the counters are {steps}, not {{{STEPS + 1}}}")
    checks.report(not problems, "optimizer", "; ".join(problems) if problems else
                  f"{len(ordered)} parameters' moments in 2 groups load into torch.optim.AdamW, which steps on "
                  f"from step {STEPS}")


def check_run_state(checks, entries, amp):
    problems = []
    expect = {"scheduler.last_epoch": (torch.int64, ()), "run.step": (torch.int64, ()), "run.epoch": (torch.int64, ()),
              "rng.default": (torch.int64, (2,)), "rng.windows": (torch.int64, (2,)),
              "scheduler.last_lrs": (torch.float64, (2,)), "scheduler.base_lrs": (torch.float64, (2,))}
    if amp == "fp16":
        expect["scaler.scale"] = (torch.float32, ())
    for key, (dtype, shape) in expect.items():
        if key not in entries:
            problems.append(f"no {key}")
        elif entries[key].dtype != dtype or tuple(entries[key].shape) != shape:
            problems.append(f"{key} is {entries[key].dtype} {tuple(entries[key].shape)}")
    if not problems:
        if entries["scheduler.last_epoch"].item() != STEPS or entries["run.step"].item() != STEPS:
            problems.append(f"scheduler.last_epoch {entries['scheduler.last_epoch'].item()} and run.step "
                            f"{entries['run.step'].item()}, not {STEPS}")
        group_lrs = [entries[f"optimizer.param_groups.{g}.lr"].item() for g in (0, 1)]
        if entries["scheduler.last_lrs"].tolist() != group_lrs:
            problems.append(f"scheduler.last_lrs {entries['scheduler.last_lrs'].tolist()} but the groups' lrs "
                            f"are {group_lrs}")
    checks.report(not problems, "run state", "; ".join(problems) if problems else
                  f"scheduler at step {STEPS}, its lrs the optimizer's, generators and step in place"
                  + (", the GradScaler's scale" if amp == "fp16" else ""))


def run_checks(args, workdir):
    from safetensors import safe_open
    from safetensors.torch import load_file
    print(f"torch {torch.__version__}; gpt --preset tiny, {STEPS} steps on {args.device}")
    checks = Checks()
    checkpoint, init, amp = run_gpt(args, workdir)
    entries = load_file(checkpoint)
    checks.report(True, "load_file", f"{len(entries)} tensors from {os.path.basename(checkpoint)}")

    with safe_open(checkpoint, framework="pt") as file:
        metadata = file.metadata() or {}
    expected = {"format": "pt", "memgrad_checkpoint": "1", "optimizer": "AdamW", "model": "gpt", "amp": amp}
    wrong = {key: metadata.get(key) for key, value in expected.items() if metadata.get(key) != value}
    checks.report(not wrong, "metadata", f"differs: {wrong} (all: {metadata})" if wrong else str(metadata))

    model = torch_gpt.GPT(torch_gpt.GPTConfig(**TINY))
    weights = with_prefix(entries, "model.")
    problems = interop_checks.load_strictly(model, weights)
    initial = load_file(init)
    if not problems and all(torch.equal(initial[key], weights[key]) for key in initial):
        problems.append("the weights equal the initial ones: nothing trained")
    checks.report(not problems, "model", "; ".join(problems) if problems else
                  f"{len(weights)} model.* tensors load strictly into torch_gpt.GPT, trained from --save-init's")
    if not problems:
        check_optimizer(checks, entries, model)
    check_run_state(checks, entries, amp)
    return checks


def main(argv):
    args = parse_args(argv)
    error = interop_checks.start_error(args, "gpt")
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        error = error or "the safetensors package is not installed (pip install safetensors): it is what is checked"
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        checks = run_checks(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="memgrad-training-checkpoint-") as workdir:
            checks = run_checks(args, workdir)
    print(f"{'all checks passed' if checks.failed == 0 else f'{checks.failed} check(s) FAILED'}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
