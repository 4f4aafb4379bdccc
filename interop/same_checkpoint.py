#!/usr/bin/env python3
"""interop/same_checkpoint.py — do two checkpoints hold the same tensors, byte for byte?

    python3 interop/same_checkpoint.py A.safetensors B.safetensors [--ignore NAME]...

Compares every tensor's dtype, shape and bytes, except the ones named with --ignore
(default: the run's wall-clock fields, run.seconds, run.seconds_to_best and
run.seconds_per_epoch, which two runs of the same computation never share; with them the
header's memgrad_crc32 differs too, so the files are not compared whole). Prints each
tensor that differs, with the index of its first differing byte, and exits 1 if any does;
2 if a file is not well-formed safetensors. Needs only the standard library.
"""
import argparse
import sys

from safetensors_file import FormatError, read_raw

WALL_CLOCK_FIELDS = ["run.seconds", "run.seconds_to_best", "run.seconds_per_epoch"]


def differences(path_a, path_b, ignored):
    """Lines describing each difference between the two files' tensors, outside `ignored`."""
    tensors_a, _ = read_raw(path_a)
    tensors_b, _ = read_raw(path_b)
    lines = []
    for name in sorted((set(tensors_a) | set(tensors_b)) - set(ignored)):
        if name not in tensors_a or name not in tensors_b:
            lines.append(f"{name}: only in {path_a if name in tensors_a else path_b}")
            continue
        (dtype_a, shape_a, bytes_a), (dtype_b, shape_b, bytes_b) = tensors_a[name], tensors_b[name]
        if (dtype_a, shape_a) != (dtype_b, shape_b):
            lines.append(f"{name}: {dtype_a} {shape_a} against {dtype_b} {shape_b}")
        elif bytes_a != bytes_b:
            first = next(i for i, (x, y) in enumerate(zip(bytes_a, bytes_b)) if x != y)
            lines.append(f"{name}: {dtype_a} {shape_a}, bytes differ from byte {first} of {len(bytes_a)}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--ignore", action="append", help="a tensor to leave out (repeatable)")
    args = parser.parse_args()
    ignored = args.ignore if args.ignore is not None else WALL_CLOCK_FIELDS
    try:
        lines = differences(args.a, args.b, ignored)
    except FormatError as error:
        print(f"same_checkpoint: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    compared = f"{args.a} and {args.b}, all tensors but {', '.join(ignored) or 'none'}"
    print(f"{'DIFFERENT' if lines else 'same'}: {compared}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
