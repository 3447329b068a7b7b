"""Headless Chromium driven over the DevTools protocol: open a page, click, wait, screenshot.

``chromium --screenshot`` alone cannot click, and Dagster shows a long Markdown value behind a
"[Show Markdown]" link. The protocol needs only a WebSocket client (``websockets``, already
installed with Dagster's webserver), no browser download and no driver.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

# the flags Chromium needs on a machine with no network but loopback, as root, with no screen
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One tab, its commands sent on the browser's connection with the tab's session."""

    def __init__(self, ws: ClientConnection, session: str) -> None:
        self.ws, self.session, self.ids = ws, session, itertools.count(1000)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return _call(self.ws, self.ids, method, params, self.session)

    def evaluate(self, expression: str) -> Any:
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """The expression's value once it is truthy; an AssertionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"the page never made true: {expression}")

    def screenshot(self, path: Path) -> None:
        shot = self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))


def _call(
    ws: ClientConnection, ids: Iterator[int], method: str, params: dict[str, Any], session: str = ""
) -> dict[str, Any]:
    number = next(ids)
    message: dict[str, Any] = {"id": number, "method": method, "params": params}
    if session:
        message["sessionId"] = session
    ws.send(json.dumps(message))
    while True:  # events of the page come in between; only the answer is wanted
        answer = json.loads(ws.recv(timeout=60))
        if answer.get("id") == number:
            if "error" in answer:
                raise AssertionError(f"{method}: {answer['error']}")
            return answer.get("result", {})


@contextmanager
def browser_page(profile: Path, width: int = 1600, height: int = 900) -> Iterator[Page]:
    """A blank tab of a headless Chromium with a fresh profile; the browser is ended after."""
    binary = chromium()
    assert binary, "no chromium on the PATH"
    profile.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) == 2):
            assert proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.2)
        port, path = port_file.read_text().splitlines()
        with connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as ws:
            ids = itertools.count(1)
            target = _call(ws, ids, "Target.createTarget", {"url": "about:blank"})["targetId"]
            session = _call(ws, ids, "Target.attachToTarget", {"targetId": target, "flatten": True})
            page = Page(ws, session["sessionId"])
            page.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            page.send("Page.enable")
            yield page
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
