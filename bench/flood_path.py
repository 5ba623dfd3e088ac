"""The flood's path in-process, per line: from a chunk read to its rows stored, without pipes or a loop's waits.

    .venv/bin/python bench/flood_path.py [ROUNDS] [RUNS] [--sessions 50] [--lines 12] [--profile]
    cd /tmp && PYTHONPATH=/tmp/before /work/wt/.venv/bin/python /work/wt/bench/flood_path.py   # another checkout

50 live sessions (`LiveSession`, the native adapter, the default configuration) of a real `Daemon`
(not serving: its record routing and its recorder over a real store in a temporary home) are handed
chunks of tests/agents/paced_flood.py's lines, `--lines` per chunk, through stdout's reader
(`OutputPipe.data_received`, the read callback of the live flood); every 1,000 queued rows are
written the way the flusher writes them (`Recorder._take`, `Recorder._write`: one transaction),
on this thread. Prints CPU time per line
for the read side (split, parse, judge, record) and the store side (the transaction), the best of
RUNS. `--held`: the lines are taken by the pump task (`OutputReader._catch_up`), as when the daemon is behind and reads
long chunks. `--profile`: one run under cProfile, the top functions by their own time. Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "agents"))

from paced_flood import event_line

from loopwarden.paths import Paths
from loopwarden.runtime.daemon import Daemon
from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.lines import LineSplitter
from loopwarden.supervisor.longline import STREAM_FROM
from loopwarden.supervisor.verdicts import SessionState

FLUSH_ROWS = 1000


def read_stdout(session: LiveSession) -> Any:
    """The session's stdout reader, not connected: this bench hands it the chunks (older checkouts: the session)."""
    if hasattr(session, "reader"):
        return session.reader.read_stdout()
    if hasattr(session, "_read_stdout"):
        return session._read_stdout()
    # before runtime/pipes.py (main 2d20fc0 and earlier): the splitter _pump_output made
    session._splitter = LineSplitter(session._max_line(), session._open_long, STREAM_FROM)
    return SimpleNamespace(data_received=session._received, splitter=session._splitter, items=session._held_items,
                           take=session._take, held=False)


def catch_up(session: LiveSession) -> Any:
    """What takes a held pipe's lines: the reader's (older checkouts: the session's)."""
    return session.reader._catch_up if hasattr(session, "reader") else session._catch_up


def chunks(rounds: int, per_chunk: int) -> list[bytes]:
    """One session's chunks: a hello, then paced_flood's lines, `per_chunk` at a time."""
    out = [b'{"type":"hello","name":"paced_flood","protocol":1,"handshake":false}\n']
    for r in range(rounds):
        ts = 1000.0 + r * 0.01
        out.append("".join(event_line(r * per_chunk + j, ts) for j in range(per_chunk)).encode())
    return out


async def one_run(home: Path, n_sessions: int, rounds: int, per_chunk: int,
                  held: bool = False) -> tuple[float, float, int]:
    daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"))
    (home / "data").mkdir(parents=True, exist_ok=True)
    recorder = daemon.recorder
    assert recorder.open(), recorder.health.last_error
    config = load_config(env={})
    native = adapters()["native"]
    sessions = []
    router: Any = getattr(daemon, "router", daemon)  # (older checkouts: the daemon's mixins held it all)
    lines_to = ({"sink_rows": router.sink_rows} if hasattr(router, "sink_rows")  # as the daemon's sessions
                else {"sink_line": router.sink_line} if hasattr(router, "sink_line") else {})  # (older checkouts)
    for i in range(n_sessions):
        session = LiveSession(SessionSpec(id=f"s{i}", name=f"flood{i}", command=["agent"]), config, native(),
                              sink=router.sink, records=recorder, **lines_to)
        session.pid, session.state = 10_000 + i, SessionState.RUNNING
        sessions.append(session)
    data = chunks(rounds, per_chunk)
    read = store = 0.0
    lines = 0
    pipes = [read_stdout(session) for session in sessions]
    for chunk in data:
        t0 = time.thread_time()
        for session, pipe in zip(sessions, pipes, strict=True):
            if held and chunk is not data[0]:  # as when the daemon is behind: the pump task takes the lines
                pipe.items.extend(pipe.splitter.feed(chunk))
                await catch_up(session)(pipe.items, pipe.take, None)
            else:
                pipe.data_received(chunk)
        t1 = time.thread_time()
        read += t1 - t0
        lines += chunk.count(b"\n") * n_sessions
        if sum(map(len, recorder.lanes.values())) >= FLUSH_ROWS or chunk is data[-1]:
            while recorder.lanes:
                taken = recorder._take(list(recorder.lanes), recorder.added)
                error = recorder._write([e for got in taken.values() for e in got])
                recorder.writing_bytes = 0
                recorder._settle(taken, error)
                assert error is None, error
            store += time.thread_time() - t1
    for session, pipe in zip(sessions, pipes, strict=True):
        assert not pipe.held and session.health.state != "terminated", (pipe.held, session.health.state)
        timer = session.journal.progress_timer if hasattr(session, "journal") else session._progress_timer
        if timer is not None:
            timer.cancel()
    store_ = recorder.store
    assert store_ is not None
    stored = store_.count("events")
    assert stored == lines, (stored, lines)
    recorder.close()
    return read, store, lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rounds", nargs="?", type=int, default=200)
    ap.add_argument("runs", nargs="?", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--lines", type=int, default=12, help="lines per chunk (default 12: 1,200 ev/s in 10 ms ticks)")
    ap.add_argument("--held", action="store_true", help="lines taken by the pump task (_catch_up), as when the "
                    "daemon is behind its agents and reads long chunks, instead of the read callback")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    best_read = best_store = float("inf")
    lines = 0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="flood-path-") as tmp:
            if args.profile:
                prof = cProfile.Profile()
                prof.enable()
            read, store, lines = asyncio.run(one_run(Path(tmp), args.sessions, args.rounds, args.lines, args.held))
            if args.profile:
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(35)
                return 0
        best_read, best_store = min(best_read, read), min(best_store, store)
    if args.runs:
        import loopwarden
        print(f"read side {best_read / lines * 1e6:.2f} us per line, store side {best_store / lines * 1e6:.2f} us, "
              f"sum {(best_read + best_store) / lines * 1e6:.2f} us ({lines:,} lines, best of {args.runs}; "
              f"{Path(loopwarden.__file__).parent}, "
              f"{loopwarden.compiled.describe() if hasattr(loopwarden, 'compiled') else 'engine in pure Python'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
