#!/usr/bin/env python3
"""bench/optimizer_state_curves.py — does where AdamW keeps its state change training?
Reads the gpt example's --summary-json of the same run with `--optimizer-state device`,
`8bit` and `offload` (given in that order) and prints each run's validation losses, then
checks the two claims of docs/memory.md:

  8-bit:   its best validation loss is within 1% of the 32-bit run's (bitsandbytes' claim);
  offload: its curve is the device run's; on the CPU bit for bit, on a GPU within the
           rounding of the host's and the device's float32 arithmetic, amplified by
           training (the largest difference of a validation loss is printed, and must stay
           under 1%).

  python3 bench/optimizer_state_curves.py device.json 8bit.json offload.json
Exit code: 0 both hold, 1 one does not, 2 could not read a summary.
"""
import json
import sys


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    try:
        runs = {name: json.load(open(path)) for name, path in zip(("device", "8bit", "offload"), sys.argv[1:])}
    except (OSError, ValueError) as error:
        print(f"optimizer_state_curves: cannot read a summary: {error}")
        return 2
    for name, run in runs.items():
        losses = " ".join(f"{loss:.4f}" for loss in run["val_loss_per_eval"])
        print(f"{name:8} best val {run['best_val_loss']:.4f} at step {run['best_step']}; "
              f"{run['tokens_per_s']:.0f} tokens/s; per evaluation: {losses}")
    ok = True
    ratio = runs["8bit"]["best_val_loss"] / runs["device"]["best_val_loss"]
    print(f"8-bit's best against 32-bit's: {ratio:.4f} ({(ratio - 1) * 100:+.2f}%), goal within 1%")
    ok &= ratio <= 1.01
    device, offload = runs["device"]["val_loss_per_eval"], runs["offload"]["val_loss_per_eval"]
    worst = max(abs(a - b) / a for a, b in zip(device, offload))
    identical = device == offload
    print(f"offload against device: {'identical' if identical else f'largest difference {worst * 100:.3f}%'} "
          f"over {len(device)} evaluations")
    ok &= len(device) == len(offload) and worst < 0.01
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
