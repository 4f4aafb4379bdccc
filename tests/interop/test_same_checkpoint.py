#!/usr/bin/env python3
"""tests/interop/test_same_checkpoint.py — interop/same_checkpoint.py says what it claims to.

Two checkpoints written with safetensors_file.write_raw: the same tensors with another
run.seconds are the same (exit 0, as two runs of the same computation); a tensor whose
bytes differ, or that only one file holds, is named (with the first differing byte) and
the exit status is 1; --ignore replaces the wall-clock default; a file that is not
safetensors exits 2.

    python3 tests/interop/test_same_checkpoint.py

Standard library only.
"""
import contextlib
import io
import pathlib
import struct
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # ctest runs this from the source tree; leave no __pycache__ there
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "interop"))
import same_checkpoint  # noqa: E402  (found through the path set just above)
from safetensors_file import write_raw  # noqa: E402


def f32(*values):
    return ("F32", [len(values)], struct.pack(f"<{len(values)}f", *values))


def f64(value):
    return ("F64", [], struct.pack("<d", value))


def run_tensors(seconds, weight=(1.0, 2.0, 3.0)):
    return {"model.weight": f32(*weight), "run.step": ("I64", [], struct.pack("<q", 300)),
            "run.seconds": f64(seconds), "run.seconds_to_best": f64(seconds / 2)}


class SameCheckpoint(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)

    def write(self, name, tensors):
        path = str(pathlib.Path(self.folder.name) / name)
        write_raw(path, tensors, {"format": "pt"})
        return path

    def compare(self, *arguments):
        """(exit status, printed text) of same_checkpoint's main with these arguments."""
        out = io.StringIO()
        saved_argv = sys.argv
        sys.argv = ["same_checkpoint.py", *arguments]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                status = same_checkpoint.main()
        finally:
            sys.argv = saved_argv
        return status, out.getvalue()

    def test_only_the_wall_clock_differs(self):
        a, b = self.write("a.safetensors", run_tensors(14.4)), self.write("b.safetensors", run_tensors(14.9))
        status, text = self.compare(a, b)
        self.assertEqual(status, 0, text)
        self.assertIn("same:", text)

    def test_a_weight_that_differs_is_named_with_its_first_byte(self):
        a = self.write("a.safetensors", run_tensors(1.0))
        b = self.write("b.safetensors", run_tensors(1.0, weight=(1.0, 2.5, 3.0)))
        status, text = self.compare(a, b)
        self.assertEqual(status, 1, text)
        self.assertIn("model.weight: F32 [3], bytes differ from byte", text)
        self.assertIn("DIFFERENT", text)
        first = int(text.split("from byte ")[1].split()[0])
        self.assertTrue(4 <= first < 8, text)  # in the second float

    def test_a_tensor_only_one_file_holds(self):
        tensors = run_tensors(1.0)
        a = self.write("a.safetensors", tensors)
        b = self.write("b.safetensors", {**tensors, "optimizer.extra": f32(0.0)})
        status, text = self.compare(a, b)
        self.assertEqual(status, 1, text)
        self.assertIn("optimizer.extra: only in " + b, text)

    def test_ignore_replaces_the_default(self):
        a, b = self.write("a.safetensors", run_tensors(14.4)), self.write("b.safetensors", run_tensors(14.9))
        status, text = self.compare(a, b, "--ignore", "run.seconds")
        self.assertEqual(status, 1, text)
        self.assertIn("run.seconds_to_best", text)

    def test_not_safetensors(self):
        a = self.write("a.safetensors", run_tensors(1.0))
        broken = pathlib.Path(self.folder.name) / "broken.safetensors"
        broken.write_bytes(b"\x01\x02")
        status, text = self.compare(a, str(broken))
        self.assertEqual(status, 2, text)
        self.assertIn("same_checkpoint:", text)


if __name__ == "__main__":
    unittest.main()
