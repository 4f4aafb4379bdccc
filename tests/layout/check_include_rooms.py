#!/usr/bin/env python3
"""tests/layout/check_include_rooms.py — every #include in memgrad/ points down the room order.

Each folder of memgrad/ is a room; a room may include only itself and the rooms below it,
so that every arrow of the library points down and any room can be read, built and tested
with only what lies beneath it. The check reads every .h, .cpp, .cu and .cuh file under
memgrad/ and fails, listing each fault as file:line, when
  * an include names a header of a room above the including file's room,
  * an include names a room that is not in the order (a new folder: give it its place below),
  * an include names a memgrad header that does not exist, or
  * an include reaches a memgrad header without the memgrad/ prefix ("core/tensor.h", or
    "tensor.h" beside the including file): the tree spells every include as installed code
    would, <memgrad/core/tensor.h> or "memgrad/core/tensor.h".
The umbrella header memgrad/memgrad.h (and any file directly in memgrad/) is above every
room and may include anything; no room may include it.

    python3 tests/layout/check_include_rooms.py [REPO_ROOT]   # exit 1 with every fault

Standard library only. tests/layout/test_check_include_rooms.py checks the check.
"""
import pathlib
import re
import sys

# The room order, bottom to top: the one place it is written down (README.md's "Layout"
# section describes each room). A room's index is its height.
ROOMS = [
    "core",      # Tensor and its parts, the caching allocator, CPU kernels: needs nothing
    "io",        # json, json_parse, safetensors: bytes in and out of files, over core's Tensor
    "cuda",      # the CUDA backend (runtime, kernels, cuBLAS/cuDNN, plan/): devices core can use
    "memory",    # recorder, snapshot, context, timeline, simulated target and scratch models:
                 # reads the allocator (core) and the CUDA scratch sizes (cuda/plan)
    "autocast",  # the thread's autocast state, the cast policy and the weight-cast cache:
                 # what autograd's ops read, so it sits just below them
    "autograd",  # the graph, the engine, the differentiable ops (which read autocast)
    "nn",        # modules and layers, built from autograd's ops
    "optim",     # optimizers and schedulers over nn's parameters
    "amp",       # the GradScaler, which wraps an optimizer's step
    "data",      # datasets and the DataLoader, used by the programs above the library
    "training",  # one-call checkpoints of a whole training state: over nn, optim and amp
    "distributed",  # process groups (MPI), the distributed sampler: over nn, optim and data
]
HEIGHT = {room: height for height, room in enumerate(ROOMS)}
TOP_LEVEL = "(top level)"  # files directly in memgrad/, such as the umbrella memgrad.h

SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')

HINT = ("hint: a room may include only itself and the rooms below it ("
        + " \u2192 ".join(ROOMS) + ", bottom to top; the order is written in "
        "tests/layout/check_include_rooms.py). Move what the lower room needs down into it, "
        "or let the upper room hand it in (a hook the upper room registers); spell every "
        "memgrad include from the repository root, \"memgrad/<room>/<file>\".")


def room_of(relative_to_memgrad):
    """The room of a path relative to memgrad/: its first folder, or TOP_LEVEL."""
    parts = relative_to_memgrad.parts
    return parts[0] if len(parts) > 1 else TOP_LEVEL


def faults_of_include(root, source, room, spelled):
    """The faults of one include (spelled as written) in `source`, a file of `room`."""
    memgrad_dir = root / "memgrad"
    if spelled.startswith("memgrad/"):
        target = pathlib.PurePosixPath(spelled)
        if not (root / target).is_file():
            return [f"includes {spelled}, which does not exist"]
        target_room = room_of(target.relative_to("memgrad"))
        if target_room == TOP_LEVEL:
            if room == TOP_LEVEL:
                return []
            return [f"{room} includes {spelled} (the top level, above every room)"]
        if target_room not in HEIGHT:
            return [f"{room} includes {spelled} (room {target_room}, which is not in the room order)"]
        # (a file of an unknown room is reported once, as such, by check())
        if room in HEIGHT and HEIGHT[target_room] > HEIGHT[room]:
            return [f"{room} includes {spelled} (room {target_room}, above it)"]
        return []
    # Spelled without the prefix: a fault only when it reaches a memgrad header, from the
    # memgrad/ folder or from the including file's own folder.
    for base in (memgrad_dir, source.parent):
        reached = (base / spelled).resolve()
        if reached.is_file() and memgrad_dir.resolve() in reached.parents:
            proper = "memgrad/" + reached.relative_to(memgrad_dir.resolve()).as_posix()
            return [f"includes {spelled} without the memgrad/ prefix; spell it \"{proper}\""]
    return []


def check(root):
    """Every fault under root/memgrad, as 'file:line: message' lines, and the files read."""
    memgrad_dir = root / "memgrad"
    sources = sorted(p for p in memgrad_dir.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    faults = []
    for source in sources:
        room = room_of(source.relative_to(memgrad_dir))
        where = source.relative_to(root).as_posix()
        if room != TOP_LEVEL and room not in HEIGHT:
            faults.append(f"{where}:1: room {room} is not in the room order")
        text = source.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            match = INCLUDE.match(line)
            if match:
                for fault in faults_of_include(root, source, room, match.group(2).strip()):
                    faults.append(f"{where}:{number}: {fault}")
    return faults, len(sources)


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1] if len(argv) == 2 else pathlib.Path(__file__).resolve().parents[2])
    if not (root / "memgrad").is_dir():
        print(f"check_include_rooms: {root / 'memgrad'} is not a folder; pass the repository root",
              file=sys.stderr)
        return 2
    faults, files = check(root)
    if faults:
        print("\n".join(faults))
        print(f"check_include_rooms: {len(faults)} faults in {files} files under {root / 'memgrad'}")
        print(HINT)
        return 1
    print(f"check_include_rooms: {files} files under {root / 'memgrad'}; every include points down "
          f"the room order ({' < '.join(ROOMS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
