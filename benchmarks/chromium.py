"""Headless Chromium driven over the DevTools protocol: the report page is opened,
typed into and measured in a real browser, by its tests and by bench_report.

Needs only Debian's ``chromium`` binary: no extra Python package, no network port.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess

__all__ = ["Chromium"]


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (no extra package, no port).

    ``--remote-debugging-pipe``: the browser reads NUL-terminated JSON commands
    on fd 3 and writes replies and events on fd 4. One page target is attached
    (flat session); every Network request the page makes is recorded in
    ``requests``.

        with Chromium(profile_dir) as browser:
            browser.open("file:///tmp/report/index.html")
            browser.evaluate("document.title")
    """

    FLAGS = (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--remote-debugging-pipe",
    )

    def __init__(self, profile_dir, binary=None):
        self.binary = binary or shutil.which("chromium") or shutil.which("chromium-browser")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child gets the pipe ends as fds 3 and 4.
        self.process = subprocess.Popen(
            [self.binary, *self.FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.requests: list[str] = []
        self.session = None

    def __enter__(self):
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Network", "Page", "Runtime"):
            self.send(f"{domain}.enable")
        return self

    def __exit__(self, *exc_info):
        try:
            self.send("Browser.close", session=False)
        except Exception:  # noqa: BLE001 - the browser may be gone already
            pass
        try:
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def _read_message(self, timeout: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], timeout)
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _record(self, message: dict) -> None:
        self.events.append(message)
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(message["params"]["request"]["url"])

    def send(self, method: str, session: bool = True, timeout: float = 60, **params) -> dict:
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params}
        if session and self.session:
            command["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        while True:
            message = self._read_message(timeout)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._record(message)

    def wait_for_event(self, method: str, timeout: float = 60) -> dict:
        for message in self.events:
            if message.get("method") == method:
                self.events.remove(message)
                return message
        while True:
            message = self._read_message(timeout)
            self._record(message)
            if message.get("method") == method:
                self.events.remove(message)
                return message

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def type_text(self, text: str, per_character: bool = True) -> None:
        """Types into the focused element, one character at a time (or all at once, like a paste)."""
        for chunk in (list(text) if per_character else [text]):
            self.send("Input.insertText", text=chunk)

    def screenshot(self, path) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
