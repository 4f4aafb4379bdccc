#!/usr/bin/env python3
"""bench/soak_check.py — is a long run's memory flat? Reads the CSV that an example's
`--memory-log FILE.csv` wrote (one line per optimizer step: step, allocated_bytes,
reserved_bytes, segments, requested_bytes, then each category's bytes) and checks the
criterion of docs/reliability.md, the same as tests/training/test_soak.cpp's:

  after the warm-up step W, no step ends with more reserved bytes, more allocated bytes or
  more segments than step W ended with.

(The CPU test also asks the last step's allocated bytes to equal step W's. A log of epochs
cannot: the step that ends an epoch on a short last batch keeps that smaller batch alive
until the next one, so its allocated bytes are lower; the maximum already catches growth.)

W must lie past the first evaluation (its batches take memory once) and past the first
optimizer step (which creates the optimizer's state). Prints the figures and the verdict;
with --svg writes a small plot (reserved and allocated MiB and segments against the step),
self-contained, no libraries.

  python3 bench/soak_check.py run.csv --warmup 300 [--svg plot.svg] [--title TEXT]
Exit code: 0 flat, 1 something grew, 2 could not read the log.
"""
import argparse
import csv
import sys


def read_log(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} holds no steps")
    return [{key: int(value) for key, value in row.items()} for row in rows]


def polyline(points, width, height, x_max, y_max, margin):
    coordinates = " ".join(
        f"{margin + (x / x_max) * (width - 2 * margin):.1f},{height - margin - (y / y_max) * (height - 2 * margin):.1f}"
        for x, y in points)
    return coordinates


def write_svg(path, rows, title, warmup):
    width, height, margin = 720, 300, 48
    steps = [row["step"] for row in rows]
    # NOTE: one point per pixel column at most (the extremes of each column kept), so that a
    # 20,000-step log stays a small file and a one-step spike still shows.
    columns = {}
    for row in rows:
        column = int(row["step"] * (width - 2 * margin) / max(steps))
        entry = columns.setdefault(column, {"step": row["step"], "reserved": 0, "allocated": 0})
        entry["reserved"] = max(entry["reserved"], row["reserved_bytes"])
        entry["allocated"] = max(entry["allocated"], row["allocated_bytes"])
    thinned = [columns[key] for key in sorted(columns)]
    mib = 1 << 20
    y_max = max(row["reserved_bytes"] for row in rows) / mib * 1.1 or 1
    x_max = max(steps)
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{margin}" y="20">{title}</text>',
             f'<line x1="{margin}" y1="{height - margin}" x2="{width - margin}" y2="{height - margin}" stroke="black"/>',
             f'<line x1="{margin}" y1="{margin}" x2="{margin}" y2="{height - margin}" stroke="black"/>',
             f'<text x="{margin}" y="{height - margin + 16}">1</text>',
             f'<text x="{width - margin}" y="{height - margin + 16}" text-anchor="end">step {x_max}</text>',
             f'<text x="{margin - 4}" y="{margin + 4}" text-anchor="end">{y_max:.0f}</text>',
             f'<text x="{margin - 4}" y="{height - margin}" text-anchor="end">0</text>',
             f'<text x="4" y="{height / 2}" transform="rotate(-90 10 {height / 2})">MiB</text>']
    x_warm = margin + warmup / x_max * (width - 2 * margin)
    lines.append(f'<line x1="{x_warm:.1f}" y1="{margin}" x2="{x_warm:.1f}" y2="{height - margin}" '
                 f'stroke="gray" stroke-dasharray="4 3"/>')
    lines.append(f'<text x="{x_warm + 4:.1f}" y="{margin + 12}" fill="gray">warm-up ends (step {warmup})</text>')
    for key, colour in (("reserved", "#d62728"), ("allocated", "#1f77b4")):
        points = [(row["step"], row[key] / mib) for row in thinned]
        lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{polyline(points, width, height, x_max, y_max, margin)}"/>')
    lines.append(f'<text x="{width - margin}" y="36" text-anchor="end" fill="#d62728">reserved</text>')
    lines.append(f'<text x="{width - margin}" y="50" text-anchor="end" fill="#1f77b4">allocated</text>')
    lines.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log")
    parser.add_argument("--warmup", type=int, required=True, help="the step W the later ones are held to")
    parser.add_argument("--svg")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    try:
        rows = read_log(args.log)
    except (OSError, ValueError, KeyError) as error:
        print(f"soak_check: cannot read {args.log}: {error}")
        return 2
    by_step = {row["step"]: row for row in rows}
    if args.warmup not in by_step or args.warmup == rows[-1]["step"]:
        print(f"soak_check: --warmup {args.warmup} is not a step before the last ({rows[-1]['step']}) of {args.log}")
        return 2
    reference = by_step[args.warmup]
    later = [row for row in rows if row["step"] > args.warmup]
    grew = []
    for key in ("reserved_bytes", "allocated_bytes", "segments"):
        worst = max(later, key=lambda row: row[key])
        print(f"{key:16} step {args.warmup}: {reference[key]:>14,}   most after it: {worst[key]:>14,} "
              f"(step {worst['step']})   last: {rows[-1][key]:>14,}")
        if worst[key] > reference[key]:
            grew.append(f"{key} grew to {worst[key]:,} at step {worst['step']}")
    if args.svg:
        write_svg(args.svg, rows, args.title or args.log, args.warmup)
    if grew:
        print(f"NOT FLAT over {len(rows)} steps: " + "; ".join(grew))
        return 1
    print(f"FLAT over {len(rows)} steps (warm-up {args.warmup})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
