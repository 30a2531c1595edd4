"""Debian's chromium, headless, driven over the DevTools protocol (``websockets``): load a page with
credentials, wait until its text shows what is expected, save a screenshot. Installed with apt-get
when /usr/bin/chromium is absent; a failed install fails the test (never a skip)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000"]


def ensure_chromium() -> str:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        pytest.fail("chromium is not installed and apt-get is unavailable: install Debian's "
                    "chromium package to run the browser checks")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"installing chromium failed at `{' '.join(cmd)}` (exit {done.returncode}):"
                        f"\n{done.stderr[-2000:]}")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"apt-get installed chromium but {CHROMIUM} is missing")
    return CHROMIUM


class Page:
    def __init__(self, ws: Any) -> None:
        self.ws, self.ids = ws, itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=30))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def text(self) -> str:
        res = self.send("Runtime.evaluate",
                        expression="document.body ? document.body.innerText : ''",
                        returnByValue=True)
        return res.get("result", {}).get("value", "")

    def wait_text(self, expected: list[str], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            missing = [e for e in expected if e not in text]
            if not missing:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {missing} not shown after {timeout:.0f} s; "
                                     f"page text starts: {text[:1500]!r}")
            time.sleep(1)

    def scroll_to(self, heading: str) -> bool:
        """Scroll the first leaf element whose text starts with ``heading`` into view."""
        js = ("(() => { const e = [...document.querySelectorAll('body *')].find(n => "
              f"n.childElementCount === 0 && n.textContent.trim().startsWith({heading!r})); "
              "if (e) e.scrollIntoView({block: 'start'}); return !!e; })()")
        res = self.send("Runtime.evaluate", expression=js, returnByValue=True)
        return bool(res.get("result", {}).get("value"))

    def _field_js(self, label: str, action: str) -> str:
        """A script finding the control of the form field labelled ``label`` (a Prefect form label
        reads "<label> (Optional)" or "<label>") as ``c``, then running ``action``."""
        return ("(() => { const l = [...document.querySelectorAll('.p-label__label')].find(e => "
                f"[{label!r}, {label + ' (Optional)'!r}].includes(e.textContent.trim())); "
                "if (!l) return null; let box = l, c = null; "
                "while (box && !(c = box.querySelector('input,textarea,select'))) "
                "box = box.parentElement; "
                f"{action} }})()")

    def field_value(self, label: str) -> str | None:
        """The value the control labelled ``label`` holds now (None when there is no such field)."""
        res = self.send("Runtime.evaluate", expression=self._field_js(label, "return c.value;"),
                        returnByValue=True)
        return res.get("result", {}).get("value")

    def fill(self, label: str, value: str, timeout: float = 15) -> None:
        """Type ``value`` into the form field labelled ``label`` as a user's typing does (the
        control's own value setter, then input and change events), until the control keeps it:
        a form still binding its fields may redraw a control and drop a value set too early."""
        setter = ("const cls = {TEXTAREA: HTMLTextAreaElement, SELECT: HTMLSelectElement}"
                  "[c.tagName] || HTMLInputElement; "
                  "Object.getOwnPropertyDescriptor(cls.prototype, 'value').set.call(c, "
                  f"{value!r}); "
                  "c.dispatchEvent(new Event('input', {bubbles: true})); "
                  "c.dispatchEvent(new Event('change', {bubbles: true})); return 'ok';")
        deadline = time.monotonic() + timeout
        while True:
            res = self.send("Runtime.evaluate", expression=self._field_js(label, setter),
                            returnByValue=True)
            if res.get("result", {}).get("value") != "ok":
                raise AssertionError(f"no form field labelled {label!r} on the page")
            time.sleep(0.5)
            if self.field_value(label) == value:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the field {label!r} does not keep {value!r} "
                                     f"(holds {self.field_value(label)!r})")

    def click(self, button: str) -> None:
        """Click the button (or tab) whose text is ``button``."""
        js = ("(() => { const b = [...document.querySelectorAll('button, .p-tab')].find(e => "
              f"e.innerText.trim() === {button!r}); if (b) b.click(); return !!b; }})()")
        if not self.send("Runtime.evaluate", expression=js, returnByValue=True
                         ).get("result", {}).get("value"):
            raise AssertionError(f"no button {button!r} on the page")

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))


@contextmanager
def browser(extra_headers: dict[str, str]) -> Iterator[Page]:
    """A fresh headless chromium (own profile dir) with one page sending ``extra_headers``."""
    from websockets.sync.client import connect

    exe = ensure_chromium()
    profile = tempfile.mkdtemp(prefix="chromium-it-")
    proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError("chromium did not open its DevTools port within 60 s")
            time.sleep(0.2)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            target = next(t for t in json.loads(r.read()) if t["type"] == "page")
        with connect(target["webSocketDebuggerUrl"], max_size=2**26) as ws:
            page = Page(ws)
            page.send("Page.enable")
            page.send("Network.enable")
            page.send("Network.setExtraHTTPHeaders", headers=extra_headers)
            yield page
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
