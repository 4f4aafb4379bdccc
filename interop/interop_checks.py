"""interop/interop_checks.py — what the memgrad <-> PyTorch checks share
(check_torch_interop.py for the ResNet, check_gpt_interop.py for GPT-2): the command-line
flags both take, the safetensors I/O they choose between, the PASS/FAIL lines, running
memgrad's program, the layout of the safetensors file memgrad writes, a strict load into
torch with every tensor's dtype, shape and values checked, the per-row relative error of
logits, and main()'s start-up checks and temporary directory.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from torch_reference_harness import set_tf32  # noqa: E402
import safetensors_file  # noqa: E402


def argument_parser(description, program):
    """The flags every check takes (--binary, --device, --seed, --tolerance, --safetensors,
    --workdir); the caller adds its own and resolves the device with resolve_device."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--binary", default=f"build/{program}", help=f"memgrad's {program}")
    parser.add_argument("--device", default=None, choices=["cpu", "cuda"],
                        help="for both frameworks (default: cuda when torch sees one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--safetensors", default="auto", choices=["auto", "package", "builtin"],
                        help="package: safetensors.torch; builtin: interop/safetensors_file.py")
    parser.add_argument("--workdir", default=None, help="keep the files here (default: a temp dir)")
    return parser


def resolve_device(args):
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"


def safetensors_io(choice):
    """(load_file, save_file, description)."""
    have_package = importlib.util.find_spec("safetensors") is not None
    if choice == "package" or (choice == "auto" and have_package):
        import safetensors
        from safetensors.torch import load_file, save_file
        return load_file, save_file, f"the safetensors package {safetensors.__version__}"
    reason = "as asked" if choice == "builtin" else "the safetensors package is not installed"
    return (safetensors_file.load_file, safetensors_file.save_file,
            f"interop/safetensors_file.py's reader and writer ({reason})")


class Checks:
    def __init__(self):
        self.failed = 0

    def report(self, passed, name, detail):
        self.failed += 0 if passed else 1
        print(f"{'PASS' if passed else 'FAIL'} {name}: {detail}", flush=True)


def run_binary(binary, *arguments):
    """Runs memgrad's program; returns None or its error text."""
    result = subprocess.run([binary, *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        return f"{binary} exited with {result.returncode}: {result.stderr.strip() or result.stdout.strip()}"
    return None


def state_mismatches(expected, actual):
    """Differences in keys, dtypes and shapes between two {name: tensor} dicts."""
    problems = []
    missing = [k for k in expected if k not in actual]
    unexpected = [k for k in actual if k not in expected]
    if missing:
        problems.append(f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if unexpected:
        problems.append(f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
    for name, tensor in expected.items():
        if name in actual and (actual[name].dtype != tensor.dtype or actual[name].shape != tensor.shape):
            problems.append(f"{name}: {actual[name].dtype} {tuple(actual[name].shape)}, expected "
                            f"{tensor.dtype} {tuple(tensor.shape)}")
    return problems


def check_memgrad_file(checks, path, absent=None):
    """The layout of a safetensors file memgrad wrote, as interop/safetensors_file.py reads
    it: as the reference writer lays it out, tagged format=pt, and holding none of the keys
    in `absent` ({key: why it must not be stored}). Reported as "memgrad file"; False only
    when the file cannot be read at all."""
    absent = absent or {}
    try:
        header = safetensors_file.read_header(path)
    except safetensors_file.FormatError as error:
        checks.report(False, "memgrad file", str(error))
        return False
    problems = list(header["notes"])
    if header["metadata"].get("format") != "pt":
        problems.append(f"metadata {header['metadata']} lacks format=pt")
    problems += [f"{key} is stored, though {why}" for key, why in absent.items() if key in header["tensors"]]
    absent_keys = "".join(f", no {key}" for key in absent)
    checks.report(not problems, "memgrad file", "; ".join(problems) if problems else
                  f"well-formed safetensors as the reference writer makes them ({len(header['tensors'])} "
                  f"tensors, keys sorted, data 8-byte aligned, metadata {header['metadata']}{absent_keys})")
    return True


def load_strictly(model, state):
    """Loads the {name: tensor} `state` into `model` with load_state_dict(strict=True) after
    checking every key, dtype and shape (load_state_dict would silently convert a dtype),
    then checks that every value arrived unchanged; the problems found (empty: it arrived
    whole)."""
    problems = state_mismatches(model.state_dict(), state)
    if not problems:
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as error:
            problems.append(f"load_state_dict(strict=True): {error}")
    if not problems:
        loaded = model.state_dict()
        problems += [f"{k}: values changed on loading" for k, v in state.items()
                     if not torch.equal(loaded[k].cpu(), v.cpu())]
    return problems


def row_relative_error(values, reference):
    """The largest over rows of ||values - reference|| / ||reference||, each row a vector
    along the last dim (a sample's or a position's logits)."""
    values, reference = values.double().cpu(), reference.double().cpu()
    return ((values - reference).norm(dim=-1) / reference.norm(dim=-1)).max().item()


def start_error(args, program):
    """Why the check cannot start (main returns 2), or None."""
    if not os.access(args.binary, os.X_OK):
        return (f"no {program} program at {args.binary} (build it: cmake --build build --target {program}), "
                f"or pass --binary")
    if args.device == "cuda" and not torch.cuda.is_available():
        return "--device cuda, but PyTorch sees no CUDA device"
    return None


def run_all(args, run_checks, temp_prefix):
    """TF32 off on cuda (full float32, as memgrad's programs compute), then
    run_checks(args, workdir) in --workdir or a temporary directory, and the summary line;
    the exit code: 0 all checks passed, 1 a check failed."""
    if args.device == "cuda":
        set_tf32(matmul=False, cudnn=False)
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        checks = run_checks(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix=temp_prefix) as workdir:
            checks = run_checks(args, workdir)
    print(f"{'all checks passed' if checks.failed == 0 else f'{checks.failed} check(s) FAILED'}")
    return 1 if checks.failed else 0
