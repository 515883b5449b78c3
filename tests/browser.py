"""Headless Chromium for the browser tests (Debian package ``chromium``), driven through the
Chrome DevTools Protocol over tornado's websocket client (no extra dependency).

Used by tests/test_book_browser.py (every page of the built book) and tests/test_explorer_lab.py
(the live explorer in JupyterLab). Chromium runs with ``--host-resolver-rules`` that resolve
nothing but 127.0.0.1, so no request can leave the machine; the tests also check the request log.

Chromium is installed by ``.ci/run`` (``apt-get install -y chromium``). Locally a test skips with
a reason when Chromium is missing; on CI (``CI=true``) a missing Chromium is a failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--window-size=1280,2200",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
LOCAL = re.compile(r"^(https?://127\.0\.0\.1[:/]|wss?://127\.0\.0\.1[:/]|data:|blob:|about:)")


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def require_chromium() -> str:
    exe = chromium_path()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it with 'apt-get install -y chromium'")
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium; CI installs it)")
    return exe


class CDP:
    """A minimal Chrome DevTools Protocol client for one page target."""

    def __init__(self, ws_url: str):
        from tornado.ioloop import IOLoop
        from tornado.websocket import websocket_connect
        self.loop = IOLoop()
        self.conn = self.loop.run_sync(lambda: websocket_connect(ws_url, max_message_size=64 * 2**20))
        self.n = 0
        self.events: list[dict] = []

    def _recv(self, timeout: float):
        async def go():
            return await asyncio.wait_for(self.conn.read_message(), max(timeout, 0.01))
        msg = self.loop.run_sync(go)
        if msg is None:
            raise RuntimeError("devtools connection closed")
        return json.loads(msg)

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        self.n += 1
        me = self.n
        self.conn.write_message(json.dumps({"id": me, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self._recv(deadline - time.monotonic())
            if m.get("id") == me:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)
        raise TimeoutError(method)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self._recv(deadline - time.monotonic())
            if m.get("method") == method:
                return m
            self.events.append(m)
        raise TimeoutError(method)

    def evaluate(self, js: str, timeout: float = 60):
        r = self.call("Runtime.evaluate", timeout=timeout, expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r.get("result", {}).get("value")

    def wait_for(self, js: str, timeout: float = 60, every: float = 0.25):
        """Poll the expression ``js`` until it is truthy; return its value (TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.evaluate(js)
            if v:
                return v
            time.sleep(every)
        raise TimeoutError(f"waited {timeout:.0f} s for: {js[:200]}")

    def screenshot(self, path: Path) -> None:
        png = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(png))

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}".strip())
        return out

    def close(self):
        self.conn.close()
        self.loop.close()


class Browser:
    """One headless Chromium process; :meth:`page` opens a DevTools session on its page target."""

    def __init__(self, exe: str, profile: Path, window: str = "1280,2200"):
        flags = [f for f in FLAGS if not f.startswith("--window-size")] + [f"--window-size={window}"]
        self.proc = subprocess.Popen([exe, *flags, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                      "--remote-debugging-address=127.0.0.1", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.port is None:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.proc.kill()
            pytest.fail("chromium did not start its devtools endpoint")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()  # drain its log

    def page(self) -> CDP:
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        cdp = CDP(page["webSocketDebuggerUrl"])
        for domain in ("Network", "Page", "Runtime", "Log"):
            cdp.call(f"{domain}.enable")
        return cdp

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def navigate(cdp: CDP, url: str, timeout: float = 60) -> None:
    cdp.events.clear()
    cdp.call("Page.navigate", url=url)
    cdp.wait_event("Page.loadEventFired", timeout)


def off_machine(urls) -> list[str]:
    return [u for u in urls if not LOCAL.match(u)]
