#!/usr/bin/env python3
"""tests/memory/recording/check_memory_exports.py — the exports of a recording, read back
outside C++: PyTorch's memory snapshot with Python's own pickle.load, the Chrome trace with
json.load, both checked against the Recorder's own JSON (recording.json).

    python3 check_memory_exports.py DIR   # DIR: what write_memory_recording wrote

The snapshot: the field names and types PyTorch's tools read (torch/cuda/_memory_viz.py,
torch/utils/viz/MemoryViz.js), blocks that tile their segments, alloc/free pairs that
balance (each free closes an alloc of the same size, or a block from before the trace,
as PyTorch's tools infer them), the blocks alive at the end equal to the segments' active
blocks, and the peak of the replayed trace equal to memgrad's to the byte (and to a
replay of recording.json). The trace: every event has the Trace Event Format's required
fields (name, ph, ts, pid, tid), counters have numeric args, one counter track per
category the recording holds, the three phases and op slices, and the counters' last
values equal the recording's final levels.

Standard library only; exit 1 with every fault listed.
"""
import json
import pathlib
import pickle
import sys

faults = []


def check(condition, message):
    if not condition:
        faults.append(message)
    return condition


FRAME_KEYS = {"filename": str, "line": int, "name": str}
TRACE_KEYS = {"action": str, "addr": int, "size": int, "stream": int, "time_us": int, "frames": list}
SEGMENT_KEYS = {"device": int, "address": int, "total_size": int, "allocated_size": int, "active_size": int,
                "requested_size": int, "stream": int, "segment_type": str, "expandable": bool, "frames": list,
                "blocks": list}
BLOCK_KEYS = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free"}


def has_fields(entry, keys, where):
    ok = check(isinstance(entry, dict), f"{where}: not a dict")
    for key, kind in keys.items():
        ok = check(ok and key in entry, f"{where}: no '{key}'") and \
            check(isinstance(entry[key], kind), f"{where}: '{key}' is {type(entry[key]).__name__}, not {kind.__name__}")
    return ok


def check_frames(frames, where):
    for frame in frames:
        has_fields(frame, FRAME_KEYS, where + " frame")


def recording_levels(recording):
    """The requested bytes of each category after each event (baseline + events), and the peak."""
    device = recording["devices"][0]
    levels = dict(device["baseline_category_bytes"])
    peak = sum(levels.values())
    history = []
    for event in recording["events"]:
        if event["kind"] in ("allocate", "free", "retag"):
            levels[event["category"]] += event["bytes"]
            if event["kind"] == "retag":
                levels[event["previous_category"]] -= event["bytes"]
        peak = max(peak, sum(levels.values()))
        history.append(dict(levels))
    return history, peak


def check_snapshot(snapshot, recording):
    check(isinstance(snapshot, dict) and {"segments", "device_traces"} <= snapshot.keys(),
          "snapshot: not a dict with 'segments' and 'device_traces'")
    segments, traces = snapshot["segments"], snapshot["device_traces"]
    check(len(traces) == 1, f"snapshot: {len(traces)} device traces, expected 1 (the CPU as device 0)")
    trace = traces[0]
    check(len(trace) > 0, "snapshot: the trace is empty")

    active_blocks = {}  # address -> requested size, from the segments (the state at the end)
    for i, segment in enumerate(segments):
        where = f"segment {i}"
        if not has_fields(segment, SEGMENT_KEYS, where):
            continue
        check(segment["segment_type"] in ("small", "large"), f"{where}: segment_type {segment['segment_type']}")
        address, allocated = segment["address"], 0
        for j, block in enumerate(segment["blocks"]):
            if not has_fields(block, BLOCK_KEYS, f"{where} block {j}"):
                continue
            # MemoryViz.js places blocks by adding sizes from the segment's address.
            check(block["address"] == address, f"{where} block {j}: at {block['address']}, expected {address}")
            check(block["state"] in ("active_allocated", "inactive"), f"{where} block {j}: state {block['state']}")
            check_frames(block["frames"], f"{where} block {j}")
            if block["state"] == "active_allocated":
                check(0 < block["requested_size"] <= block["size"], f"{where} block {j}: requested > size")
                active_blocks[block["address"]] = block["requested_size"]
                allocated += block["size"]
            address += block["size"]
        check(address == segment["address"] + segment["total_size"], f"{where}: blocks do not tile the segment")
        check(allocated == segment["allocated_size"], f"{where}: allocated_size {segment['allocated_size']} != {allocated}")

    # Replay as PyTorch's tools do: an alloc opens a block, free_completed closes it; a free
    # of a block never allocated in the trace, or a block alive in the segments but never
    # allocated in it, predates the trace.
    live, initially, segments_live = {}, 0, {}
    pending_free = None
    level = peak = 0
    times = []
    for k, entry in enumerate(trace):
        where = f"trace entry {k}"
        if not has_fields(entry, TRACE_KEYS, where):
            continue
        check(entry["action"] in ACTIONS, f"{where}: action {entry['action']}")
        check_frames(entry["frames"], where)
        times.append(entry["time_us"])
        action, addr, size = entry["action"], entry["addr"], entry["size"]
        check(pending_free is None or action == "free_completed",
              f"{where}: {action} between free_requested and free_completed")
        if action == "alloc":
            check(addr not in live, f"{where}: alloc of {addr}, which is live")
            live[addr] = size
            level += size
        elif action == "free_requested":
            pending_free = (addr, size)
        elif action == "free_completed":
            check(pending_free == (addr, size), f"{where}: free_completed without its free_requested")
            pending_free = None
            if addr in live:
                check(live.pop(addr) == size, f"{where}: freed with another size than allocated")
            else:
                initially += size
            level -= size
        elif action == "segment_alloc":
            segments_live[addr] = size
        elif action == "segment_free":
            check(segments_live.pop(addr, size) == size, f"{where}: segment freed with another size")
        peak = max(peak, level)
    check(times == sorted(times), "snapshot: time_us goes backwards")
    actions = {entry.get("action") for entry in trace}
    check({"segment_alloc", "segment_free"} <= actions, f"snapshot: the trace has no segment events ({sorted(actions)})")
    # Blocks allocated in the trace and alive at the end are the segments' active blocks.
    for addr, size in live.items():
        check(active_blocks.get(addr) == size, f"snapshot: block {addr} ({size} B) alive in the trace, not in segments")
    before = {addr: size for addr, size in active_blocks.items() if addr not in live}
    initially += sum(before.values())
    check(initially > 0, "snapshot: no block predates the trace (the model's parameters should)")
    for addr, size in segments_live.items():
        check(any(s["address"] == addr and s["total_size"] == size for s in segments),
              f"snapshot: segment {addr} allocated in the trace is missing from the segments")
    replay_peak = initially + peak

    memgrad = snapshot.get("memgrad", {})
    devices = memgrad.get("devices", [])
    check(len(devices) == 1, "snapshot: 'memgrad' does not describe one device")
    if devices:
        check(replay_peak == devices[0]["peak_requested_bytes"],
              f"snapshot: the replayed peak {replay_peak} != memgrad's {devices[0]['peak_requested_bytes']}")
    _, recorded_peak = recording_levels(recording)
    check(replay_peak == recorded_peak, f"snapshot: the replayed peak {replay_peak} != recording.json's {recorded_peak}")
    allocs = sum(1 for e in trace if e["action"] == "alloc")
    frees = sum(1 for e in trace if e["action"] == "free_completed")
    return {"trace_entries": len(trace), "allocs": allocs, "frees": frees, "segments": len(segments),
            "peak_requested_bytes": replay_peak, "blocks_before_trace_bytes": initially}


REQUIRED = {"name": str, "ph": str, "ts": (int, float), "pid": int, "tid": int}


def check_trace(document, recording):
    check(isinstance(document, dict) and isinstance(document.get("traceEvents"), list),
          "trace: not an object with a traceEvents array")
    events = document["traceEvents"]
    counters, phases, ops = {}, set(), 0
    for k, event in enumerate(events):
        where = f"trace event {k}"
        for key, kind in REQUIRED.items():
            if check(key in event, f"{where}: no '{key}'"):
                check(isinstance(event[key], kind) and not isinstance(event[key], bool),
                      f"{where}: '{key}' has the wrong type")
        ph = event.get("ph")
        check(ph in ("C", "X", "M"), f"{where}: unexpected ph {ph!r}")
        if ph == "C":
            args = event.get("args")
            if check(isinstance(args, dict) and args, f"{where}: a counter without args"):
                check(all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in args.values()),
                      f"{where}: a counter's args must be numbers")
                counters.setdefault(event["name"], []).append((event["ts"], args.get("bytes")))
        elif ph == "X":
            check(isinstance(event.get("dur"), (int, float)) and event["dur"] >= 0, f"{where}: a slice without dur")
            if event.get("tid") == 2:
                phases.add(event["name"])
            if event.get("tid") == 3:
                ops += 1
                check(isinstance(event.get("args", {}).get("module"), str), f"{where}: an op slice without a module")
        elif ph == "M":
            check(isinstance(event.get("args", {}).get("name"), str), f"{where}: metadata without args.name")
    history, _ = recording_levels(recording)
    present = {c for levels in [recording["devices"][0]["baseline_category_bytes"]] + history
               for c, bytes_ in levels.items() if bytes_ != 0}
    categories = set(counters) - {"allocated", "reserved"}
    check(categories == present, f"trace: counter tracks {sorted(categories)} != categories held {sorted(present)}")
    for category in present:
        samples = counters.get(category, [])
        check(samples and samples[-1][1] == history[-1][category],
              f"trace: {category}'s last counter value != the recording's final level {history[-1][category]}")
    check(phases == {"forward", "backward", "optimizer"}, f"trace: phase slices {sorted(phases)}")
    check(ops > 0, "trace: no op slices")
    return {"trace_events": len(events), "counter_tracks": len(counters), "op_slices": ops}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    folder = pathlib.Path(sys.argv[1])
    recording = json.loads((folder / "recording.json").read_text())
    with open(folder / "snapshot.pickle", "rb") as file:
        snapshot = pickle.load(file)
    figures = check_snapshot(snapshot, recording)
    figures.update(check_trace(json.loads((folder / "trace.json").read_text()), recording))
    print("check_memory_exports:", json.dumps(figures))
    if faults:
        print(f"check_memory_exports: {len(faults)} faults:")
        for fault in faults[:50]:
            print("  " + fault)
        return 1
    print("check_memory_exports: the snapshot and the trace hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
