"""Headless Chromium for the browser tests: the system's Chromium (Debian package ``chromium``) driven by
Playwright (``playwright``, in the ``test`` extra) through its executable path, so nothing else is downloaded
(no ``playwright install``).

Used by tests/test_book_browser.py (every page of the built book), tests/test_explorer_lab.py (the live
explorer in JupyterLab) and tests/test_book_readers.py. Chromium runs with ``--host-resolver-rules`` that
resolve nothing but 127.0.0.1, so no request can leave the machine; the tests also check the request log.

Chromium is installed by ``.ci/run`` (``make install-browser``: ``apt-get install -y chromium``). Locally a
test skips with a reason when Chromium is missing; on CI (``CI=true``) a missing Chromium is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--window-size=1280,2200",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
LOCAL = re.compile(r"^(https?://127\.0\.0\.1[:/]|wss?://127\.0\.0\.1[:/]|data:|blob:|about:)")
#: how to install Chromium, as .ci/run does (``make install-browser``)
INSTALL = "apt-get install -y chromium"


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
            pytest.fail(f"chromium is not installed; .ci/run installs it with 'make install-browser' ({INSTALL})")
        pytest.skip(f"chromium not installed (make install-browser, or Debian: {INSTALL}; CI installs it)")
    return exe


#: Promise.race of a script's value against ``ms`` milliseconds (called on the value, so no eval in the page)
_WITHIN = ("function (ms) { return Promise.race([Promise.resolve(this), new Promise((_, no) => "
           "setTimeout(() => no(new Error('no answer within ' + ms / 1000 + ' s')), ms))]); }")


class CDP:
    """One page of a :class:`Browser`: Playwright's ``page``, with a Chrome DevTools Protocol session on it
    (``session``) for :meth:`call`. ``events``: what the page sent and reported since the last :func:`navigate`,
    as ``("request", url)`` and ``("error", text)``."""

    def __init__(self, page):
        self.page = page
        self.session = page.context.new_cdp_session(page)
        self.events: list[tuple[str, str]] = []
        self._heard: dict[str, list[dict]] = {}  # DevTools events waited for (wait_event)
        page.on("request", lambda r: self.events.append(("request", r.url)))
        # console.error/assert, and the browser's own log entries (failed loads) that Playwright reports with them
        page.on("console", lambda m: m.type in ("error", "assert") and self.events.append(("error", f"console: {m.text}")))
        page.on("pageerror", lambda e: self.events.append(("error", f"exception: {e}")))

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        """A DevTools Protocol command on this page (e.g. ``Emulation.setEmulatedMedia``); ``timeout`` is not
        enforced (kept for the callers)."""
        return self.session.send(method, params)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        """The next DevTools Protocol event ``method`` (``{"method": ..., "params": ...}``; heard from its first wait
        on, its domain enabled then); TimeoutError after ``timeout`` seconds."""
        if method not in self._heard:
            self._heard[method] = []
            self.session.on(method, lambda params, m=method: self._heard[m].append({"method": m, "params": params}))
            self.session.send(method.split(".")[0] + ".enable")
        heard, deadline = self._heard[method], time.monotonic() + timeout
        while not heard:
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            self.page.wait_for_timeout(50)
        return heard.pop(0)

    def evaluate(self, js: str, timeout: float = 60):
        """The value of the script ``js`` in the page (its completion value, a promise awaited at most ``timeout``
        seconds): RuntimeError for a script error, TimeoutError past ``timeout``."""
        r = self.session.send("Runtime.evaluate", {"expression": js})
        if "objectId" in r["result"] and "exceptionDetails" not in r:
            r = self.session.send("Runtime.callFunctionOn", {
                "objectId": r["result"]["objectId"], "functionDeclaration": _WITHIN,
                "arguments": [{"value": int(timeout * 1000)}], "awaitPromise": True, "returnByValue": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            why = f"{d.get('text')} {d.get('exception', {}).get('description', '')}"
            raise (TimeoutError if "no answer within" in why else RuntimeError)(f"page script failed: {why}")
        return r["result"].get("value")

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
        self.page.screenshot(path=str(path))

    def requests(self) -> list[str]:
        return [v for k, v in self.events if k == "request"]

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        return [v for k, v in self.events if k == "error"]

    def close(self):
        self.page.close()


_driver: list = []  # [Playwright, number of open browsers]: one driver process for all of them


class Browser:
    """One headless Chromium (its profile in ``profile``, its window ``window`` = "width,height" px);
    :meth:`page` opens a page in it."""

    def __init__(self, exe: str, profile: Path, window: str = "1280,2200"):
        if not _driver:
            from playwright.sync_api import sync_playwright
            _driver[:] = [sync_playwright().start(), 0]
        _driver[1] += 1
        width, height = (int(x) for x in window.split(","))
        flags = [f for f in FLAGS if f != "--headless" and not f.startswith("--window-size")] + [f"--window-size={window}"]
        try:
            self.context = _driver[0].chromium.launch_persistent_context(
                str(profile), executable_path=exe, headless=True, args=flags, viewport={"width": width, "height": height},
                timeout=120_000)
        except Exception as e:
            self._release()
            pytest.fail(f"chromium ({exe}) did not start under Playwright: {e}")

    def page(self) -> CDP:
        return CDP(self.context.new_page())

    def close(self):
        try:
            self.context.close()
        finally:
            self._release()

    @staticmethod
    def _release():
        _driver[1] -= 1
        if _driver[1] == 0:
            _driver.pop(0).stop()
            _driver.clear()


def navigate(cdp: CDP, url: str, timeout: float = 60) -> None:
    """Open ``url`` in the page and wait for its load event; ``cdp.events`` starts afresh."""
    cdp.events.clear()
    cdp.page.goto(url, wait_until="load", timeout=timeout * 1000)


def off_machine(urls) -> list[str]:
    return [u for u in urls if not LOCAL.match(u)]
