#!/usr/bin/env python3
"""interop/safetensors_file.py — the safetensors format in plain Python, for two uses:

  * a strict check of a file's layout that needs nothing but the standard library, so a
    machine without numpy or torch can tell whether memgrad wrote a well-formed file:
        python3 interop/safetensors_file.py FILE... [--show KEY]...
  * load_file / save_file with the signatures of safetensors.torch, for a machine whose
    PyTorch came without the `safetensors` package (check_torch_interop.py uses them then,
    and says so). Only these two need torch, and import it when called.

The format: an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
bytes back to back, little-endian and row-major:
  {"__metadata__": {"format": "pt"},
   "fc.weight": {"dtype": "F32", "shape": [10, 512], "data_offsets": [0, 20480]}, ...}
The check insists on what the reference implementation guarantees: every range the size
of its dtype and shape, the ranges tiling the data exactly (no gaps, no overlaps, nothing
after), and string metadata. It also reports (without failing) the two habits of the
reference writer that memgrad keeps: keys in sorted order and a header padded with spaces
so that the data starts 8-byte aligned.
"""
import argparse
import json
import math
import struct
import sys

# Bytes per element of each safetensors dtype.
ITEM_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
              "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
# struct's letter for each dtype --show can print.
STRUCT_CODES = {"BOOL": "?", "U8": "B", "I8": "b", "I16": "h", "U16": "H", "I32": "i", "U32": "I",
                "I64": "q", "U64": "Q", "F16": "e", "F32": "f", "F64": "d"}


class FormatError(ValueError):
    """The file is not well-formed safetensors; the message names the file and the fault."""


def _reject_duplicates(pairs):
    keys = [key for key, _ in pairs]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise FormatError(f"the header names {duplicates} more than once")
    return dict(pairs)


def read_header(path):
    """The parsed header of `path`, checked against the file's size: a dict with
    "tensors" ({name: {"dtype", "shape", "data_offsets"}}, in the header's order),
    "metadata" ({str: str}), "data_start" (byte offset of the data) and "notes" (deviations
    from the reference writer's habits, which are allowed). Raises FormatError."""
    try:
        with open(path, "rb") as file:
            prefix = file.read(8)
            if len(prefix) < 8:
                raise FormatError(f"{path}: {len(prefix)} bytes, too short for the 8-byte header length")
            (header_length,) = struct.unpack("<Q", prefix)
            file.seek(0, 2)
            file_size = file.tell()
            if header_length > file_size - 8:
                raise FormatError(f"{path}: header length {header_length} runs past the end of the "
                                  f"file ({file_size} bytes)")
            file.seek(8)
            header_bytes = file.read(header_length)
    except OSError as error:
        raise FormatError(f"{path}: cannot read: {error}") from error
    try:
        header = json.loads(header_bytes.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except FormatError as error:
        raise FormatError(f"{path}: {error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FormatError(f"{path}: the header is not UTF-8 JSON: {error}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: the header is JSON but not an object")

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise FormatError(f"{path}: __metadata__ must map strings to strings, got {metadata!r}")
    data_size = file_size - 8 - header_length
    ranges = []
    for name, entry in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise FormatError(f"{where}: expected exactly dtype, shape and data_offsets, got {entry!r}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in ITEM_SIZES:
            raise FormatError(f"{where}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise FormatError(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
            raise FormatError(f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, "
                              f"got {offsets!r}")
        expected = math.prod(shape) * ITEM_SIZES[dtype]
        if offsets[1] - offsets[0] != expected:
            raise FormatError(f"{where}: {dtype} {shape} needs {expected} bytes, but data_offsets "
                              f"{offsets} hold {offsets[1] - offsets[0]}")
        ranges.append((offsets[0], offsets[1], name))
    position = 0
    for begin, end, name in sorted(ranges):
        if begin != position:
            raise FormatError(f"{path}: tensor {name!r} starts at byte {begin} of the data, expected "
                              f"{position} (the ranges must tile the data without gaps or overlaps)")
        position = end
    if position != data_size:
        raise FormatError(f"{path}: the tensors cover {position} bytes of data, but the file holds "
                          f"{data_size} after the header")

    notes = []
    if list(header) != sorted(header):
        notes.append("keys not in sorted order")
    if (8 + header_length) % 8 != 0:
        notes.append(f"data starts at byte {8 + header_length}, not 8-byte aligned")
    return {"tensors": header, "metadata": metadata, "data_start": 8 + header_length, "notes": notes}


def read_raw(path):
    """({name: (dtype, shape, bytes)}, metadata) of a checked file."""
    header = read_header(path)
    tensors = {}
    with open(path, "rb") as file:
        for name, entry in header["tensors"].items():
            begin, end = entry["data_offsets"]
            file.seek(header["data_start"] + begin)
            tensors[name] = (entry["dtype"], list(entry["shape"]), file.read(end - begin))
    return tensors, header["metadata"]


def write_raw(path, tensors, metadata=None):
    """Writes {name: (dtype, shape, bytes)} as the reference writer does: keys sorted, data
    in key order, header padded with spaces to a multiple of 8 bytes."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        if len(data) != math.prod(shape) * ITEM_SIZES[dtype]:
            raise ValueError(f"{name}: {dtype} {list(shape)} needs {math.prod(shape) * ITEM_SIZES[dtype]} "
                             f"bytes, got {len(data)}")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(header_bytes)))
        file.write(header_bytes)
        for name in sorted(tensors):
            file.write(tensors[name][2])


# ---- torch tensors (safetensors.torch's load_file / save_file) ----

def _torch_dtypes():
    import torch
    return {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
            "I32": torch.int32, "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16,
            "F32": torch.float32, "F64": torch.float64}


def load_file(path, device="cpu"):
    """{name: torch.Tensor} of a safetensors file, as safetensors.torch.load_file."""
    import torch
    dtypes = _torch_dtypes()
    tensors, _ = read_raw(path)
    result = {}
    for name, (dtype, shape, data) in tensors.items():
        if dtype not in dtypes:
            raise FormatError(f"{path}: tensor {name!r} has dtype {dtype}, which this reader cannot "
                              f"turn into a torch tensor")
        if sys.byteorder != "little":
            raise FormatError("this reader assumes a little-endian machine")
        # NOTE: bytearray, because torch.frombuffer warns on (and may not write to) read-only bytes.
        flat = torch.frombuffer(bytearray(data), dtype=dtypes[dtype]) if data else torch.empty(
            0, dtype=dtypes[dtype])
        result[name] = flat.reshape(shape).to(device)
    return result


def save_file(tensors, path, metadata=None):
    """Writes {name: torch.Tensor} (any device, any strides), as safetensors.torch.save_file."""
    import torch
    names_of = {dtype: name for name, dtype in _torch_dtypes().items()}
    raw = {}
    for name, tensor in tensors.items():
        if tensor.dtype not in names_of:
            raise ValueError(f"{name}: dtype {tensor.dtype} has no safetensors name here")
        host = tensor.detach().to("cpu").contiguous().reshape(-1)
        data = bytearray(host.numel() * host.element_size())
        if data:
            # NOTE: copied through a uint8 view into a tensor over `data`, which needs no
            # numpy (an optional dependency of torch) and works for bfloat16 as well.
            torch.frombuffer(data, dtype=torch.uint8).copy_(host.view(torch.uint8))
        raw[name] = (names_of[tensor.dtype], list(tensor.shape), bytes(data))
    write_raw(path, raw, metadata)


# ---- command line: check files ----

def describe(path, show):
    header = read_header(path)
    tensors = header["tensors"]
    dtypes = {}
    for entry in tensors.values():
        dtypes[entry["dtype"]] = dtypes.get(entry["dtype"], 0) + 1
    elements = sum(math.prod(entry["shape"]) for entry in tensors.values())
    print(f"{path}: well-formed; {len(tensors)} tensors, {elements} elements, dtypes "
          f"{dict(sorted(dtypes.items()))}, metadata {header['metadata']}"
          + (f"; note: {', '.join(header['notes'])}" if header["notes"] else ""))
    if not show:
        return
    raw, _ = read_raw(path)
    for key in show:
        if key not in raw:
            raise FormatError(f"{path}: no tensor named {key!r}")
        dtype, shape, data = raw[key]
        if dtype not in STRUCT_CODES:
            print(f"  {key}: {dtype} {shape} ({len(data)} bytes; cannot print {dtype})")
            continue
        values = struct.unpack(f"<{len(data) // ITEM_SIZES[dtype]}{STRUCT_CODES[dtype]}", data)
        shown = ", ".join(repr(v) for v in values[:8]) + (", ..." if len(values) > 8 else "")
        print(f"  {key}: {dtype} {shape} [{shown}]")


def main(argv):
    parser = argparse.ArgumentParser(description="Check that safetensors files are well-formed.")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--show", action="append", default=[], metavar="KEY",
                        help="also print the first values of this tensor (repeatable)")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.files:
        try:
            describe(path, args.show)
        except FormatError as error:
            print(f"error: {error}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
