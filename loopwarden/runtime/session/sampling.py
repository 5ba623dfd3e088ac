"""A live agent's resources (CPU, memory, processes, open files), sampled for the console and its limits."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psutil

from ...supervisor.events import ResourceSample
from ...supervisor.health import SessionHealth
from ...supervisor.verdicts import Verdict
from ..procfs import CLOCK_TICKS, PAGE_BYTES, STATUS, ProcTable, open_fds
from .journal import Journal
from .process import AgentProcess
from .spec import Resources
from .tasks import Wake

Measure = tuple[float, int, int, list[dict[str, Any]]]  # CPU %, RSS bytes, open files, the process tree


class Sampler:
    """Measures the session's process tree each round of the daemon's sampler and judges the resource limits;
    their verdicts are left for the ticker to carry out (a stop's grace must not hold up the sampler)."""

    def __init__(self, process: AgentProcess, health: SessionHealth, journal: Journal, wake: Wake,
                 clock: Callable[[], float]) -> None:
        self.process = process
        self.health = health
        self.journal = journal
        self.wake = wake
        self.clock = clock
        self.resources = Resources()
        self.verdicts: list[Verdict] = []  # verdicts on resources, for the ticker to carry out
        self._psutil: psutil.Process | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._table: ProcTable | None = None  # the table `observe` was given, for the next `sample`
        self._ticks: dict[int, tuple[int, int]] = {}  # pid -> (start, CPU ticks) at the previous sample
        self._sampled_at = time.monotonic()

    def started(self, pid: int) -> None:
        try:
            self._psutil = psutil.Process(pid)
        except psutil.Error:
            self._psutil = None

    def observe(self, table: ProcTable) -> None:
        """`sample` measures from `table` when it is given this table's children next."""
        self._table = table

    def take_verdicts(self) -> list[Verdict]:
        verdicts, self.verdicts = self.verdicts, []
        return verdicts

    def sample(self, children: dict[int, list[int]] | None = None) -> None:
        """Refresh CPU, memory and the process tree, and judge the resource limits.

        `children` maps a pid to its children's pids, built once per round for all sessions, so sampling never
        rescans /proc per session; when it is the map of the table `observe` was just given, the numbers come from
        that table too (no process is read again)."""
        table, self._table = self._table, None
        if table is not None and children is table.children:
            cpu, rss, files, tree = self._measure(table)
        else:
            cpu, rss, files, tree = self._measure_psutil(children)
        old = self.resources
        self.resources = Resources(cpu, rss, len(tree), files, tree[:50])
        if abs(old.cpu_percent - cpu) >= 0.5 or abs(old.rss - rss) > old.rss // 100 or old.processes != len(tree):
            self.journal.resources_moved()
        limits = self.health.config.limits
        if limits.max_rss or limits.max_processes:
            sample = ResourceSample(cpu_percent=cpu, rss=rss, processes=len(tree), open_files=files)
            now = self.clock()
            verdicts = self.health.observe(sample, now)
            self.journal.record(verdicts, now)
            if verdicts:  # carried out by the ticker: a stop's grace must not hold up the daemon's sampler
                self.verdicts.extend(verdicts)
                self.wake.set()

    def _measure(self, table: ProcTable) -> Measure:
        """The session's tree as `table` shows it; CPU from the ticks since the previous table."""
        root = self.process.pid
        assert root is not None
        pids = tree_pids(root, table.children)
        now = time.monotonic()
        elapsed, self._sampled_at = now - self._sampled_at, now
        before, ticks = self._ticks, {}
        cpu, rss, files = 0.0, 0, 0
        count_files = bool(self.health.config.limits.max_processes) or len(pids) < 8
        tree = []
        for pid in pids:
            info = table.procs.get(pid)
            if info is None:
                continue
            ticks[pid] = (info.start, info.cpu)
            was = before.get(pid)
            c = (100.0 * (info.cpu - was[1]) / CLOCK_TICKS / elapsed
                 if was is not None and was[0] == info.start and elapsed > 0 else 0.0)
            m = info.rss * PAGE_BYTES
            tree.append({"pid": pid, "ppid": info.ppid, "name": info.comm, "cpu": c, "rss": m,
                         "status": STATUS.get(info.state, info.state)})
            cpu += c
            rss += m
            files += open_fds(pid) if count_files else 0
        self._ticks = ticks
        return cpu, rss, files, tree

    def _measure_psutil(self, children: dict[int, list[int]] | None) -> Measure:
        root = self.process.pid
        assert root is not None
        pids = tree_pids(root, children) if children is not None else _tree_from_psutil(self._psutil)
        cpu = 0.0
        rss = files = 0
        tree = []
        cache = self._procs
        count_files = bool(self.health.config.limits.max_processes) or len(pids) < 8
        for pid in pids:
            proc = cache.get(pid)
            try:
                if proc is None:
                    proc = cache[pid] = psutil.Process(pid)
                with proc.oneshot():  # one read of /proc/PID/stat (+ statm) for all of these
                    c = proc.cpu_percent(None)
                    m = proc.memory_info().rss
                    status = proc.status()
                    ppid = proc.ppid()
                n_files = _fds(proc) if count_files else 0
                tree.append({"pid": pid, "ppid": ppid, "name": proc.name(), "cpu": c, "rss": m, "status": status})
            except psutil.Error:
                cache.pop(pid, None)
                continue
            cpu += c
            rss += m
            files += n_files
        for pid in [p for p in cache if p not in pids]:
            del cache[pid]
        return cpu, rss, files, tree


def tree_pids(root: int, children: dict[int, list[int]]) -> list[int]:
    """`root` and all its descendants, from a pid -> children map."""
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def _fds(proc: psutil.Process) -> int:
    try:
        return proc.num_fds()
    except (psutil.Error, AttributeError):
        return 0


def _tree_from_psutil(proc: psutil.Process | None) -> list[int]:
    if proc is None:
        return []
    try:
        return [proc.pid, *(c.pid for c in proc.children(recursive=True))]
    except psutil.Error:
        return []
