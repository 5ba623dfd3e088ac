"""The web console's key-to-frame time beside the terminal console's, in one run, on the same load.

    .venv/bin/python bench/web_responsiveness.py [--sessions 10] [--rate 100] [--presses 60] [--gap 0.1]
                                                 [--warmup 3] [--json PATH]

Issue 15 asks for the web console's key-to-frame time beside the terminal's.

1. Load. A throw-away daemon (live_common.BenchDaemon: its own temporary LOOPWARDEN_HOME) runs N native
   sessions of tests/agents/paced_flood.py --rate R, as console_responsiveness.py does (its defaults are
   50 x 1,000 events/s; here 10 x 100 by default, since a browser, the web server and a console process
   share the cores with the daemon too; --sessions and --rate change it).
2. Web console. `loopwarden web --port 0` for that profile and a headless Chromium (tests/web/browser.py,
   selenium and Debian's chromedriver) opening its address with the token. Keys are pressed with
   selenium, i.e. real key events through DevTools. Timed in the page, with performance.now(), so that
   selenium's own round trips do not count: from the keydown event at the document (capture phase,
   before xterm.js takes it) to the first animation frame after xterm.js parsed a write that made the
   screen show the key's effect (checked on each write). Between the two: the websocket, textual-serve,
   the console process (`loopwarden console --web`), its frame, and back.
3. Terminal console. console_responsiveness.py's TimedConsole in this process, under
   `run_test(size=the browser's cols x rows)`; keys posted to the driver as Pilot.press does; from just
   before the key to the first frame the compositor rendered once the key's effect holds (its `screen`
   figure: that frame is also turned into the bytes a terminal would be sent).
   Both phases press the same keys in turn: `s` (the status line shows the next sort), `g` (the gates
   queue's header) and `escape` (the sessions table's header again): effects the page shows as text.
   `escape` costs the web console more: a lone ESC byte reaches Textual's input parser there, which waits
   for more bytes of an escape sequence (textual.constants.ESCAPE_DELAY, and its reader's 0.1 s tick)
   before taking it as the key; the terminal phase posts the key past the parser. The figures without
   escape are printed too.

Prints p50/p95/max of both, per key too, and writes every press to bench/out/web_responsiveness.json.
Everything it started (daemon, agents, web server, consoles, browser) is stopped at the end. Skips (exit 0,
with the reason) when chromium, chromedriver or selenium is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from console_responsiveness import TimedConsole, key_event, rows_shown
from live_common import AGENTS, PY, BenchDaemon, pct, wait_for

from loopwarden.widgets.app import Sessions
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.session_table import SORTS
from tests.web.browser import chromium, missing, press, screen

KEYS = ["s", "g", "escape"]
PRESS_TIMEOUT = 10.0
SELENIUM_KEYS = {"escape": "\ue00c"}

# Added to the page after tests/web/browser.py's script (which keeps xterm's Terminal on window.__lwTerminal):
# the time of the key, and the first animation frame after a parsed write that shows what the key asked for.
ARM = """
const [kind, arg] = arguments;
const t = window.__lwTerminal;
if (!window.__lwTimer) {
  window.__lwTimer = true;
  document.addEventListener("keydown", () => { if (window.__lwKeyAt === null) window.__lwKeyAt = performance.now(); },
                            true);
  t.onWriteParsed(() => {
    if (window.__lwKeyAt === null || window.__lwSeen !== null || window.__lwFramed || !window.__lwCheck()) return;
    window.__lwFramed = true;
    requestAnimationFrame(() => { window.__lwSeen = performance.now(); });
  });
}
const line = (y) => {
  const l = t.buffer.active.getLine(t.buffer.active.viewportY + y);
  return l ? l.translateToString(true) : "";
};
window.__lwCheck = {
  sort: () => line(t.rows - 2).includes("sort: " + arg + " "),
  gates: () => line(1).trimStart().startsWith("GATE"),
  sessions: () => line(1).trimStart().startsWith("ID"),
}[kind];
window.__lwKeyAt = null; window.__lwSeen = null; window.__lwFramed = false;
return [t.cols, t.rows];
"""
RESULT = "return [window.__lwKeyAt, window.__lwSeen];"


def next_sort(current: str) -> str:
    names = list(SORTS)
    return names[(names.index(current) + 1) % len(names)]


def start_load(d: BenchDaemon, sessions: int, rate: int) -> None:
    for i in range(sessions):
        d.run([PY, str(AGENTS / "paced_flood.py"), "--rate", str(rate)], sets=["limits.max_runtime=0"],
              name=f"flood-{i}")
    wait_for(lambda: sum(s.get("state") == "running" for s in d.request("list")) >= sessions, 60,
             f"{sessions} sessions to run")


# ---- the web console ---------------------------------------------------------------
class Web:
    def __init__(self, d: BenchDaemon) -> None:
        self.proc = subprocess.Popen([PY, "-m", "loopwarden", "web", "--port", "0", "--show-token"], env=d.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            raise RuntimeError(f"loopwarden web did not start (exit {self.proc.wait()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def web_phase(d: BenchDaemon, args: argparse.Namespace, profile: Path) -> dict[str, Any]:
    web = Web(d)
    try:
        with chromium(profile) as driver:
            driver.get(web.url)
            wait_for(lambda: f"{args.sessions} sessions" in screen(driver), 60, "the web console's table")
            time.sleep(args.warmup)
            sort = "id"
            presses: list[dict[str, Any]] = []
            size: list[int] = []
            for i in range(args.presses):
                key = KEYS[i % len(KEYS)]
                kind, arg = {"s": ("sort", next_sort(sort)), "g": ("gates", ""), "escape": ("sessions", "")}[key]
                size = driver.execute_script(ARM, kind, arg)
                press(driver, SELENIUM_KEYS.get(key, key))
                deadline = time.monotonic() + PRESS_TIMEOUT
                key_at = seen = None
                while time.monotonic() < deadline:
                    key_at, seen = driver.execute_script(RESULT)
                    if seen is not None:
                        break
                    time.sleep(0.005)
                presses.append({"key": key, "screen_ms": None if seen is None or key_at is None else seen - key_at})
                if key == "s":
                    sort = arg
                time.sleep(args.gap)
            return {"presses": presses, "size": size}
    finally:
        web.stop()


# ---- the terminal console ----------------------------------------------------------
async def terminal_phase(d: BenchDaemon, args: argparse.Namespace, size: tuple[int, int]) -> dict[str, Any]:
    app = TimedConsole(d.paths, autostart=False)
    presses: list[dict[str, Any]] = []
    async with app.run_test(size=size, notifications=True):
        deadline = time.monotonic() + 60
        while not (app.feed.ready and rows_shown(app) >= args.sessions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the console never showed {args.sessions} rows: {app.feed.error or 'timeout'}")
            await asyncio.sleep(0.1)
        await asyncio.sleep(args.warmup)
        for i in range(args.presses):
            key = KEYS[i % len(KEYS)]
            state: Callable[[], bool]
            if key == "s":
                want = next_sort(app.table.sort_by)

                def state(want: str = want) -> bool:
                    return app.table.sort_by == want
                screen_type: type = Sessions
            elif key == "g":
                def state() -> bool:
                    return isinstance(app.screen, GatesQueue)
                screen_type = GatesQueue
            else:
                def state() -> bool:
                    return isinstance(app.screen, Sessions)
                screen_type = Sessions

            def probe(shown: Any, state: Callable[[], bool] = state, want: type = screen_type) -> bool:
                return isinstance(shown, want) and shown is app.screen and state()

            app.probe_hit = None
            app.probe = probe
            t0 = time.perf_counter()
            key_event(app, key)
            give_up = t0 + PRESS_TIMEOUT
            while time.perf_counter() < give_up:  # polled as console_responsiveness.py does
                if app.probe_hit is not None:
                    break
                await asyncio.sleep(0.001)
            app.probe = None
            hit = app.probe_hit
            presses.append({"key": key, "screen_ms": None if hit is None else (hit - t0) * 1000})
            await asyncio.sleep(args.gap)
    return {"presses": presses}


# ---- the summary -------------------------------------------------------------------
def figures(presses: list[dict[str, Any]]) -> str:
    times = [p["screen_ms"] for p in presses if p["screen_ms"] is not None]
    lost = len(presses) - len(times)
    if not times:
        return f"no press reached the screen ({lost} timed out)"
    by_key = "  ".join(
        f"{k} {pct([p['screen_ms'] for p in presses if p['key'] == k and p['screen_ms'] is not None], 0.5):.0f}"
        f"/{pct([p['screen_ms'] for p in presses if p['key'] == k and p['screen_ms'] is not None], 0.95):.0f}"
        for k in KEYS if any(p["key"] == k and p["screen_ms"] is not None for p in presses))
    plain = [p["screen_ms"] for p in presses if p["key"] != "escape" and p["screen_ms"] is not None]
    return (f"p50 {pct(times, 0.5):6.1f}  p95 {pct(times, 0.95):6.1f}  max {max(times):6.1f} ms  "
            f"({len(times)} presses{f', {lost} timed out' if lost else ''}; by key p50/p95: {by_key}; "
            f"without escape p50/p95: {pct(plain, 0.5):.0f}/{pct(plain, 0.95):.0f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--rate", type=int, default=100, help="events/s of each session")
    ap.add_argument("--presses", type=int, default=60, help="key presses in each console")
    ap.add_argument("--gap", type=float, default=0.1, help="seconds between a press seen and the next")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--json", default=str(Path(__file__).resolve().parent / "out" / "web_responsiveness.json"))
    args = ap.parse_args()
    why = missing()
    if why:
        print(f"skipped: {why}")
        return 0
    load_before = os.getloadavg()
    with BenchDaemon("web") as d, tempfile.TemporaryDirectory(prefix="lw-chromium-") as profile:
        start_load(d, args.sessions, args.rate)
        web = web_phase(d, args, Path(profile))
        cols, rows = web["size"] or [160, 48]
        terminal = asyncio.run(terminal_phase(d, args, (cols, rows)))
    result = {"args": vars(args), "load_before": load_before, "load_after": os.getloadavg(), "cores": os.cpu_count(),
              "size": [cols, rows], "web": web["presses"], "terminal": terminal["presses"],
              "finished_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"key -> frame, {args.sessions} sessions x paced_flood {args.rate} ev/s, console {cols}x{rows}, keys "
          f"{', '.join(KEYS)} in turn; {os.cpu_count()} cores, load average {load_before[0]:.2f} before, "
          f"{result['load_after'][0]:.2f} after")
    print(f"  web console (Chromium, keydown -> frame)     {figures(web['presses'])}")
    print(f"  terminal console (headless, key -> frame)   {figures(terminal['presses'])}")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
