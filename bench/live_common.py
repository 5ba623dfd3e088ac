"""Shared pieces of the live benchmarks: a throw-away daemon and leftover-process checks.

Every benchmark runs its own `loopwarden serve` under a fresh temporary
LOOPWARDEN_HOME (socket, database, spill files), so the default profile is never
touched, and stops it at the end, even on error.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from loopwarden.runtime.client import Client
from loopwarden.paths import Paths, default_paths

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "tests" / "agents"
PY = sys.executable
FINAL = ("exited", "terminated", "lost")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class RssSampler(threading.Thread):
    """Samples a process's RSS every `every` seconds until stopped: `.samples` and `.peak`."""

    def __init__(self, proc: psutil.Process, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.proc, self.every = proc, every
        self.samples: list[tuple[float, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.samples.append((time.monotonic(), self.proc.memory_info().rss))
            except psutil.Error:
                return
            self.halt.wait(self.every)

    def stop(self) -> None:
        self.halt.set()
        self.join(5)

    @property
    def peak(self) -> int:
        return max((rss for _, rss in self.samples), default=0)


ENGINE_CODE = ("import loopwarden; c = getattr(loopwarden, 'compiled', None); "
               "print(c.describe() if c else 'engine in pure Python (a checkout from before the compiled engine)')")


def engine_of(checkout: Path | None = None) -> str:
    """Which engine a daemon served from `checkout` (None: this one) runs, compiled or Python, as its
    `loopwarden --version` says (a new interpreter, run from there as BenchDaemon runs it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    done = subprocess.run([PY, "-c", ENGINE_CODE], env=env, cwd=checkout, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


def pct(values: list[float], p: float) -> float:
    """The same nearest-rank percentile echo_handshake.py prints."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


class BenchDaemon:
    """`loopwarden serve` in its own temporary LOOPWARDEN_HOME; use as a context manager."""

    def __init__(self, label: str = "bench", keep: bool = False, serve: list[str] | None = None,
                 checkout: Path | None = None, kept: bool = False) -> None:
        """`checkout`: serve that directory's loopwarden (another version, for a before figure) instead of
        this one's; `python -m` imports the package of its working directory first, so it runs from there."""
        self.home = Path(tempfile.mkdtemp(prefix=f"lw-{label}-"))
        self.keep = keep
        self.env = {**os.environ, "LOOPWARDEN_HOME": str(self.home)}
        self.env.pop("LOOPWARDEN_CONFIG", None)
        self.cwd: Path | None = None
        if checkout is not None:
            self.cwd = checkout
            self.env.update(PYTHONPATH=str(checkout), PYTHONDONTWRITEBYTECODE="1")
        self.paths: Paths = default_paths(self.env)
        # its agents held by the keeper (daemon.keep_agents, the default), or read from their pipes by the daemon
        self.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.paths.config_file.write_text(f"[daemon]\nkeep_agents = {'true' if kept else 'false'}\n")
        self.serve = serve or [PY, "-m", "loopwarden", "serve"]
        self.proc: subprocess.Popen[bytes] | None = None
        self.ps: psutil.Process | None = None
        self.guardian: psutil.Process | None = None
        self.session_pids: set[int] = set()
        self._client: Client | None = None

    # ---- lifecycle ---------------------------------------------------------
    def __enter__(self) -> BenchDaemon:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        log = open(self.home / "daemon.out", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(self.serve, env=self.env, stdout=log, stderr=log, cwd=self.cwd,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        wait_for(self._connectable, 20, "the daemon's socket")
        self.ps = psutil.Process(self.proc.pid)
        kids = self.ps.children()
        self.guardian = kids[0] if kids else None

    def _connectable(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"the daemon exited with {self.proc.returncode}: {self.log_tail()}")
        try:
            Client.connect(self.paths, autostart=False, name="bench").close()
            return True
        except Exception:  # noqa: BLE001 - whatever the reason, not connectable yet
            return False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join((self.home / "daemon.out").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def client(self) -> Client:
        if self._client is None:
            self._client = Client.connect(self.paths, autostart=False, name="bench")
        return self._client

    def close_client(self) -> None:
        """Forget the connection (its daemon was replaced): the next request connects to the one now serving."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def request(self, op: str, **fields: Any) -> Any:
        return self.client().request(op, **fields)

    def close(self) -> None:
        """Kill every live session, stop the daemon (SIGTERM, then SIGKILL), kill anything left."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                self._kill_sessions()
        finally:
            if self._client is not None:
                self._client.close()
                self._client = None
            self._stop_daemon()
            for pgid in list(self.session_pids):  # last resort: nothing of ours may outlive the benchmark
                if ours(pgid):
                    try:
                        os.killpg(pgid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            if not self.keep:
                shutil.rmtree(self.home, ignore_errors=True)

    def _kill_sessions(self) -> None:
        """A kill for every live session, their process groups noted (best effort: this is cleanup)."""
        try:
            for snap in self.request("list"):
                if snap.get("pid"):
                    self.session_pids.add(int(snap["pid"]))
                if snap.get("state") not in FINAL:
                    try:
                        self.request("kill", session=snap["id"], note="benchmark cleanup")
                    except Exception:  # noqa: BLE001 - cleanup is best effort
                        pass
        except Exception:  # noqa: BLE001 - cleanup is best effort
            pass

    def _stop_daemon(self) -> None:
        """SIGTERM to the daemon, SIGKILL after 30 s; then wait for its guardian."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.guardian is not None:
            try:
                self.guardian.wait(10)
            except (psutil.Error, psutil.TimeoutExpired):
                pass

    # ---- sessions ------------------------------------------------------------
    def run(self, command: list[str], *, adapter: str = "native", sets: Iterable[str] = (),
            name: str | None = None) -> str:
        spec = {"command": command, "adapter": adapter, "sets": list(sets), "name": name or Path(command[-1]).name}
        return self.request("run", spec=spec)["id"]

    def status(self, sid: str) -> dict[str, Any]:
        snap = self.request("status", session=sid)
        if snap.get("pid"):
            self.session_pids.add(int(snap["pid"]))
        return snap

    def wait_final(self, sids: Iterable[str], timeout: float, interval: float = 0.1) -> dict[str, dict[str, Any]]:
        remaining = set(sids)
        done: dict[str, dict[str, Any]] = {}

        def check() -> bool:
            for sid in list(remaining):
                snap = self.status(sid)
                if snap.get("state") in FINAL:
                    done[sid] = snap
                    remaining.discard(sid)
            return not remaining

        wait_for(check, timeout, f"{len(remaining)} sessions to end", interval)
        return done

    def logs(self, sid: str) -> list[dict[str, Any]]:
        """Every stored event of a session (the `logs` op, paged)."""
        out: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.request("logs", session=sid, after=after, limit=10_000)["events"]
            if not page:
                return out
            out += page
            after = page[-1]["id"]

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.paths.database}?mode=ro", uri=True)


def group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return out


def ours(pgid: int) -> bool:
    """Is a live process group one of the benchmark's agents (not a reused pid)?"""
    for proc in group_members(pgid):
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if str(AGENTS) in cmd or "time.sleep(600)" in cmd:
            return True
    return False


def dead(pid: int) -> bool:
    """Gone, or a zombie waiting for its parent (or pid 1) to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] in (b"Z", b"X")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def leftovers(daemon: BenchDaemon, extra_pids: Iterable[int] = ()) -> list[str]:
    """Processes that should be gone after close(): the daemon, its guardian, session groups."""
    found = []
    for label, proc in (("daemon", daemon.ps), ("guardian", daemon.guardian)):
        if proc is not None:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(f"{label} {proc.pid}")
            except psutil.Error:
                pass
    for pgid in sorted(daemon.session_pids):
        if group_alive(pgid):
            found.append(f"process group {pgid}")
    for pid in extra_pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                found.append(f"pid {pid}")
        except psutil.Error:
            pass
    return found


def verdict_line(ok: bool, text: str) -> str:
    return f"{'PASS' if ok else 'FAIL'}: {text}"
