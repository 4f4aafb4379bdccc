#!/usr/bin/env python3
"""bench/gpt_loss_reference.py — PyTorch trains the gpt example's byte-level GPT
(examples/gpt) exactly as memgrad does, so that the two loss curves can be compared:

  * the same text and split: --data read as examples/gpt/data.cpp reads it (a file, or a
    folder's UTF-8 text files in byte order of their names, each file once, binary files
    and sub-folders skipped), the last 10% of the bytes for validation;
  * the same windows: examples/gpt draws its window offsets with mg::randint from Philox
    generators keyed per stream (examples/gpt/main.cpp's stream_seed); this file ports
    Philox4x32-10 (core/random.h), the uniform doubles and randint's flooring to plain
    Python ints, so it draws the very same offsets for a --seed (checked against
    `gpt --dump-windows` by --check-windows, which needs no torch);
  * the same initial weights: `gpt --save-init FILE` writes them before step 0 and
    --init FILE loads them (strict) into interop/torch_gpt.py's model;
  * the same optimizer, schedule and step: AdamW (betas 0.9 / 0.99, weight decay 0.1 on
    the 2-d parameters, bench/torch_reference_models.py's gpt_optimizer), linear warm-up
    from 0 then a cosine to a tenth of --lr (optim/scheduler.cpp's WarmupCosineLR), --accum
    micro-batches each backpropagating loss / accum, gradients clipped to norm 1; the
    forward under autocast with --amp bf16; estimates every --eval-interval steps and
    after the last, each the mean loss of --eval-iters batches drawn from a generator
    seeded afresh (the same windows every time), in eval mode.

What cannot be the same: dropout's masks (torch's generator, not memgrad's), the order of
floating-point sums in the kernels, and (with --amp bf16) where rounding happens. With
--dropout 0 the two runs differ by rounding alone. Output: one JSON line on stdout with
the fields of memgrad's --summary-json that describe the curve (eval_steps,
val_loss_per_eval, train_loss_per_eval, val_loss, best_val_loss, ...) and step_losses,
every step's training loss. --compare SUMMARY.json (memgrad's, from the same command line)
adds a "compare" section and exits 1 unless the final validation losses agree within
--tolerance (default 2%).

  build-cpu/gpt --preset tiny --steps 300 --save-init init.safetensors --summary-json mg.json ...
  python3 bench/gpt_loss_reference.py --preset tiny --steps 300 --init init.safetensors \\
      --compare mg.json ...   (the same flags as gpt's, --device cuda by default)
  build-cpu/gpt --steps 3 --dump-windows windows.safetensors ...
  python3 bench/gpt_loss_reference.py --steps 3 --check-windows windows.safetensors ...
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "interop"))
import safetensors_file  # noqa: E402  (plain Python; torch only for load_file)

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

# ---- core/random.h in plain Python ----


def philox4x32(counter, seed):
    """Philox4x32-10: 4 random 32-bit words from 4 counter words and a 64-bit key."""
    c0, c1, c2, c3 = counter
    key0, key1 = seed & MASK32, (seed >> 32) & MASK32
    for _ in range(10):
        product0 = 0xD2511F53 * c0
        product1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((product1 >> 32) ^ c1 ^ key0, product1 & MASK32,
                          (product0 >> 32) ^ c3 ^ key1, product0 & MASK32)
        key0 = (key0 + 0x9E3779B9) & MASK32
        key1 = (key1 + 0xBB67AE85) & MASK32
    return c0, c1, c2, c3


def uniform_double(high_word, low_word):
    """core/random.h's uniform_double_from_bits: a double in [0, 1) from 53 random bits."""
    bits = ((high_word << 21) ^ (low_word >> 11)) & ((1 << 53) - 1)
    return float(bits) * (1.0 / 9007199254740992.0)


class Generator:
    """mg::Generator: a Philox key and a running offset; each value takes one block."""

    def __init__(self, seed):
        self.seed = seed & MASK64
        self.offset = 0

    def randint(self, low, high, count):
        """mg::randint(low, high, {count}, Int64): uniform doubles in [low, high) (the CPU
        fill of core/cpu/copy_fill.cpp, Float64: words 0 and 1 of each block), truncated."""
        start = self.offset
        self.offset += count
        span = float(high) - float(low)
        values = []
        for index in range(count):
            counter = (start + index) & MASK64
            words = philox4x32((counter & MASK32, counter >> 32, 0, 0), self.seed)
            value = float(low) + span * uniform_double(words[0], words[1])
            values.append(int(value if value < high else float(low)))
        return values


# examples/gpt/main.cpp's streams and their keys.
STREAM_WINDOWS, STREAM_DROPOUT, STREAM_TRAIN_ESTIMATE, STREAM_VALIDATION_ESTIMATE = 1, 2, 3, 4


def stream_seed(seed, stream):
    """SplitMix64's finaliser of seed + golden ratio x stream, as main.cpp's stream_seed."""
    mixed = (seed + 0x9E3779B97F4A7C15 * stream) & MASK64
    mixed = ((mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    mixed = ((mixed ^ (mixed >> 27)) * 0x94D049BB133111EB) & MASK64
    return mixed ^ (mixed >> 31)


# ---- examples/gpt/data.cpp in plain Python ----


def sequence_length(lead):
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def is_utf8_text(data):
    """data.cpp's is_utf8_text (NOTE: not bytes.decode: it accepts what that does, and
    also the 3-byte forms decode refuses, such as encoded surrogates)."""
    i = 0
    while i < len(data):
        if data[i] == 0:
            return False
        length = sequence_length(data[i])
        if length == 0 or i + length > len(data):
            return False
        if any(data[i + k] & 0xC0 != 0x80 for k in range(1, length)):
            return False
        i += length
    return True


def load_corpus(path):
    """(train bytes, validation bytes, files read) as data.cpp's load_corpus."""
    if os.path.isfile(path):
        with open(path, "rb") as file:
            text = file.read()
        if not is_utf8_text(text):
            raise SystemExit(f"error: --data '{path}' is not UTF-8 text")
        files = [path]
    elif os.path.isdir(path):
        # Byte order of the names, as std::sort of the paths; each file once, under the
        # first of its names (fortune's "cookie.u8" links to "cookie").
        folder = os.fsencode(path)
        names = sorted(name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name)))
        seen, parts, files = set(), [], []
        for name in names:
            full = os.path.join(folder, name)
            real = os.path.realpath(full)
            if real in seen:
                continue
            seen.add(real)
            with open(full, "rb") as file:
                data = file.read()
            if is_utf8_text(data):
                parts.append(data)
                files.append(os.fsdecode(name))
        text = b"".join(parts)
    else:
        raise SystemExit(f"error: --data '{path}' does not exist")
    if not text:
        raise SystemExit(f"error: --data '{path}' holds no text")
    validation = len(text) // 10
    return text[:len(text) - validation], text[len(text) - validation:], files


def window_starts(data, batch_size, block_size, generator):
    """examples/gpt/windows.cpp's offsets of a batch: batch_size draws from [0, len - block)."""
    return generator.randint(0, len(data) - block_size, batch_size)


# ---- the model's sizes: examples/gpt/args.cpp's presets and single flags ----

PRESETS = {"tiny": dict(n_layer=2, n_head=2, n_embd=64, block_size=64, dropout=0.0),
           "small": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, dropout=0.2),
           "gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, dropout=0.0),
           "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024, block_size=1024, dropout=0.0)}


def model_sizes(args):
    sizes = dict(PRESETS[args.preset])
    for flag, key in (("layers", "n_layer"), ("heads", "n_head"), ("embd", "n_embd"), ("block", "block_size"),
                      ("dropout", "dropout")):
        if getattr(args, flag) is not None:
            sizes[key] = getattr(args, flag)
    return sizes


def warmup_steps(args):
    return args.warmup if args.warmup is not None else min(100, args.steps // 10)


def learning_rate(step, args):
    """WarmupCosineLR(warmup, steps, min_lr_factor 0.1, start_factor 0) at epoch `step`:
    the lr of optimizer step `step` (0-based), as the gpt example's scheduler sets it."""
    warmup = warmup_steps(args)
    if step < warmup:
        return args.lr * (step / warmup)
    min_lr = 0.1 * args.lr
    if step > args.steps:
        return min_lr
    progress = (step - warmup) / (args.steps - warmup)
    return min_lr + (args.lr - min_lr) * (1 + math.cos(math.pi * progress)) / 2


def parse_args(argv):
    parser = argparse.ArgumentParser(description="PyTorch's loss curve for examples/gpt's run (same windows, "
                                                 "initial weights, optimizer and schedule).")
    parser.add_argument("--data", default="/usr/share/games/fortunes")
    parser.add_argument("--preset", default="small", choices=list(PRESETS))
    for flag in ("layers", "heads", "embd", "block"):
        parser.add_argument(f"--{flag}", type=int, default=None)
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--amp", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--eval-interval", type=int, default=250)
    parser.add_argument("--eval-iters", type=int, default=200)
    parser.add_argument("--init", help="the initial weights, from `gpt --save-init FILE` (required to train)")
    parser.add_argument("--compare", help="memgrad's --summary-json of the same run")
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="largest |memgrad / pytorch - 1| of the final validation loss (default 0.02)")
    parser.add_argument("--check-windows", metavar="FILE",
                        help="compare the first --steps steps' training windows with `gpt --dump-windows FILE` "
                             "and exit (needs no torch)")
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "accum", "eval_interval", "eval_iters"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if warmup_steps(args) >= args.steps:
        parser.error(f"--warmup {warmup_steps(args)} must be below --steps {args.steps}")
    if args.check_windows is None and args.init is None:
        parser.error("give --init FILE (from `gpt --save-init FILE`) or --check-windows FILE")
    return args


# ---- --check-windows: this file's draws against gpt's ----


def check_windows(args):
    train, _, _ = load_corpus(args.data)
    block_size = model_sizes(args)["block_size"]
    tensors, _ = safetensors_file.read_raw(args.check_windows)
    dtype, shape, data = tensors["inputs"]
    expected_shape = [args.steps, args.accum * args.batch, block_size]
    if dtype != "I64" or shape != expected_shape:
        print(f"FAIL: {args.check_windows} holds {dtype} {shape}; these flags draw I64 {expected_shape}")
        return 1
    dumped = [int.from_bytes(data[8 * i:8 * i + 8], "little", signed=True) for i in range(len(data) // 8)]
    generator = Generator(stream_seed(args.seed, STREAM_WINDOWS))
    rows = args.steps * args.accum * args.batch
    starts = []
    for _ in range(args.steps * args.accum):
        starts += window_starts(train, args.batch, block_size, generator)
    for row, start in enumerate(starts):
        if list(train[start:start + block_size]) != dumped[row * block_size:(row + 1) * block_size]:
            print(f"FAIL: window {row} (step {row // (args.accum * args.batch)}) differs: this file draws offset "
                  f"{start}")
            return 1
    print(f"PASS: the {rows} windows of {args.steps} steps are gpt's (seed {args.seed}; first offsets "
          f"{starts[:4]})")
    return 0


# ---- training ----


def train(args):
    import torch
    import torch_gpt
    # The GPT optimizer and the TF32 setting, shared with the benchmark (bench/torch_reference.py).
    import torch_reference_harness
    import torch_reference_models

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda, but PyTorch sees no CUDA device")
    device = torch.device(args.device)
    if device.type == "cuda":
        torch_reference_harness.set_tf32(matmul=False, cudnn=True)  # memgrad's defaults
    torch.manual_seed(args.seed)  # dropout's masks (memgrad's differ)
    train_bytes, validation_bytes, files = load_corpus(args.data)
    sizes = model_sizes(args)
    block_size = sizes["block_size"]
    model = torch_gpt.GPT(torch_gpt.GPTConfig(vocab_size=256, **sizes))
    try:
        from safetensors.torch import load_file
    except ImportError:
        load_file = safetensors_file.load_file
    model.load_state_dict(load_file(args.init), strict=True)
    model = model.to(device)
    model.train()
    optimizer = torch_reference_models.gpt_optimizer(model, args.lr)
    amp_dtype = torch.bfloat16 if args.amp == "bf16" else None

    def batch(data, generator):
        starts = window_starts(data, args.batch, block_size, generator)
        rows = torch.tensor([list(data[start:start + block_size + 1]) for start in starts], dtype=torch.int64)
        return rows[:, :-1].to(device), rows[:, 1:].to(device)  # (B, T) inputs and targets

    def next_byte_loss(inputs, targets):
        with torch.autocast(device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
            logits = model(inputs)  # (B, T, 256)
            return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def estimate(data, seed):
        model.eval()
        generator = Generator(seed)
        total = torch.zeros((), dtype=torch.float64, device=device)
        with torch.no_grad():
            for _ in range(args.eval_iters):
                total += next_byte_loss(*batch(data, generator))
        model.train()
        return (total / args.eval_iters).item()

    windows = Generator(stream_seed(args.seed, STREAM_WINDOWS))
    step_losses, eval_steps, val_losses, train_losses = [], [], [], []
    start_time = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        optimizer.zero_grad(set_to_none=True)
        step_loss = torch.zeros((), device=device)
        for _ in range(args.accum):
            loss = next_byte_loss(*batch(train_bytes, windows))
            (loss if args.accum == 1 else loss / args.accum).backward()
            step_loss += loss.detach().float()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step_losses.append(step_loss / args.accum)
        done = step + 1
        if done % args.eval_interval == 0 or done == args.steps:
            train_loss = estimate(train_bytes, stream_seed(args.seed, STREAM_TRAIN_ESTIMATE))
            val_loss = estimate(validation_bytes, stream_seed(args.seed, STREAM_VALIDATION_ESTIMATE))
            eval_steps.append(done)
            train_losses.append(train_loss)
            val_losses.append(val_loss)
            print(f"step {done}: train loss {train_loss:.4f}, val loss {val_loss:.4f}, "
                  f"{time.perf_counter() - start_time:.1f} s", file=sys.stderr, flush=True)
    best = min(range(len(val_losses)), key=lambda i: val_losses[i])
    return {
        "framework": "pytorch",
        "model": "gpt",
        "preset": args.preset,
        **sizes,
        "vocab_size": 256,
        "dataset": args.data,
        "files": len(files),
        "train_bytes": len(train_bytes),
        "val_bytes": len(validation_bytes),
        "device": args.device,
        "amp": args.amp,
        "batch_size": args.batch,
        "accum": args.accum,
        "lr": args.lr,
        "warmup_steps": warmup_steps(args),
        "steps": args.steps,
        "seed": args.seed,
        "val_loss": val_losses[-1],
        "train_loss": train_losses[-1],
        "best_val_loss": val_losses[best],
        "best_step": eval_steps[best],
        "seconds": time.perf_counter() - start_time,
        "eval_steps": eval_steps,
        "val_loss_per_eval": val_losses,
        "train_loss_per_eval": train_losses,
        "step_losses": torch.stack(step_losses).tolist(),
        "torch_version": torch.__version__,
    }


def compare(result, path, tolerance):
    """The "compare" section: memgrad's curve beside PyTorch's, and whether the final
    validation losses agree within `tolerance`; a summary of another run is an error."""
    with open(path, encoding="utf-8") as file:
        memgrad = json.load(file)
    for key in ("n_layer", "n_head", "n_embd", "block_size", "dropout", "vocab_size", "batch_size", "accum", "amp", "lr",
                "warmup_steps", "eval_steps"):
        if memgrad.get(key) != result.get(key):
            raise SystemExit(f"error: {path} is another run: {key} is {memgrad.get(key)!r} there, "
                             f"{result.get(key)!r} here")
    relative = memgrad["val_loss"] / result["val_loss"] - 1
    for step, ours, theirs in zip(result["eval_steps"], memgrad["val_loss_per_eval"], result["val_loss_per_eval"]):
        print(f"step {step}: val loss memgrad {ours:.4f}, pytorch {theirs:.4f} ({ours / theirs - 1:+.2%})",
              file=sys.stderr)
    return {
        "memgrad_val_loss": memgrad["val_loss"],
        "pytorch_val_loss": result["val_loss"],
        "relative_difference": relative,
        "tolerance": tolerance,
        "within_tolerance": abs(relative) <= tolerance,
        "memgrad_val_loss_per_eval": memgrad["val_loss_per_eval"],
        "memgrad_tokens_per_s": memgrad.get("tokens_per_s"),
    }


def main(argv):
    args = parse_args(argv)
    if args.check_windows:
        return check_windows(args)
    result = train(args)
    status = 0
    if args.compare:
        result["compare"] = compare(result, args.compare, args.tolerance)
        status = 0 if result["compare"]["within_tolerance"] else 1
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
