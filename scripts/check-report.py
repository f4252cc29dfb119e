#!/usr/bin/env python3
"""Renders report.html files in headless Chromium and fails on an error or a blank chart.

Usage: check-report.py REPORT.html [REPORT.html ...]

For each report:
- the page loads with no console error (no script runs, so any CONSOLE line is a failure: a blocked
  resource, a parse error) and the DOM Chromium builds holds the expected sections;
- every inline <svg> chart (there are three) is rendered on its own and must show data: enough pixels
  in visible colour (series are coloured; axes, grid and text are grey or black);
- the whole page's screenshot must not be blank.
Needs `chromium` (Debian's package) and Pillow.
"""

import os
import re
import subprocess
import sys
import tempfile

from PIL import Image

SECTIONS = [
    "Held-out results",
    "Comparisons",
    "Selection on calibration",
    "Per query: hybrid against fts_only",
    "Latency",
    "What this supports, and what it does not",
]
MIN_COLOURED_PIXELS = 150


def chromium(*args, url):
    command = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def console_errors(stderr):
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Refused to" in line]


def coloured_pixels(path):
    """Pixels of visible colour (HSV saturation above 40 of 255; translucent series fills are pale): white, grey,
    black and anti-aliased text have none."""
    image = Image.open(path).convert("RGB")
    saturation = image.convert("HSV").getchannel("S").histogram()
    return sum(saturation[41:]), image.size


def check(report):
    failures = []
    html = open(report, encoding="utf-8").read()
    if re.search(r"<script|\bhttps?://[^\s\"'<>]+\.(js|css|png|svg)|<link|<img|<iframe", html, re.I):
        failures.append("the report loads or embeds something it should not (script, link, remote resource)")
    url = "file://" + os.path.abspath(report)
    dom = chromium("--dump-dom", url=url)
    if dom.returncode != 0:
        failures.append(f"chromium --dump-dom exited {dom.returncode}: {dom.stderr[-500:]}")
    failures += [f"console: {line}" for line in console_errors(dom.stderr)]
    for section in SECTIONS:
        if section not in dom.stdout:
            failures.append(f"section {section!r} missing from the rendered DOM")
    charts = re.findall(r"<svg\b.*?</svg>", html, re.S)
    if len(charts) != 3:
        failures.append(f"{len(charts)} charts, expected 3")
    with tempfile.TemporaryDirectory() as tmp:
        for index, svg in enumerate(charts):
            size = re.search(r'width="(\d+)"\s+height="(\d+)"', svg)
            width, height = (int(size.group(1)), int(size.group(2))) if size else (900, 600)
            page = os.path.join(tmp, f"chart-{index}.html")
            with open(page, "w", encoding="utf-8") as out:
                out.write(f"<!DOCTYPE html><html><body style='margin:0'>{svg}</body></html>")
            shot = os.path.join(tmp, f"chart-{index}.png")
            run = chromium(f"--screenshot={shot}", f"--window-size={width},{height}", url="file://" + page)
            if run.returncode != 0 or not os.path.exists(shot):
                failures.append(f"chart {index}: chromium could not render it: {run.stderr[-500:]}")
                continue
            coloured, _ = coloured_pixels(shot)
            if coloured < MIN_COLOURED_PIXELS:
                failures.append(f"chart {index} is blank: {coloured} coloured pixels (at least {MIN_COLOURED_PIXELS})")
            else:
                print(f"{report}: chart {index} rendered, {coloured} coloured pixels")
        shot = os.path.join(tmp, "page.png")
        run = chromium(f"--screenshot={shot}", "--window-size=1100,5000", url=url)
        if run.returncode != 0 or not os.path.exists(shot):
            failures.append(f"the page could not be rendered: {run.stderr[-500:]}")
        else:
            dark = sum(Image.open(shot).convert("L").histogram()[:128])
            if dark < 10_000:
                failures.append(f"the page is blank ({dark} dark pixels)")
    return failures


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    failed = False
    for report in sys.argv[1:]:
        failures = check(report)
        for failure in failures:
            print(f"{report}: {failure}", file=sys.stderr)
        if failures:
            failed = True
        else:
            print(f"{report}: renders in Chromium with every section and three non-blank charts")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
