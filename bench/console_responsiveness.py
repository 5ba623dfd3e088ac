"""Console responsiveness under load: key press to screen, with 50 sessions x 1,000 events/s.

    .venv/bin/python bench/console_responsiveness.py [--seconds 120] [--sessions 50] [--rate 1000]
                                                     [--via driver|pilot] [--gap 0.1] [--warmup 5]
                                                     [--profile] [--trace-memory] [--json PATH] [--keep]

Issue 4, "Performance": with 50 sessions each emitting 1,000 events per second
through the daemon, measure the console's responsiveness (time from a key press
to the screen reflecting it, p95, via the Textual pilot) and its CPU and RSS
over two minutes. Targets: p95 under 100 ms, memory flat.

1. Load. A throw-away daemon (bench/live_common.py: its own temporary
   LOOPWARDEN_HOME) runs N native sessions of tests/agents/paced_flood.py
   --rate R (limits.max_runtime=0, so none ends early; no guard fires on the
   default config). The offered load is N x R events/s. Whether the daemon keeps
   up is read from the `events` counters (the engine's count of the events it
   judged, and stored) of `list` snapshots, once a second.
2. Console. The real ConsoleApp runs in THIS process, attached to that daemon,
   under `app.run_test(size=(160, 48), notifications=True)` (headless driver).
   Over the window the benchmark presses keys in a mix (down, up, s, g, escape;
   a `g` is always followed by `escape`), one every --gap seconds after the
   previous one was seen on the screen. For each press it records:
   * state: from just before the key is sent until the widget state that gets
     rendered shows it (polled every 1 ms): the selected row changed (down/up);
     `table.sort_by` is the next sort AND the rows are in that order (s); the
     top screen is the gates queue (g) or the sessions screen again (escape);
   * screen (the headline): from the same instant until the first frame that
     the compositor rendered after that state was reached, on the right screen.
     The headless driver skips writing to a terminal, but Textual still composes
     every update; the benchmark's subclass of ConsoleApp hooks `App._display`
     (which receives each composed update) and also renders the update into
     the terminal byte string a real terminal would be sent, so that cost is
     included too. A frame is counted only when the probe of the pending press
     holds at that moment, i.e. the frame was composed after the change.
   `--via driver` (default) sends the key the way `Pilot.press` does (an
   events.Key posted to the driver), without Pilot.press's own waits:
   `Pilot.press` then waits for "CPU idle" (textual._wait.wait_for_idle
   compares the process's CPU time with wall time, up to 1 s, twice), which
   under this load measures the pilot's heuristic rather than the console.
   `--via pilot` times `await pilot.press(key)` plus the same checks, for
   comparison.
3. Resources, sampled every second: this process's CPU (psutil cpu_percent;
   the console shares the process with the benchmark's key loop, its event loop
   lag probe and the sampler thread; the main thread and the feed thread are
   also shown on their own) and RSS; the daemon's CPU and RSS; the agents' CPU.
   RSS start / middle / end and its least-squares slope in MiB per minute.
   Memory is "flat" when the last RSS sample is at most 1.1 x the peak of the
   window's first half (the same check as live_scale.py) and the slope over
   the second half is under 1 MiB/min. That RSS includes what the benchmark
   itself keeps (each press, frame time and lag sample: about 0.5 MiB/min at
   8 presses/s); its size is printed beside it, and its rate is taken off the
   second-half slope before that slope is compared with 1 MiB/min.
4. Diagnostics: the time spent in ConsoleApp.draw (the 4 Hz batch apply), the
   asyncio event loop's lag (a task that sleeps 10 ms), with --trace-memory where
   the Python heap grew over the window's second half (tracemalloc), and with --profile a
   cProfile of the console's thread over the window (top functions printed).

Prints a summary with PASS/FAIL against the targets (p95 < 100 ms, memory
flat) and writes every number to bench/out/console_responsiveness.json
(--json). Every process it started (daemon, guardian, agents) is stopped at the
end, also on Ctrl-C or an error. Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import signal
import sys
import threading
import time
import tracemalloc
import unicodedata
from collections.abc import Callable
from itertools import pairwise
from math import isnan
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, ROOT, BenchDaemon, leftovers, pct, verdict_line, wait_for

from textual import events
from textual._compositor import Compositor, CompositorUpdate
from textual.keys import _get_unicode_name_from_key

from loopwarden.runtime.client import Client
from loopwarden.widgets.app import ConsoleApp, Sessions
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.session_table import SORTS

MiB = 1 << 20
TARGET_P95_MS = 100.0
PRESS_TIMEOUT = 10.0
# a `g` is always followed by `escape`; down/up turn around at the ends of the table
PLAN = ["down", "s", "g", "up", "down", "s", "g", "up"]


class TimedConsole(ConsoleApp):
    """The real console; records its frames, how long `draw` takes, and whether a pending probe holds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames = 0
        self.frame_bytes = 0
        self.frame_cost: list[float] = []   # seconds spent turning an update into terminal bytes
        self.draw_times: list[float] = []
        self.probe: Callable[[Any], bool] | None = None
        self.probe_hit: float | None = None

    def draw(self) -> None:
        t = time.perf_counter()
        super().draw()
        self.draw_times.append(time.perf_counter() - t)

    def _display(self, screen: Any, renderable: Any) -> None:
        counted = renderable is not None and not self._batch_count
        if counted and isinstance(renderable, CompositorUpdate):
            t = time.perf_counter()
            self.frame_bytes += len(renderable.render_segments(self.console))  # what a terminal would get
            self.frame_cost.append(time.perf_counter() - t)
        super()._display(screen, renderable)
        if counted:
            self.frames += 1
            probe = self.probe
            if probe is not None and probe(screen):
                self.probe_hit = time.perf_counter()
                self.probe = None


def key_event(app: ConsoleApp, key: str) -> None:
    """Post a key to the driver exactly as Pilot.press does (textual.app.App._press_keys), minus its waits."""
    try:
        char: str | None = unicodedata.lookup(_get_unicode_name_from_key(key))
    except KeyError:
        char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(event)


def rows_shown(app: ConsoleApp) -> int:
    try:
        return app.table.row_count
    except Exception:  # noqa: BLE001 - the sessions screen is not composed yet
        return 0


def is_sorted(app: ConsoleApp, sort_by: str) -> bool:
    order = SORTS[sort_by]
    keys = []
    for row in app.table.ordered_rows:
        snap = app.snapshots.get(str(row.key.value))
        if snap is None:
            return False
        keys.append(order(snap))
    return all(a <= b for a, b in pairwise(keys))


class Sampler(threading.Thread):
    """Once a second: this process (and its main and feed threads), the daemon, the `list` events counters."""

    def __init__(self, d: BenchDaemon, feed_tid: int | None, every: float = 1.0) -> None:
        super().__init__(daemon=True, name="bench-sampler")
        self.d, self.every, self.feed_tid = d, every, feed_tid
        self.me = psutil.Process()
        self.main_tid = threading.main_thread().native_id
        self.samples: list[dict[str, Any]] = []
        self.halt = threading.Event()
        self.client = Client.connect(d.paths, autostart=False, name="bench-sampler")

    def _threads(self) -> dict[int, float]:
        try:
            return {t.id: t.user_time + t.system_time for t in self.me.threads()}
        except psutil.Error:
            return {}

    def run(self) -> None:
        assert self.d.ps is not None
        self.me.cpu_percent(None)
        try:
            while not self.halt.is_set():
                t = time.monotonic()
                dt = self.d.ps.cpu_times()
                snaps = self.client.request("list")
                live = [s for s in snaps if s.get("state") not in FINAL]
                threads = self._threads()
                self.samples.append({
                    "t": t, "cpu": self.me.cpu_percent(None), "rss": self.me.memory_info().rss,
                    "cpu_main": threads.get(self.main_tid or -1, 0.0),
                    "cpu_feed": threads.get(self.feed_tid or -1, 0.0),
                    "cpu_proc": sum(threads.values()),
                    "daemon_cpu": dt.user + dt.system, "daemon_rss": self.d.ps.memory_info().rss,
                    "events": sum(int(s.get("events") or 0) for s in snaps), "live": len(live),
                    "dropped": sum(int(s.get("dropped_events") or 0) for s in snaps),
                    "load": os.getloadavg()[0],
                })
                self.halt.wait(max(0.0, self.every - (time.monotonic() - t)))
        except Exception as exc:  # noqa: BLE001 - the daemon went away: the summary says so
            self.samples.append({"t": time.monotonic(), "error": repr(exc)})
        finally:
            self.client.close()


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes held by nested lists and dicts of numbers and strings, each object counted once:
    what the benchmark itself recorded (shared keys and interned strings are not counted again)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list):
        size += sum(deep_size(v, seen) for v in obj)
    return size


class MemoryTrace:
    """--trace-memory: what the Python heap gained over the second half of the window, by allocation site."""

    def __init__(self, mid: float) -> None:
        self.mid = mid
        self.first: tracemalloc.Snapshot | None = None
        tracemalloc.start(4)  # deeper tracebacks slow the console too much to stand for it

    def tick(self) -> None:
        if self.first is None and time.monotonic() >= self.mid:
            gc.collect()
            self.first = tracemalloc.take_snapshot()

    def report(self, top: int = 10) -> str:
        gc.collect()
        last = tracemalloc.take_snapshot()
        tracemalloc.stop()
        if self.first is None:
            return "the window ended before its middle"
        keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
        stats = last.filter_traces(keep).compare_to(self.first.filter_traces(keep), "traceback")
        lines = [f"Python heap over the 2nd half: {sum(s.size_diff for s in stats) / 1024:+,.0f} KiB"]
        for stat in stats[:top]:
            lines.append(f"{stat.size_diff / 1024:+,.0f} KiB in {stat.count_diff:+,} blocks")
            lines += [f"    {line}" for line in stat.traceback.format()]
        return "\n".join(lines)


async def loop_lag(stop: asyncio.Event, out: list[float]) -> None:
    """How late a 10 ms sleep on the console's event loop wakes up."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.01)
        out.append(time.perf_counter() - t - 0.01)


def time_compositor(into: list[float]) -> Callable[[], None]:
    """Diagnostics: time Textual's Compositor.render_update (composing the widgets' lines into an update)."""
    original = Compositor.render_update

    def render_update(self: Compositor, *a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(self, *a, **kw)
        finally:
            into.append(time.perf_counter() - t)

    Compositor.render_update = render_update  # type: ignore[method-assign]

    def restore() -> None:
        Compositor.render_update = original  # type: ignore[method-assign]
    return restore


async def console_phase(d: BenchDaemon, args: argparse.Namespace, n: int) -> dict[str, Any]:
    app = TimedConsole(d.paths, autostart=False)
    out: dict[str, Any] = {"presses": []}
    composes: list[float] = []
    restore = time_compositor(composes)
    try:
        return await _console_phase(app, d, args, n, out, composes)
    except Exception as exc:
        if "samples" not in out:
            raise
        out["exit_error"] = repr(exc)  # the window was measured; the console failed on its way out
        return out
    finally:
        restore()


async def _console_phase(app: TimedConsole, d: BenchDaemon, args: argparse.Namespace, n: int,
                         out: dict[str, Any], composes: list[float]) -> dict[str, Any]:
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await _rows_shown(app, n)
        await asyncio.sleep(args.warmup)
        feed_thread = getattr(app.feed, "_thread", None)
        sampler = Sampler(d, getattr(feed_thread, "native_id", None))
        stop_lag = asyncio.Event()
        lags: list[float] = []
        lag_task = asyncio.create_task(loop_lag(stop_lag, lags))
        app.draw_times.clear()
        app.frame_cost.clear()
        composes.clear()
        frames0, bytes0 = app.frames, app.frame_bytes
        profiler = cProfile.Profile() if args.profile else None
        sampler.start()
        await asyncio.sleep(0.05)
        t_start = time.monotonic()
        end = t_start + args.seconds
        i = 0
        memory = MemoryTrace(t_start + args.seconds / 2) if args.trace_memory else None
        if profiler:
            profiler.enable()
        try:
            while time.monotonic() < end:
                key, i = _next_key(app, i)
                out["presses"].append(await _timed_press(app, pilot, args, key))
                if memory:
                    memory.tick()
                await asyncio.sleep(args.gap)
        finally:
            if profiler:
                profiler.disable()
            t_stop = time.monotonic()
            stop_lag.set()
            await lag_task
            sampler.halt.set()
            await asyncio.to_thread(sampler.join, 10)
        out["records_bytes"] = deep_size([out["presses"], lags, app.draw_times, app.frame_cost, composes,
                                          sampler.samples])
        out.update(window_s=t_stop - t_start, samples=sampler.samples, lags=lags, draw_times=list(app.draw_times),
                   frames=app.frames - frames0, frame_bytes=app.frame_bytes - bytes0,
                   frame_cost=list(app.frame_cost), composes=list(composes))
        if memory:
            out["memory_growth"] = memory.report()
        if profiler:
            out["profile"] = _profile(profiler, args)
    return out


async def _rows_shown(app: TimedConsole, n: int) -> None:
    """Wait until the console shows N rows (60 s at most)."""
    deadline = time.monotonic() + 60
    while not (app.feed.ready and rows_shown(app) >= n):
        if app.feed.error or time.monotonic() > deadline:
            raise RuntimeError(f"the console never showed {n} rows: {app.feed.error or 'timeout'}")
        await asyncio.sleep(0.1)  # not pilot.pause: its wait for the screen can time out under this load


def _next_key(app: TimedConsole, i: int) -> tuple[str, int]:
    """The next key of PLAN (escape on the gates queue; up at the last row, down at the first), and the next i."""
    if isinstance(app.screen, GatesQueue):
        return "escape", i
    key = PLAN[i % len(PLAN)]
    table = app.table
    if key == "down" and table.cursor_row >= table.row_count - 1:
        key = "up"
    elif key == "up" and table.cursor_row <= 0:
        key = "down"
    return key, i + 1


def _expected(app: TimedConsole, key: str) -> Callable[[], bool]:
    """What the console shows once `key` has taken effect."""
    table = app.table
    before = table.selected_id()
    sort_next = list(SORTS)[(list(SORTS).index(table.sort_by) + 1) % len(SORTS)]
    if key in ("down", "up"):
        return lambda: app.table.selected_id() != before
    if key == "s":
        return lambda: app.table.sort_by == sort_next and is_sorted(app, sort_next)
    if key == "g":
        return lambda: isinstance(app.screen, GatesQueue)
    return lambda: isinstance(app.screen, Sessions)


async def _timed_press(app: TimedConsole, pilot: Any, args: argparse.Namespace, key: str) -> dict[str, Any]:
    """Press `key`; when its effect held (state) and when a frame showing it was written (screen)."""
    table = app.table
    context = {"row": table.cursor_row, "rows": table.row_count, "sort": table.sort_by,
               "screen": type(app.screen).__name__, "focus": type(app.focused).__name__}
    state = _expected(app, key)
    want_screen = GatesQueue if key == "g" else Sessions

    def probe(screen: Any, state: Callable[[], bool] = state, want: type = want_screen) -> bool:
        return isinstance(screen, want) and screen is app.screen and state()

    app.probe_hit = None
    app.probe = probe
    t0 = time.perf_counter()
    if args.via == "pilot":
        await pilot.press(key)
    else:
        key_event(app, key)
    t_state = t_frame = None
    give_up = t0 + PRESS_TIMEOUT
    while time.perf_counter() < give_up:
        now = time.perf_counter()
        if t_state is None and state():
            t_state = now
        if app.probe_hit is not None:
            t_frame = app.probe_hit
            if t_state is None or t_state > t_frame:  # the frame came first, within one poll
                t_state = t_frame
            break
        await asyncio.sleep(0.001)
    app.probe = None
    return {"key": key, "t": t0, "state_ms": None if t_state is None else (t_state - t0) * 1000,
            "screen_ms": None if t_frame is None else (t_frame - t0) * 1000, **context}


def _profile(profiler: cProfile.Profile, args: argparse.Namespace) -> str:
    """The profile's top functions by own and by cumulative time; the whole profile beside the JSON."""
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    profiler.dump_stats(str(Path(args.json).with_suffix(".prof")))
    return buf.getvalue()


def load_only(d: BenchDaemon, args: argparse.Namespace) -> dict[str, Any]:
    """--no-console: the same load and sampling without the console, to see what the daemon does alone."""
    sampler = Sampler(d, None)
    time.sleep(args.warmup)
    sampler.start()
    t0 = time.monotonic()
    time.sleep(args.seconds)
    sampler.halt.set()
    sampler.join(10)
    return {"presses": [], "window_s": time.monotonic() - t0, "samples": sampler.samples, "lags": [],
            "draw_times": [], "frames": 0, "frame_bytes": 0, "frame_cost": [], "composes": []}


def slope_mib_per_min(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if not var:
        return float("nan")
    return sum((t - mt) * (r - mr) for t, r in points) / var * 60 / MiB


def agents_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    n = args.sessions
    res: dict[str, Any] = {"sessions": n, "rate": args.rate, "offered": n * args.rate, "via": args.via,
                           "gap": args.gap, "cores": os.cpu_count(), "load_before": os.getloadavg(),
                           "size": [160, 48], "seconds": args.seconds}
    d = BenchDaemon("console", keep=args.keep)
    d.start()
    os.environ["LOOPWARDEN_HOME"] = str(d.home)  # anything reading the environment sees the throw-away daemon
    os.environ.pop("LOOPWARDEN_CONFIG", None)
    try:
        command = [PY, str(AGENTS / "paced_flood.py"), "--rate", f"{args.rate:g}"]
        t0 = time.monotonic()
        sids = [d.run(command, sets=["limits.max_runtime=0"], name=f"paced{i}") for i in range(n)]
        wanted = set(sids)
        pids: list[int] = []

        def running() -> bool:
            snaps = [s for s in d.request("list") if s["id"] in wanted]
            for s in snaps:
                if s.get("pid"):
                    d.session_pids.add(int(s["pid"]))
            bad = [s for s in snaps if s.get("state") in FINAL]
            if bad:
                raise RuntimeError(f"session {bad[0]['id']} ended early: {bad[0].get('state')} "
                                   f"{bad[0].get('termination')}")
            ok = len(snaps) == n and all(s.get("state") == "running" and s.get("pid") for s in snaps)
            if ok:
                pids[:] = [int(s["pid"]) for s in snaps]
            return ok

        wait_for(running, 120, f"{n} paced sessions to run", interval=0.5)
        res["launch_s"] = time.monotonic() - t0
        agents0 = agents_cpu(pids)
        console = asyncio.run(console_phase(d, args, n)) if not args.no_console else load_only(d, args)
        agents1 = agents_cpu(pids)
        res.update(console)
        res["agents_cpu_pct"] = 100 * (agents1 - agents0) / max(console["window_s"], 1e-9)
        snaps = [s for s in d.request("list") if s["id"] in wanted]
        res["final_states"] = {st: sum(1 for s in snaps if s.get("state") == st) for st in {s.get("state")
                                                                                            for s in snaps}}
        res["terminations"] = sorted({str(s.get("termination")) for s in snaps if s.get("termination")})
        res["verdicts"] = sum(1 for s in snaps if s.get("last_verdict"))
        res["load_after"] = os.getloadavg()
    finally:
        d.close()
    res["leftovers"] = leftovers(d)
    return res


def dist(values: list[float], scale: float = 1.0) -> dict[str, float]:
    """p50 / p95 / p99 / max (nearest rank) and the count, times `scale`."""
    return {"p50": pct(values, 0.50) * scale, "p95": pct(values, 0.95) * scale, "p99": pct(values, 0.99) * scale,
            "max": max(values) * scale if values else float("nan"), "count": len(values)}


def fmt(d: dict[str, float], p99: bool = True) -> str:
    return (f"p50 {d['p50']:.1f}  p95 {d['p95']:.1f}" + (f"  p99 {d['p99']:.1f}" if p99 else "")
            + f"  max {d['max']:.1f}")


def summarize(res: dict[str, Any]) -> list[str]:
    """Print the table; return the PASS/FAIL lines. Adds the derived numbers to `res` (for the JSON)."""
    presses = res["presses"]
    window = res["window_s"]
    reached = [p["screen_ms"] for p in presses if p["screen_ms"] is not None]
    timeouts = len(presses) - len(reached)
    # a press that never reached the screen counts as the timeout, so it cannot flatter the percentiles
    res["screen_ms"] = dist(reached + [PRESS_TIMEOUT * 1000] * timeouts)
    res["screen_ms"]["timeouts"] = timeouts
    res["state_ms"] = dist([p["state_ms"] for p in presses if p["state_ms"] is not None])
    res["per_key"] = {k: dist([p["screen_ms"] for p in presses if p["key"] == k and p["screen_ms"] is not None])
                      for k in ("down", "up", "s", "g", "escape")}
    samples = [s for s in res["samples"] if "error" not in s]
    errors = [s["error"] for s in res["samples"] if "error" in s]
    title = "console responsiveness" if presses else "load alone (no console)"
    print(f"\n{title}: {res['sessions']} sessions x paced_flood {res['rate']:g} ev/s (offered "
          f"{res['offered']:,.0f} ev/s)" + (f", console 160x48 headless, keys via {res['via']}" if presses else ""))
    print(f"  machine: {res['cores']} cores, load average {res['load_before'][0]:.2f} before, "
          f"{res['load_after'][0]:.2f} / {res['load_after'][1]:.2f} (1/5 min) after; window {window:.1f} s")
    rows: list[tuple[str, str]] = []
    if presses:
        counts = ", ".join(f"{k} {v['count']}" for k, v in res["per_key"].items())
        rows += [
            ("presses (on screen / timed out)", f"{len(reached)} / {timeouts}  ({counts})"),
            ("key -> screen (frame) ms", fmt(res["screen_ms"])),
            ("key -> widget state ms", fmt(res["state_ms"])),
            ("  by key: key -> screen ms", "  ".join(f"{k} {v['p50']:.0f}/{v['p95']:.0f}/{v['max']:.0f}"
                                                    for k, v in res["per_key"].items()) + "  (p50/p95/max)"),
        ]
    flat = False
    if samples:
        t0 = samples[0]["t"]
        span = max(samples[-1]["t"] - t0, 1e-9)
        cpu = [s["cpu"] for s in samples[1:]] or [float("nan")]
        rss = [(s["t"] - t0, s["rss"]) for s in samples]
        first_half = [r for t, r in rss if t <= span / 2] or [rss[0][1]]
        second_half = [(t, r) for t, r in rss if t > span / 2] or rss[-1:]
        d_rss = [s["daemon_rss"] for s in samples]
        per_s = [(b["events"] - a["events"]) / (b["t"] - a["t"]) for a, b in pairwise(samples) if b["t"] > a["t"]]

        def share(key: str) -> float:
            return 100 * (samples[-1][key] - samples[0][key]) / span

        res.update(cpu_mean=sum(cpu) / len(cpu), cpu_max=max(cpu), cpu_main_pct=share("cpu_main"),
                   cpu_feed_pct=share("cpu_feed"), rss_start=rss[0][1], rss_mid=rss[len(rss) // 2][1],
                   rss_end=rss[-1][1], rss_first_half_peak=max(first_half), rss_slope_mib_min=slope_mib_per_min(rss),
                   rss_slope_2nd_half=slope_mib_per_min(second_half), daemon_cpu_pct=share("daemon_cpu"),
                   daemon_rss=[d_rss[0], d_rss[len(d_rss) // 2], d_rss[-1]],
                   events_per_s=(samples[-1]["events"] - samples[0]["events"]) / span,
                   events_per_s_min=min(per_s or [0]), events_per_s_max=max(per_s or [0]),
                   dropped_events=samples[-1]["dropped"])
        # the benchmark's own records grow steadily with the window: their rate is taken off the slope
        res["records_mib_min"] = res.get("records_bytes", 0) / MiB / span * 60
        res["rss_slope_console"] = res["rss_slope_2nd_half"] - res["records_mib_min"]
        flat = res["rss_end"] <= 1.10 * res["rss_first_half_peak"] and (
            isnan(res["rss_slope_console"]) or res["rss_slope_console"] < 1.0)
        rows += [
            ("this process CPU (console + bench)", f"mean {res['cpu_mean']:.0f}% of one core, max {res['cpu_max']:.0f}%"
                                                   f"  (main thread {res['cpu_main_pct']:.0f}%, feed thread "
                                                   f"{res['cpu_feed_pct']:.0f}%)"),
            ("this process RSS start/mid/end", f"{res['rss_start'] / MiB:.1f} / {res['rss_mid'] / MiB:.1f} / "
                                               f"{res['rss_end'] / MiB:.1f} MiB; slope "
                                               f"{res['rss_slope_mib_min']:+.2f} MiB/min (2nd half "
                                               f"{res['rss_slope_2nd_half']:+.2f})"),
        ]
        if res.get("records_bytes"):
            rows.append(("  of which the benchmark's records", f"{res['records_bytes'] / MiB:.1f} MiB by the end "
                         f"({res['records_bytes'] / MiB / span * 60:.2f} MiB/min): each press, frame and lag "
                         "sample it kept"))
        rows += [
            ("daemon CPU / RSS start/mid/end", f"{res['daemon_cpu_pct']:.0f}% of one core; "
                                               + " / ".join(f"{r / MiB:.1f}" for r in res["daemon_rss"]) + " MiB"),
            ("agents CPU (all)", f"{res['agents_cpu_pct']:.0f}% of one core"),
            ("events judged + stored / s (list)", f"{res['events_per_s']:,.0f} of {res['offered']:,.0f} offered "
                                                  f"({100 * res['events_per_s'] / res['offered']:.0f}%); each second "
                                                  f"{res['events_per_s_min']:,.0f} .. {res['events_per_s_max']:,.0f}"
                                                  f"; dropped_events {res['dropped_events']}"),
        ]
    if presses:
        res["draw_ms"] = dist(res["draw_times"], 1000)
        res["compose_ms"] = dist(res["composes"], 1000)
        res["loop_lag_ms"] = dist(res["lags"], 1000)
        rows += [
            ("ConsoleApp.draw ms (4 Hz)", f"{fmt(res['draw_ms'], False)}  ({len(res['draw_times'])}, "
                                          f"{100 * sum(res['draw_times']) / window:.1f}% of the window)"),
            ("compositor render_update ms", f"{fmt(res['compose_ms'], False)}  ({len(res['composes'])}, "
                                            f"{100 * sum(res['composes']) / window:.1f}% of the window)"),
            ("frames, bytes a terminal would get", f"{res['frames']} ({res['frames'] / window:.1f}/s), "
                                                  f"{res['frame_bytes'] / window / 1024:.0f} KiB/s; to bytes p95 "
                                                  f"{pct(res['frame_cost'], 0.95) * 1000:.1f} ms"),
            ("event loop lag (10 ms sleep) ms", fmt(res["loop_lag_ms"])),
        ]
    rows.append(("sessions at the end", f"{res['final_states']} {' '.join(res['terminations'])}"))
    for k, v in rows:
        print(f"  {k:<38}{v}")
    if errors:
        print(f"  the sampler stopped early: {errors[0]}")
    if res.get("exit_error"):
        print(f"  the console raised on its way out: {res['exit_error']}")
    if res.get("profile"):
        print("\ncProfile of the console's thread over the window:\n" + res["profile"])
    if res.get("memory_growth"):
        print("\ntracemalloc (--trace-memory):\n" + res["memory_growth"])

    lines: list[str] = []
    p95 = res["screen_ms"]["p95"]
    res["pass_p95"], res["pass_flat"] = bool(presses) and p95 < TARGET_P95_MS, flat
    if presses:
        lines.append(verdict_line(p95 < TARGET_P95_MS, f"key press -> screen p95 {p95:.1f} ms < {TARGET_P95_MS:.0f} ms"
                                                        f" ({len(presses)} presses, {timeouts} timed out)"))
    else:
        lines.append("(no console: --no-console measures the load alone)")
    if samples:
        lines.append(verdict_line(flat, f"{'console' if presses else 'bench'} RSS flat: end "
                                        f"{res['rss_end'] / MiB:.1f} <= 1.1 x 1st-half peak "
                                        f"{res['rss_first_half_peak'] / MiB:.1f} MiB and 2nd-half slope "
                                        f"{res['rss_slope_2nd_half']:+.2f} less the records' "
                                        f"{res['records_mib_min']:.2f} = {res['rss_slope_console']:+.2f} < 1 MiB/min"))
        keeps = res["events_per_s"] >= 0.95 * res["offered"]
        lines.append(verdict_line(keeps, f"(load) the daemon keeps up: {res['events_per_s']:,.0f} of "
                                         f"{res['offered']:,.0f} events/s judged and stored"))
    else:
        lines.append(verdict_line(False, "no resource samples"))
    lines.append(verdict_line(not res["leftovers"], "no leftover processes"
                              + (f": {', '.join(res['leftovers'])}" if res["leftovers"] else "")))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120.0, help="measurement window (default 120)")
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--rate", type=float, default=1000.0, help="events per second per session (default 1000)")
    ap.add_argument("--via", choices=("driver", "pilot"), default="driver",
                    help="send keys straight to the driver (default) or through await pilot.press")
    ap.add_argument("--gap", type=float, default=0.1, help="pause after each press was seen (default 0.1 s)")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds with the console up before measuring")
    ap.add_argument("--no-console", action="store_true", help="the load alone, without the console (a baseline)")
    ap.add_argument("--profile", action="store_true", help="cProfile the console's thread over the window")
    ap.add_argument("--trace-memory", action="store_true",
                    help="tracemalloc: print where the Python heap grew over the 2nd half (slows the console)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "console_responsiveness.json"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME")
    args = ap.parse_args()
    print(f"console responsiveness: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"{args.sessions} sessions x {args.rate:g} ev/s, window {args.seconds:g} s")

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through run()'s finally: the daemon and agents are stopped

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    try:
        res = run(args)
    except KeyboardInterrupt:
        print("interrupted: the daemon and every session were stopped")
        return 0
    lines = summarize(res)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    res["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    res.pop("profile", None)
    path.write_text(json.dumps(res, indent=1, default=str))
    print()
    for line in lines:
        print(line)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
