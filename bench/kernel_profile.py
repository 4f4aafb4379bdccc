#!/usr/bin/env python3
"""bench/kernel_profile.py — where a training step's GPU time goes, kernel by kernel: runs a
command under Nsight Compute (ncu) collecting only each kernel's duration, then prints the
kernels grouped by name with their total time, largest first. Run it on memgrad and on
PyTorch with the same step count to see which kernels make the difference:

  python3 bench/kernel_profile.py --label memgrad -- build-gpu/resnet --bench --warmup 1 --steps 1 ...
  python3 bench/kernel_profile.py --label pytorch -- python3 bench/torch_reference.py --warmup 1 --steps 1 ...

With --timed-steps-only, only the timed steps are profiled (both benchmarks mark them for a
profiler), so the counts are per timed step whatever the warm-up, and torch.compile's
compilation (with its own kernels) stays out.

With --sequence FILE, every kernel is also written to FILE in launch order (its grid, block
and duration), to find which op launched a kernel from its neighbours.

NOTE: ncu serialises kernels and replays nothing for this one metric, but it still adds
tens of milliseconds per kernel: keep the step count small. The clocks are left alone
(--clock-control none), as the GPU machine's rules ask. Durations are the kernels' own
(no launch gaps), so the sum is a lower bound on a step's time.
"""
import argparse
import collections
import csv
import io
import re
import subprocess
import sys

# Kernel families for the summary by category, first match wins (names as ncu prints them,
# memgrad's and PyTorch's both): what a reader compares across frameworks.
CATEGORIES = [
    ("attention", r"flash|attention|fmha|sdpa|cudnn_generated"),
    ("gemm", r"gemm|xmma|cutlass|nvjet|cublas|matmul|wgmma"),
    ("layer norm", r"layer_?norm"),
    ("softmax / cross-entropy", r"softmax|cross_?entropy|nll|log_?sum"),
    ("optimizer", r"adam|multi_?tensor|sgd|optimizer|clip|foreach|norm_?scale"),
    ("embedding", r"embedding|index_?select|gather|scatter"),
    ("reduction", r"reduce|sum|norm"),
    ("copy / cast", r"copy|cast|convert|transpose|contiguous|fill|memset"),
]


def category(name):
    name = family(name)  # a map kernel's functor does not decide its category
    for label, pattern in CATEGORIES:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return "elementwise / other"


# Generic elementwise kernels, which say what they compute only in their template arguments
# (memgrad's map kernels name their functor there, as PyTorch's elementwise kernels do).
GENERIC_KERNELS = re.compile(r"map\d|elementwise_kernel")


def short_name(name):
    """A kernel's name without parameter lists, and without template arguments except for a
    generic elementwise kernel's, so that instances of one kernel group together while the
    elementwise ones stay apart by what they compute."""
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", name)
    name = re.sub(r"\(.*\)$", "", name).replace("void ", "").strip()
    base = family(name)
    if GENERIC_KERNELS.search(base) and "<" in name:
        arguments = re.sub(r"at::native::|mg::cuda::|mg::", "", name[name.index("<"):])
        return (base + arguments)[:140]
    return base[:90]


def family(name):
    """A kernel's name without its template arguments."""
    depth, kept = 0, []
    for char in name:
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif depth == 0:
            kept.append(char)
    return "".join(kept).strip()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="program")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--ncu", default="ncu")
    parser.add_argument("--sequence", help="write every kernel, in launch order, to this file")
    parser.add_argument("--timed-steps-only", action="store_true",
                        help="profile only between the program's cudaProfilerStart and cudaProfilerStop "
                             "(memgrad's step benchmarks and bench/torch_reference.py mark their timed "
                             "steps so): warm-up, setup and torch.compile's compilation left out")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to profile after --")
    ncu = [args.ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           "--print-units", "base", "--target-processes", "all"]
    if args.timed_steps_only:
        ncu += ["--profile-from-start", "off"]
    run = subprocess.run(ncu + command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-3000:])
        return run.returncode
    # ncu prints its own lines ("==PROF==") and the program's output before the CSV.
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.stderr.write("no kernel rows in ncu's output\n" + run.stdout[-2000:] + run.stderr[-2000:])
        return 1
    total_ns, count = collections.Counter(), collections.Counter()
    sequence = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = short_name(row["Kernel Name"])
        ns = float(row["Metric Value"].replace(",", ""))
        total_ns[name] += ns
        count[name] += 1
        sequence.append(f"{len(sequence)}\t{ns / 1e3:.1f} us\tgrid {row.get('Grid Size', '?')}\t"
                        f"block {row.get('Block Size', '?')}\t{name}")
    if args.sequence:
        with open(args.sequence, "w") as out:
            out.write("\n".join(sequence) + "\n")
    overall = sum(total_ns.values())
    print(f"{args.label}: {sum(count.values())} kernels, {overall / 1e6:.3f} ms of kernel time")
    by_category = collections.Counter()
    for name, ns in total_ns.items():
        by_category[category(name)] += ns
    print("  by category:")
    for label, ns in by_category.most_common():
        print(f"  {ns / 1e6:9.3f} ms {100 * ns / overall:5.1f}%  {label}")
    print("  by kernel:")
    for name, ns in total_ns.most_common(args.top):
        print(f"  {ns / 1e6:9.3f} ms {100 * ns / overall:5.1f}%  x{count[name]:<5d} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
