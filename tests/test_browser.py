"""tests/browser.py, the browser tests' view of a page (Playwright driving the system Chromium), on one tiny page
served on 127.0.0.1: what it reports is what the book's browser test relies on: every request (one leaving the
machine included, which the resolver rules stop), console errors, uncaught exceptions and failed loads, a script's
value (statements, a promise), a script error and a promise that never settles as errors, the emulated colour
scheme and width, a screenshot."""

from __future__ import annotations

import functools
import http.server
import re
import threading
from pathlib import Path

import browser
import pytest
from browser import Browser, navigate, off_machine

ROOT = Path(__file__).resolve().parents[1]

PAGE = """<!doctype html><html><head><meta name="viewport" content="width=device-width"></head><body>
<p id="x">hello</p><img src="missing.png"><img src="http://example.com/off.png">
<script>console.error('boom', 1); console.log('fine'); setTimeout(() => { throw new Error('late'); }, 0);</script>
</body></html>"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "page.html").write_text(PAGE)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_page_as_the_browser_tests_read_it(chromium, site, tmp_path):
    b = Browser(chromium, tmp_path / "profile", window="800,600")
    try:
        cdp = b.page()
        cdp.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])
        cdp.call("Emulation.setDeviceMetricsOverride", width=390, height=900, deviceScaleFactor=1, mobile=True)
        navigate(cdp, f"{site}/page.html")
        assert cdp.wait_for("document.readyState === 'complete' && document.title + 'x'") == "x"
        assert cdp.evaluate("const n = 2; document.getElementById('x').textContent + n * 21") == "hello42"
        assert cdp.evaluate("new Promise(res => setTimeout(() => res({a: [1, null]}), 50))") == {"a": [1, None]}
        assert cdp.evaluate("[matchMedia('(prefers-color-scheme: dark)').matches, innerWidth]") == [True, 390]
        assert cdp.evaluate("undefined") is None
        with pytest.raises(RuntimeError, match="Cannot read properties of null"):
            cdp.evaluate("null.x")
        with pytest.raises(TimeoutError):
            cdp.evaluate("new Promise(() => {})", timeout=0.5)
        requests, errors = cdp.requests(), cdp.errors()
        shot = tmp_path / "page.png"
        cdp.screenshot(shot)
        # a second page of the same browser starts with its own log
        other = b.page()
        navigate(other, f"{site}/missing.png")
        assert other.requests() == [f"{site}/missing.png"]
        other.close()
        cdp.close()
    finally:
        b.close()
    assert requests[0] == f"{site}/page.html" and f"{site}/missing.png" in requests
    assert off_machine(requests) == ["http://example.com/off.png"]
    assert any("boom 1" in e for e in errors) and any("late" in e for e in errors), errors
    assert any("404" in e for e in errors) and any("ERR_NAME_NOT_RESOLVED" in e for e in errors), errors
    assert not any("fine" in e for e in errors)
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_two_browsers_at_once_and_one_after_the_other(chromium, site, tmp_path):
    """One Playwright driver serves every open browser (a module's browser and a test's own) and stops with the last."""
    a = Browser(chromium, tmp_path / "a")
    b = Browser(chromium, tmp_path / "b")
    pa, pb = a.page(), b.page()
    navigate(pa, f"{site}/page.html")
    navigate(pb, f"{site}/page.html")
    assert pa.evaluate("document.title + document.getElementById('x').textContent") == "hello"
    a.close()
    assert pb.evaluate("1 + 1") == 2
    b.close()
    c = Browser(chromium, tmp_path / "c")
    try:
        pc = c.page()
        navigate(pc, f"{site}/page.html")
        assert pc.evaluate("setTimeout(() => location.reload(), 300); location.pathname") == "/page.html"
        assert pc.wait_event("Page.loadEventFired", timeout=60)["params"]["timestamp"] > 0
        with pytest.raises(TimeoutError):
            pc.wait_event("Page.loadEventFired", timeout=0.5)
    finally:
        c.close()


def test_a_missing_chromium_is_named_with_the_command_that_installs_it(monkeypatch):
    """Without Chromium the browser tests skip (locally) or fail (CI), naming ``make install-browser``, which .ci/run
    runs before ``make test`` and which runs the apt-get command the reason names."""
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=re.escape(f"make install-browser, or Debian: {browser.INSTALL}")):
        browser.require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="make install-browser"):
        browser.require_chromium()
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make install-browser$", ci, re.M) and ci.index("make install-browser") < ci.index("make test")
    mk = (ROOT / "Makefile").read_text()
    recipe = mk[mk.index("\ninstall-browser:"):].split("\n\n")[0]
    assert re.search(r"apt-get install -y .*chromium; fi$", recipe), recipe
    assert "install-browser" in mk[mk.index("\ntest: install"):].split("\n\n")[0]  # make test names it when missing
