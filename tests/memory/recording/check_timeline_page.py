#!/usr/bin/env python3
"""tests/memory/recording/check_timeline_page.py — the timeline page in a real browser.

    python3 check_timeline_page.py DIR [--screenshot FILE.png] [--open-only]

DIR holds what write_memory_recording wrote (timeline.html, recording.json,
snapshot.pickle). Headless Chromium opens the page and, driven through the DevTools
protocol, this checks that
  * it draws: the chart holds one series (an SVG path with points) for every category the
    recording holds, and the segment view one bar per segment alive at the end;
  * zoom: three wheel notches over the chart narrow the view 1.5**3 times around the
    cursor, and the events drawn are exactly the recording's events in the new range (the
    detail of the range, not a thinned whole);
  * a legend toggle: clicking ACTIVATION's legend entry removes its series, clicking again
    brings it back;
  * hover: with the mouse at the peak, the tooltip names the event the recording has
    there (time, step, phase, kind, bytes, category, op, module, allocated, reserved),
    and the table of the largest live allocations starts with the largest block alive
    then and counts the blocks and bytes alive;
and saves a screenshot (docs/memory_timeline.png comes from it). --open-only only opens
the page and prints how long it took (for measuring a large recording).

The driver is ours, standard library only: Chromium's --remote-debugging-pipe reads
protocol commands (JSON, each ended by a NUL byte) on its file descriptor 3 and writes
replies and events on 4. Exits 77 (ctest's skip) with a message where no Chromium is found
(set MG_CHROMIUM to its path, or install Debian's chromium).
"""
import base64
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
WIDTH, HEIGHT = 1280, 860
faults = []


def check(condition, message):
    if not condition:
        faults.append(message)
    return condition


def find_chromium():
    for candidate in (os.environ.get("MG_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      shutil.which("google-chrome"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class Browser:
    """Chromium over --remote-debugging-pipe, one page attached (flat session)."""

    def __init__(self, executable):
        self.profile = tempfile.mkdtemp(prefix="mg-chromium-")
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def descriptors_3_and_4():
            # NOTE: through fresh copies: a pipe end may itself be 3 or 4, and dup2 onto the
            # same number would keep its close-on-exec flag.
            read_copy, write_copy = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(read_copy, 3)
            os.dup2(write_copy, 4)

        # NOTE: --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        self.process = subprocess.Popen(
            [executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
             "--user-data-dir=" + self.profile, f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
            preexec_fn=descriptors_3_and_4, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.next_id = 0
        self.buffer = b""
        self.events = []
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe (did it crash?)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for k, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(k)
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def mouse(self, kind, x, y, **extra):
        self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **extra})

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # already gone: nothing to close
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def bytes_text(n):
    """memgrad's format_bytes, as the page writes it."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    value, unit = abs(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    sign = "-" if n < 0 else ""
    return f"{sign}{int(value)} B" if unit == 0 else f"{sign}{value:.2f} {units[unit]}"


def open_page(browser, page):
    started = time.monotonic()
    browser.call("Page.navigate", {"url": page.resolve().as_uri()})
    browser.wait_for_event("Page.loadEventFired", timeout=60)
    # The script runs before the load event; the first frame is painted after it.
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return time.monotonic() - started


def chart_box(browser):
    return browser.evaluate("(() => { const r = document.querySelector('#chart svg').getBoundingClientRect();"
                            " return [r.left, r.top, r.width, r.height]; })()")


def x_of_time(browser, t):
    """The page's x for time t (ns) in its current view."""
    return browser.evaluate(f"""(() => {{ const v = memgradTimeline.view(), r = document.querySelector('#chart svg')
        .getBoundingClientRect(); return r.left + 84 + ({t} - v.t0) / (v.t1 - v.t0) * (r.width - 84 - 16); }})()""")


def live_blocks_at(recording, snapshot, index):
    """Requested sizes of the blocks alive after event `index`, largest first: the
    recording's allocations, and the blocks from before it (freed without an allocation,
    or alive in the snapshot's segments without one)."""
    intervals, open_blocks = [], {}  # [from, to (None: still alive), bytes]
    for k, event in enumerate(recording["events"]):
        if event["kind"] == "allocate":
            open_blocks[event["address"]] = [k, None, event["bytes"]]
            intervals.append(open_blocks[event["address"]])
        elif event["kind"] == "free":
            if event["address"] in open_blocks:
                open_blocks.pop(event["address"])[1] = k
            else:
                intervals.append([-1, k, -event["bytes"]])
    for segment in snapshot["segments"]:
        for block in segment["blocks"]:
            if block["state"] == "active_allocated" and block["address"] not in open_blocks:
                intervals.append([-1, None, block["requested_size"]])
    return sorted((size for start, end, size in intervals if start <= index and (end is None or index < end)),
                  reverse=True)


def check_page(browser, folder):
    recording = json.loads((folder / "recording.json").read_text())
    with open(folder / "snapshot.pickle", "rb") as file:
        snapshot = pickle.load(file)
    events = recording["events"]
    view = browser.evaluate("memgradTimeline.view()")

    # It draws a series for every category the recording holds.
    levels = dict(recording["devices"][0]["baseline_category_bytes"])
    present = {c for c, b in levels.items() if b}
    for event in events:
        if event["kind"] in ("allocate", "free", "retag"):
            levels[event["category"]] += event["bytes"]
            if event["kind"] == "retag":
                levels[event["previous_category"]] -= event["bytes"]
            present |= {c for c, b in levels.items() if b}
    check(set(view["drawn"]) == present, f"series drawn {sorted(view['drawn'])} != categories held {sorted(present)}")
    for category in present:
        points = browser.evaluate(f"""(() => {{ const p = document.querySelector('path.series[data-category="{category}"]');
            return p ? p.getAttribute('d').split(/[MHV]/).length : 0; }})()""")
        check(points > 10, f"the {category} series has {points} path commands")
    bars = browser.evaluate("document.querySelectorAll('#segments-view rect.segment').length")
    check(bars == len(snapshot["segments"]), f"segment view: {bars} bars, {len(snapshot['segments'])} segments")

    # Zoom: three notches around the middle of the chart.
    left, top, width, height = chart_box(browser)
    before = browser.evaluate("memgradTimeline.view()")
    x, y = left + 84 + (width - 100) * 0.5, top + height * 0.5
    for _ in range(3):
        browser.mouse("mouseWheel", x, y, deltaX=0, deltaY=-100)
    after = browser.evaluate("memgradTimeline.view()")
    ratio = (before["t1"] - before["t0"]) / (after["t1"] - after["t0"])
    check(abs(ratio - 1.5 ** 3) < 0.01, f"three wheel notches zoomed {ratio:.3f}x, expected 3.375x")
    in_range = [k for k, e in enumerate(events) if after["t0"] <= e["time_ns"] <= after["t1"]]
    drawn_text = browser.evaluate("document.getElementById('range').textContent")
    drawn = int(drawn_text.split("(")[1].split(" ")[0])
    expected = len(in_range) + (1 if in_range and in_range[0] > 0 else 0)  # and the level at the left edge
    plot_width = width - 84 - 16
    if expected <= 4 * plot_width:
        check(drawn == expected, f"zoomed view draws {drawn} events, the recording has {expected} in its range")
    else:  # thinned to each pixel column's peak and last event
        check(plot_width / 2 <= drawn <= 2 * plot_width + 2,
              f"zoomed view draws {drawn} of {expected} events on {plot_width:.0f} pixel columns")
    browser.click(*button_centre(browser, "document.getElementById('reset')"))

    # A legend toggle.
    if check("ACTIVATION" in present, "the recording holds no ACTIVATION to toggle"):
        entry = button_centre(browser, "[...document.querySelectorAll('#legend button')]"
                                       ".find(b => b.textContent.startsWith('ACTIVATION '))")
        browser.click(*entry)
        hidden = browser.evaluate("memgradTimeline.view()")
        check("ACTIVATION" in hidden["hidden"] and "ACTIVATION" not in hidden["drawn"],
              "clicking ACTIVATION's legend entry did not hide its series")
        check(browser.evaluate("!document.querySelector('path.series[data-category=\"ACTIVATION\"]')"),
              "ACTIVATION's path is still drawn after its toggle")
        browser.click(*entry)
        check("ACTIVATION" in browser.evaluate("memgradTimeline.view()")["drawn"], "a second click did not bring it back")

    # Hover over the peak. Mouse positions are whole pixels, so the page shows the last
    # event at or before the time of the pixel just right of the peak's.
    peak = browser.evaluate("memgradTimeline.peak()")
    left, top, width, height = chart_box(browser)
    x = int(x_of_time(browser, events[peak["event"]]["time_ns"])) + 1
    view = browser.evaluate("memgradTimeline.view()")
    time_at_x = view["t0"] + (x - left - 84) / (width - 84 - 16) * (view["t1"] - view["t0"])
    expected = max(k for k, e in enumerate(events) if e["time_ns"] <= time_at_x)
    browser.mouse("mouseMoved", x, top + height * 0.4)
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    tip = browser.evaluate("document.getElementById('tip').textContent")
    hovered = browser.evaluate("memgradTimeline.view().hover")
    check(hovered == expected, f"hovering x={x} shows event {hovered}, the recording's last event by then is {expected}")
    check(expected >= peak["event"], "the hovered pixel is left of the peak")
    event = events[hovered]
    lines = tip.split("\n")
    expected_lines = [
        f"{event['time_ns'] / 1e6:.3f} ms  event {hovered}  step {event['step']}  {event['phase']}",
        f"{event['kind']} {bytes_text(event['bytes'])}  "
        + (f"{event['previous_category']} -> " if event["kind"] == "retag" else "") + event["category"],
        f"op: {event['op'] or '-'}",
        f"module: {event['module'] or '-'}",
    ]
    check(lines[:4] == expected_lines, f"tooltip {lines[:4]} != the recording's event {expected_lines}")
    check(f"allocated {bytes_text(event['allocated_bytes'])}, reserved {bytes_text(event['reserved_bytes'])}" in tip,
          "the tooltip's allocated and reserved differ from the recording's")
    largest = live_blocks_at(recording, snapshot, hovered)
    first_row = browser.evaluate("(() => { const c = document.querySelector('#largest-table tr:nth-child(2) td');"
                                 " return c ? c.textContent : ''; })()")
    check(largest and first_row == bytes_text(largest[0]),
          f"largest live allocation shown {first_row!r}, the recording's is {bytes_text(largest[0]) if largest else None}")
    total_live = browser.evaluate("document.getElementById('largest-title').textContent")
    check(f"{len(largest)} live, {bytes_text(sum(largest))}" in total_live,
          f"{total_live!r} != {len(largest)} live, {bytes_text(sum(largest))}")
    return {"events": len(events), "categories": sorted(present), "segments": bars, "tooltip": lines[:4]}


def button_centre(browser, element):
    """The centre of the element the JavaScript expression `element` finds."""
    box = browser.evaluate(f"""(() => {{ const r = ({element}).getBoundingClientRect();
        return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
    return box[0], box[1]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        return 2
    folder = pathlib.Path(args[0])
    screenshot = pathlib.Path(args[args.index("--screenshot") + 1]) if "--screenshot" in args else None
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no Chromium found (looked for $MG_CHROMIUM, chromium, chromium-browser, google-chrome); "
              "install Debian's chromium to run the browser test")
        return SKIP
    started = time.monotonic()
    browser = Browser(chromium)
    try:
        opened = open_page(browser, folder / "timeline.html")
        print(f"check_timeline_page: {folder / 'timeline.html'} "
              f"({(folder / 'timeline.html').stat().st_size} bytes) opened and drawn in {opened:.2f} s")
        if "--open-only" in args:
            return 0
        figures = check_page(browser, folder)
        if screenshot:
            shot = browser.call("Page.captureScreenshot", {"format": "png"})
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            print(f"check_timeline_page: screenshot {screenshot}")
    finally:
        browser.close()
    print("check_timeline_page:", json.dumps(figures), f"in {time.monotonic() - started:.1f} s")
    if faults:
        print(f"check_timeline_page: {len(faults)} faults:")
        for fault in faults:
            print("  " + fault)
        return 1
    print("check_timeline_page: the page draws, zooms, toggles and hovers as the recording says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
