#!/usr/bin/env python3
"""docs/guide/check_guide.py — keeps docs/guide.md and the programs under docs/guide/ in step.

Every C++ block of the page must be a region of a real program, so that the page cannot
show code that no longer compiles or no longer does what the text says. A region is the
lines between two marker comments in a .cpp or .h file of docs/guide/:

    // [guide: module]
    class Net : public mg::nn::Module { ... };
    // [guide: end]

The check fails, naming the block or the region, when
  * a ```cpp block of the page is not exactly some region (each line compared with its
    leading and trailing whitespace trimmed, so the page may indent differently),
  * a region appears nowhere in the page,
  * the markers are malformed (a region inside a region, an end without a start, a region
    never ended, two regions of one name, an empty region), or
  * a C++ block is fenced as c++, cxx, cc or C++ (which the check would not see).

    python3 docs/guide/check_guide.py                # check; exit 1 with every fault
    python3 docs/guide/check_guide.py --print NAME   # a region, dedented, to paste into the page

Standard library only.
"""
import argparse
import difflib
import pathlib
import re
import sys
import textwrap

GUIDE_DIR = pathlib.Path(__file__).resolve().parent
DEFAULT_PAGE = GUIDE_DIR.parent / "guide.md"
START = re.compile(r"^\s*// \[guide: ([A-Za-z0-9_.-]+)\]\s*$")
END = re.compile(r"^\s*// \[guide: end\]\s*$")
FENCE = re.compile(r"^\s*```\s*([^\s`]*)\s*$")
UNCHECKED_CPP_FENCES = {"c++", "cxx", "cc", "C++", "CPP"}


class Region:
    def __init__(self, name, path, line, lines):
        self.name, self.path, self.line, self.lines = name, path, line, lines

    def where(self):
        return f"{self.path.name}:{self.line}"


class Block:
    def __init__(self, line, lines):
        self.line, self.lines = line, lines

    def headline(self):
        first = next((line.strip() for line in self.lines if line.strip()), "")
        return first if len(first) <= 60 else first[:57] + "..."


def normalized(lines):
    """Lines with their whitespace trimmed, without blank lines at either end."""
    trimmed = [line.strip() for line in lines]
    while trimmed and not trimmed[0]:
        trimmed.pop(0)
    while trimmed and not trimmed[-1]:
        trimmed.pop()
    return trimmed


def read_regions(sources, faults):
    regions = {}
    for path in sources:
        open_name, open_line, body = None, 0, []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if END.match(line):
                if open_name is None:
                    faults.append(f"{path.name}:{number}: '// [guide: end]' without a region to end")
                    continue
                if not normalized(body):
                    faults.append(f"{path.name}:{open_line}: region '{open_name}' is empty")
                elif open_name in regions:
                    faults.append(f"{path.name}:{open_line}: region '{open_name}' is also marked at "
                                  f"{regions[open_name].where()}; names must be unique")
                else:
                    regions[open_name] = Region(open_name, path, open_line, body)
                open_name, body = None, []
            elif START.match(line):
                if open_name is not None:
                    faults.append(f"{path.name}:{number}: region '{START.match(line).group(1)}' starts inside "
                                  f"region '{open_name}' (from line {open_line}); end that one first")
                open_name, open_line, body = START.match(line).group(1), number, []
            elif open_name is not None:
                body.append(line)
        if open_name is not None:
            faults.append(f"{path.name}:{open_line}: region '{open_name}' is never ended with '// [guide: end]'")
    return regions


def read_blocks(page, faults):
    blocks, language, start, body = [], None, 0, []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        fence = FENCE.match(line)
        if language is None:
            if fence:
                language, start, body = fence.group(1), number, []
                if language in UNCHECKED_CPP_FENCES:
                    faults.append(f"{page.name}:{number}: a block fenced as '{language}'; fence C++ as 'cpp' so "
                                  f"that it is checked")
        elif fence and not fence.group(1):
            if language == "cpp":
                blocks.append(Block(start, body))
            language = None
        else:
            body.append(line)
    if language is not None:
        faults.append(f"{page.name}:{start}: a ``` block is never closed")
    return blocks


def closest_region_report(block, regions):
    """Names the region the block most resembles and the first lines where they differ."""
    if not regions:
        return "there are no marked regions at all"
    text = normalized(block.lines)
    best = max(regions.values(),
               key=lambda region: difflib.SequenceMatcher(None, text, normalized(region.lines)).ratio())
    diff = list(difflib.unified_diff(normalized(best.lines), text, f"region '{best.name}' ({best.where()})",
                                     "the page's block", lineterm="", n=1))
    shown = diff[:14] + (["    ..."] if len(diff) > 14 else [])
    return "closest is region '{}' ({}):\n{}".format(best.name, best.where(),
                                                    "\n".join("    " + line for line in shown))


def check(page, sources_dir, sources):
    faults = []
    regions = read_regions(sources, faults)
    blocks = read_blocks(page, faults)
    shown = set()
    for block in blocks:
        text = normalized(block.lines)
        matches = [name for name, region in regions.items() if normalized(region.lines) == text]
        if matches:
            shown.update(matches)
        else:
            faults.append(f"{page.name}:{block.line}: the cpp block starting \"{block.headline()}\" is not a marked "
                          f"region of {sources_dir}/; {closest_region_report(block, regions)}")
    for name, region in regions.items():
        if name not in shown:
            faults.append(f"{region.where()}: region '{name}' is not shown in {page.name} (paste the output of "
                          f"`check_guide.py --print {name}` into a ```cpp block, or remove the markers)")
    return faults, len(blocks), len(regions)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--page", type=pathlib.Path, default=DEFAULT_PAGE, help="the page (docs/guide.md)")
    parser.add_argument("--sources", type=pathlib.Path, default=GUIDE_DIR,
                        help="the folder of the programs (docs/guide/)")
    parser.add_argument("--print", metavar="NAME", help="print region NAME, dedented, and exit")
    args = parser.parse_args()

    sources = sorted(list(args.sources.glob("*.cpp")) + list(args.sources.glob("*.h")))
    if args.print:
        regions = read_regions(sources, [])
        if args.print not in regions:
            sys.exit(f"no region '{args.print}'; the regions are: {', '.join(sorted(regions))}")
        print(textwrap.dedent("\n".join(regions[args.print].lines)).strip("\n"))
        return
    if not args.page.is_file():
        sys.exit(f"check_guide: the page {args.page} does not exist")
    faults, blocks, regions = check(args.page, args.sources, sources)
    if faults:
        print(f"check_guide: {args.page} and {args.sources}/ disagree ({len(faults)} faults):", file=sys.stderr)
        for fault in faults:
            print("  " + fault, file=sys.stderr)
        sys.exit(1)
    print(f"check_guide: the {blocks} cpp blocks of {args.page.name} are the {regions} marked regions of "
          f"{len(sources)} files in {args.sources}/")


if __name__ == "__main__":
    main()
