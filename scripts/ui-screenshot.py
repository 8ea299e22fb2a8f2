"""Regenerate docs/ui-thread.png: run the demo's thread, serve it with `uwf ui`, screenshot it.

    bash scripts/demo.sh >/dev/null   # prints "storage root: <dir>" on stderr
    .venv/bin/python scripts/ui-screenshot.py <dir>

Uses Debian's /usr/bin/chromium through Playwright (as the browser tests do).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parent.parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def main(root: str) -> None:
    env = {"UNCAGED_WORKFLOW_STORAGE_ROOT": root, "PATH": f"{REPO / '.venv/bin'}"}
    listed = subprocess.run(
        ["uwf", "thread", "list", "--all"], env=env, capture_output=True, text=True, check=True
    )
    thread = re.search(r'"thread":"([0-9A-Z]{26})"', listed.stdout)
    assert thread, listed.stdout
    server = subprocess.Popen(["uwf", "ui", "--port", "0"], env=env, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    url = re.search(r"(http://\S+/)", server.stderr.readline())
    assert url
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.goto(f"{url.group(1)}thread/{thread.group(1)}")
            page.click("#step-3 details.detail summary")
            page.wait_for_selector("#step-3 .turn")
            page.screenshot(path=str(REPO / "docs" / "ui-thread.png"), full_page=True)
            browser.close()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


if __name__ == "__main__":
    main(sys.argv[1])
