"""The console as a process and headless Chromium driving it (Playwright with Debian's
``chromium``: Playwright's own browser downloads are not used)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deps import require
from harness import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("EOSLOG_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "console"
CHROMIUM_HINT = "apt-get install -y chromium (scripts/setup.sh does it), or set EOSLOG_CHROMIUM=/path/to/chromium"
PLAYWRIGHT_HINT = "pip install playwright (in the test extras: scripts/setup.sh installs them)"


def chromium_path() -> str:
    path = os.environ.get("EOSLOG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    require("Chromium", path is not None, CHROMIUM_HINT)
    assert path is not None
    return path


class ConsoleProcess:
    def __init__(self, bootstrap: str, log_path: Path, metrics_url: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "eoslog", "console", "--bootstrap-server", bootstrap,
               "--listen", f"127.0.0.1:{self.port}", "--refresh", "0"]
        if metrics_url:
            cmd += ["--metrics", metrics_url]
        self.log_path = log_path
        with open(log_path, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/static/refresh.js", timeout=5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"console not serving; log:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


@contextmanager
def chromium_page() -> Iterator[Any]:
    """One headless Chromium and one page, for a test module."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require("playwright", False, PLAYWRIGHT_HINT)
        raise
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artefact (test-artifacts/console/NAME.png)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def cell(page: Any, row: str, column: str) -> str:
    """The text of the ``column`` cell of the row matched by the CSS selector ``row``."""
    return str(page.locator(f"{row} .{column}").inner_text()).strip()
