#!/usr/bin/env python3
"""tests/layout/test_check_include_rooms.py — the include check catches what it claims to.

Each test writes a tiny fake memgrad/ tree into a temporary folder and runs the check on
it: an upward include, a missing header, a header reached without the memgrad/ prefix, a
room outside the order and a room including the umbrella must each be reported (with
file:line), and a tree whose includes all point down must pass.

    python3 tests/layout/test_check_include_rooms.py

Standard library only.
"""
import contextlib
import io
import pathlib
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # ctest runs this from the source tree; leave no __pycache__ there
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_include_rooms  # noqa: E402  (found through the path set just above)


class FakeTree:
    """A repository root in a temporary folder, holding the files given (path -> text)."""

    def __init__(self, files):
        self.folder = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.folder.name)
        for path, text in files.items():
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text(text, encoding="utf-8")

    def faults(self):
        return check_include_rooms.check(self.root)[0]

    def exit_code(self):
        with contextlib.redirect_stdout(io.StringIO()):
            return check_include_rooms.main(["check_include_rooms.py", str(self.root)])

    def close(self):
        self.folder.cleanup()


# Headers every fake tree holds: one per room used, and the umbrella above them all.
BASE = {
    "memgrad/core/tensor.h": "#pragma once\n#include <vector>\n#include <memory>\n",
    "memgrad/autocast/autocast.h": '#pragma once\n#include "memgrad/core/tensor.h"\n',
    "memgrad/autograd/ops.h": '#pragma once\n#include <memgrad/autocast/autocast.h>\n#include "memgrad/autograd/ops.h"\n',
    "memgrad/amp/grad_scaler.h": '#pragma once\n#include "memgrad/autograd/ops.h"\n',
    "memgrad/memgrad.h": '#pragma once\n#include "memgrad/amp/grad_scaler.h"\n#include "memgrad/core/tensor.h"\n',
}


class CheckIncludeRoomsTest(unittest.TestCase):
    def run_check(self, extra_files):
        tree = FakeTree({**BASE, **extra_files})
        self.addCleanup(tree.close)
        return tree.faults(), tree.exit_code()

    def test_a_tree_whose_includes_point_down_passes(self):
        faults, exit_code = self.run_check({})
        self.assertEqual(faults, [])
        self.assertEqual(exit_code, 0)

    def test_an_upward_include_is_reported_with_file_line_and_rooms(self):
        faults, exit_code = self.run_check({
            "memgrad/autocast/autocast.cpp": ('// the state\n#include "memgrad/autocast/autocast.h"\n'
                                              '#include "memgrad/amp/grad_scaler.h"\n'),
        })
        self.assertEqual(faults, ["memgrad/autocast/autocast.cpp:3: autocast includes "
                                  "memgrad/amp/grad_scaler.h (room amp, above it)"])
        self.assertEqual(exit_code, 1)

    def test_angle_bracket_and_cuda_spellings_are_read_too(self):
        faults, _ = self.run_check({"memgrad/core/kernel.cu": "#include <memgrad/autograd/ops.h>\n",
                                    "memgrad/core/kernel.cuh": "  #  include \"memgrad/autocast/autocast.h\"\n"})
        self.assertEqual(faults, [
            "memgrad/core/kernel.cu:1: core includes memgrad/autograd/ops.h (room autograd, above it)",
            "memgrad/core/kernel.cuh:1: core includes memgrad/autocast/autocast.h (room autocast, above it)",
        ])

    def test_a_missing_header_is_reported(self):
        faults, exit_code = self.run_check({"memgrad/autograd/ops.cpp": '#include "memgrad/autograd/gone.h"\n'})
        self.assertEqual(faults, ["memgrad/autograd/ops.cpp:1: includes memgrad/autograd/gone.h, which does not exist"])
        self.assertEqual(exit_code, 1)

    def test_a_memgrad_header_reached_without_the_prefix_is_reported(self):
        faults, _ = self.run_check({"memgrad/autograd/ops.cpp": '#include "core/tensor.h"\n#include "ops.h"\n'})
        self.assertEqual(faults, [
            'memgrad/autograd/ops.cpp:1: includes core/tensor.h without the memgrad/ prefix; '
            'spell it "memgrad/core/tensor.h"',
            'memgrad/autograd/ops.cpp:2: includes ops.h without the memgrad/ prefix; '
            'spell it "memgrad/autograd/ops.h"',
        ])

    def test_a_room_outside_the_order_and_a_room_including_the_umbrella_are_reported(self):
        faults, _ = self.run_check({
            "memgrad/attic/old.h": '#include "memgrad/core/tensor.h"\n',
            "memgrad/core/tensor.cpp": '#include "memgrad/attic/old.h"\n#include "memgrad/memgrad.h"\n',
        })
        self.assertEqual(faults, [
            "memgrad/attic/old.h:1: room attic is not in the room order",
            "memgrad/core/tensor.cpp:1: core includes memgrad/attic/old.h (room attic, which is not in the room order)",
            "memgrad/core/tensor.cpp:2: core includes memgrad/memgrad.h (the top level, above every room)",
        ])


if __name__ == "__main__":
    unittest.main()
