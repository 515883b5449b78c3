"""A real browser opens the built book: headless Chromium (Debian package ``chromium``).

The book is built with small parameters into a temporary folder (``scripts/build_book.py
--quick --only 04,06``: the index and two chapters), served on 127.0.0.1, and opened through the
Chrome DevTools Protocol. For the index and each chapter the test records every request the page
makes, waits for MathJax, takes a screenshot and checks that

* every figure image loaded (``naturalWidth > 0``) and the chapters have figures;
* the maths is typeset (MathJax CHTML ``mjx-container`` elements) and no raw ``$...$`` remains;
* no request leaves the machine: every URL the page asked for is on 127.0.0.1 (Chromium also
  runs with ``--host-resolver-rules`` that resolve nothing else, so nothing could leave anyway).

Chromium is installed by ``.ci/run`` (``apt-get install -y chromium``). Locally the test skips
with a reason when Chromium is missing; on CI (``CI=true``) a missing Chromium is a failure.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("book/intro.html", "book/04-rarest-first.html", "book/06-social-proof.html")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--window-size=1280,2200",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.fixture(scope="module")
def chromium():
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it with 'apt-get install -y chromium'")
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium; CI installs it)")
    return exe


@pytest.fixture(scope="module")
def built_book(tmp_path_factory, chromium):
    out = tmp_path_factory.mktemp("book")
    env = dict(os.environ, CROSSPROFILE_CACHE=str(out / "cache"))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py"), "--quick", "--only", "04,06",
                        "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"book build failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


class CDP:
    """A minimal Chrome DevTools Protocol client over tornado's websocket (no extra dependency)."""

    def __init__(self, ws_url: str):
        from tornado.ioloop import IOLoop
        from tornado.websocket import websocket_connect
        self.loop = IOLoop()
        self.conn = self.loop.run_sync(lambda: websocket_connect(ws_url, max_message_size=64 * 2**20))
        self.n = 0
        self.events: list[dict] = []

    def _recv(self, timeout: float):
        import asyncio
        async def go():
            return await asyncio.wait_for(self.conn.read_message(), timeout)
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

    def evaluate(self, js: str):
        r = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def close(self):
        self.conn.close()
        self.loop.close()


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory):
    prof = tmp_path_factory.mktemp("chromium-profile")
    p = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={prof}", "--remote-debugging-port=0",
                          "--remote-debugging-address=127.0.0.1", "about:blank"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and port is None:
        line = p.stderr.readline()
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
    if port is None:
        p.kill()
        pytest.fail("chromium did not start its devtools endpoint")
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()  # drain its log
    yield port
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()


def _open(port: int, url: str, shot: Path) -> dict:
    targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
    page = next(t for t in targets if t.get("type") == "page")
    cdp = CDP(page["webSocketDebuggerUrl"])
    try:
        cdp.call("Network.enable")
        cdp.call("Page.enable")
        cdp.call("Page.navigate", url=url)
        cdp.wait_event("Page.loadEventFired", 60)
        # MathJax typesets asynchronously after load: wait until it says it is done
        cdp.evaluate("""new Promise(res => { const t0 = Date.now(); (function w() {
            const mj = window.MathJax;
            if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(() => res(true)); return; }
            if (Date.now() - t0 > 15000) { res(false); return; } setTimeout(w, 100); })(); })""")
        info = cdp.evaluate("""(() => {
            const main = document.querySelector('main') || document.body;
            const imgs = [...main.querySelectorAll('.cell_output img, figure img, img[src*="_images"]')];
            return {math: document.querySelectorAll('mjx-container').length,
                    imgs: imgs.length, loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
                    raw_tex: (main.innerText.match(/\\$[^$\\n]{1,80}\\\\[a-zA-Z]+[^$\\n]{0,80}\\$/g) || []).length,
                    title: document.title};
        })()""")
        png = cdp.call("Page.captureScreenshot", format="png")["data"]
        shot.write_bytes(base64.b64decode(png))
        requests = [e["params"]["request"]["url"] for e in cdp.events if e.get("method") == "Network.requestWillBeSent"]
        info["requests"] = requests
        return info
    finally:
        cdp.close()


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline(page, server, browser, tmp_path_factory):
    shots = Path(os.environ.get("CROSSPROFILE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / (Path(page).stem + ".png")
    info = _open(browser, f"{server}/{page}", shot)
    assert shot.stat().st_size > 10_000, "the screenshot is (nearly) empty"
    outside = [u for u in info["requests"] if not re.match(r"^(https?://127\.0\.0\.1[:/]|data:|blob:|about:)", u)]
    assert not outside, f"{page} requested URLs off this machine: {outside[:10]}"
    assert info["requests"], "the devtools log recorded no request at all"
    assert info["math"] > 0, f"{page}: no typeset maths (no MathJax mjx-container element)"
    assert info["raw_tex"] == 0, f"{page}: raw TeX left on the page"
    assert info["loaded"] == info["imgs"], f"{page}: {info['imgs'] - info['loaded']} image(s) failed to load"
    if "intro" not in page:
        assert info["imgs"] >= 1, f"{page}: expected rendered figures, found no figure image"
