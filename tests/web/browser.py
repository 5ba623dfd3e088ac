"""A real Chromium, driven by selenium through Debian's chromedriver, that can read the web console's screen.

The page draws the terminal with xterm.js on a canvas (WebGL), so there is no text in the DOM. A script
added before the page's own (Chrome DevTools' Page.addScriptToEvaluateOnNewDocument) catches the xterm
Terminal as textual-serve's page stores it (`this.terminal = new Terminal(...)`), through a setter on
Object.prototype, and keeps it on `window.__lwTerminal`; the tests read its buffer, line by line, and
time the frames it writes. Nothing of the product changes for the tests.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,900")

CATCH_TERMINAL = """
(() => {
  Object.defineProperty(Object.prototype, "terminal", {
    configurable: true,
    set(value) {
      Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
      if (value && value.buffer && value.onWriteParsed) {
        window.__lwTerminal = value;
        window.__lwWrites = 0;
        value.onWriteParsed(() => { window.__lwWrites += 1; window.__lwWritten = performance.now(); });
      }
    },
  });
})();
"""

SCREEN = """
const t = window.__lwTerminal;
if (!t) return null;
const b = t.buffer.active, out = [];
for (let y = 0; y < t.rows; y++) { const l = b.getLine(b.viewportY + y); out.push(l ? l.translateToString(true) : ""); }
return out.join("\\n");
"""


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists() and not shutil.which(Path(path).name):
            return f"{path} is missing (Debian's chromium and chromium-driver packages)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium with a fresh profile under `profile`, quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else str(shutil.which("chromium"))
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver_path = CHROMEDRIVER if Path(CHROMEDRIVER).exists() else str(shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CATCH_TERMINAL})
        yield driver
    finally:
        driver.quit()


def screen(driver: Any) -> str:
    """The terminal's visible text ('' before the page made it)."""
    return driver.execute_script(SCREEN) or ""


def wait_screen(driver: Any, check: Callable[[str], Any], what: str, timeout: float = 30.0) -> str:
    """Poll the screen until `check(text)` holds; the text then (AssertionError with the last screen after
    `timeout`)."""
    last = [""]

    def shown() -> str | None:
        last[0] = screen(driver)
        return last[0] if last[0] and check(last[0]) else None

    return str(wait_for(shown, timeout, lambda: f"{what}; the screen:\n{last[0]}", every=0.05))


def press(driver: Any, *keys: str) -> None:
    """Type keys into the terminal as a person does: real key events (DevTools) into xterm's textarea, focused
    without a click (a click would reach the console as a mouse click on whatever is under it)."""
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("const a = document.querySelector('.xterm-helper-textarea');"
                          "if (a && document.activeElement !== a) a.focus();")
    for key in keys:
        ActionChains(driver).send_keys(key).perform()
