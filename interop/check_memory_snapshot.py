#!/usr/bin/env python3
"""interop/check_memory_snapshot.py — does PyTorch's own memory viewer take a memgrad
recording? Loads a snapshot that memgrad wrote (`--memory-snapshot FILE.pickle` in the
examples, mg::memory::Recorder::write_pytorch_snapshot) with pickle.load and feeds it to
torch.cuda._memory_viz:

  trace_plot      the Active Memory Timeline page (allocations over time)
  trace_plot -s   the same of segments (plot_segments=True)
  segment_plot    the Allocator State History page (segments and their blocks per event)
  segsum, trace   the text summaries, which walk every segment, block and trace entry in
                  Python (and assert that each segment's blocks add up to it)

and replays the trace as those tools do (an alloc adds its size, a free_completed
subtracts it, blocks alive in the segments or freed without an alloc predate the trace)
to compare the peak with memgrad's own report to the byte: --peak BYTES, or else the
peak memgrad stored in the file ('memgrad' -> 'devices' -> 'peak_requested_bytes'). The
pages are written next to the snapshot (FILE.trace.html, FILE.segments.html,
FILE.state.html) to open in a browser: they load MemoryViz.js from PyTorch's CDN, so the
drawing itself needs a network, as it does for any PyTorch snapshot.

Where torch is not installed it prints SKIP and exits 77, so a CPU machine without it
reports the check as not run rather than failed.

  python3 interop/check_memory_snapshot.py gpt2.pickle [--peak BYTES] [--device 0]
Exit code: 0 all checks passed, 1 a check failed, 2 could not start, 77 no torch.
"""
import argparse
import pathlib
import pickle
import sys


def replayed_peak(snapshot, device):
    """The most requested bytes alive at once on `device`, replaying its trace."""
    trace = snapshot["device_traces"][device]
    live = {}
    level = peak = 0
    before = 0  # bytes of blocks that predate the trace
    for entry in trace:
        if entry["action"] == "alloc":
            live[entry["addr"]] = entry["size"]
            level += entry["size"]
        elif entry["action"] == "free_completed":
            if live.pop(entry["addr"], None) is None:
                before += entry["size"]
            level -= entry["size"]
        peak = max(peak, level)
    for segment in snapshot["segments"]:
        if segment["device"] != device:
            continue
        for block in segment["blocks"]:
            if block["state"] == "active_allocated" and block["address"] not in live:
                before += block["requested_size"]
    return before + peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("snapshot", type=pathlib.Path)
    parser.add_argument("--peak", type=int, help="memgrad's peak in bytes (default: the one stored in the file)")
    parser.add_argument("--device", type=int, default=None, help="the trace's device index (default: the only one)")
    args = parser.parse_args()
    try:
        from torch.cuda import _memory_viz
    except ImportError as error:
        print(f"SKIP: torch is not installed here ({error}); run this where it is")
        return 77
    try:
        with open(args.snapshot, "rb") as file:
            snapshot = pickle.load(file)
    except OSError as error:
        print(f"check_memory_snapshot: cannot read {args.snapshot}: {error}")
        return 2

    stored = {d["index"]: d for d in snapshot.get("memgrad", {}).get("devices", [])}
    devices = [i for i, trace in enumerate(snapshot["device_traces"]) if trace]
    device = args.device if args.device is not None else (devices[0] if len(devices) == 1 else None)
    if device is None:
        print(f"check_memory_snapshot: traces on devices {devices}; pick one with --device")
        return 2
    expected = args.peak if args.peak is not None else stored.get(device, {}).get("peak_requested_bytes")
    if expected is None:
        print("check_memory_snapshot: no --peak given and none stored in the snapshot")
        return 2

    failures = 0
    pages = {"trace": lambda: _memory_viz.trace_plot(snapshot),
             "segments": lambda: _memory_viz.trace_plot(snapshot, plot_segments=True),
             "state": lambda: _memory_viz.segment_plot(snapshot),
             "segsum": lambda: _memory_viz.segsum(snapshot),
             "text trace": lambda: _memory_viz.trace(snapshot)}
    for name, make in pages.items():
        try:
            output = make()
        except Exception as error:  # any failure of PyTorch's tool on our file is the finding
            print(f"FAIL {name}: torch.cuda._memory_viz raised {type(error).__name__}: {error}")
            failures += 1
            continue
        if name in ("trace", "segments", "state"):
            page = args.snapshot.with_suffix(f".{name}.html")
            page.write_text(output)
            print(f"ok   {name}: {len(output)} characters of HTML written to {page}")
        else:
            print(f"ok   {name}: {len(output.splitlines())} lines")
    peak = replayed_peak(snapshot, device)
    if peak == expected:
        print(f"ok   peak: the replayed trace peaks at {peak} bytes, memgrad's report says {expected}")
    else:
        print(f"FAIL peak: the replayed trace peaks at {peak} bytes, memgrad's report says {expected} "
              f"({peak - expected:+d})")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
