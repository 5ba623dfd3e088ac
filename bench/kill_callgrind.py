"""Killing many sessions, counted in instructions: `kill_many.py`'s kill phase with the daemon under callgrind.

    .venv/bin/python bench/kill_callgrind.py [--sessions 200] [--before DIR] [--label NAME]

The daemon runs under `valgrind --tool=callgrind --instr-atstart=no --trace-children=no` (its agents run
natively); once N sessions run (as in kill_many.py), instrumentation is switched on, one `kill` request is sent
per session, and the counts are dumped once every session is final: the daemon's instructions (all its
threads, user space only) for the N kills. With --before DIR, the daemon serves the loopwarden of DIR (as
kill_many.py does). Under valgrind the kills take 20-30 s of wall time, so the sampler's and the flusher's
rounds that fall in that window are counted too: two runs of the same code differ by up to 10 %. Always exits 0.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kill_many
from live_common import PY, BenchDaemon, wait_for

OUT = Path(__file__).resolve().parent / "out"


class CallgrindDaemon(BenchDaemon):
    """A bench daemon under callgrind, given longer to open its socket."""

    def start(self) -> None:
        with open(self.home / "daemon.out", "ab") as log:
            self.proc = subprocess.Popen(self.serve, env=self.env, stdout=log, stderr=log, cwd=self.cwd,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(self._connectable, 300, "the daemon's socket")
        self.ps = psutil.Process(self.proc.pid)
        kids = self.ps.children()
        self.guardian = kids[0] if kids else None


def control(d: BenchDaemon, *args: str) -> None:
    """callgrind_control on the daemon, kept busy with pings meanwhile (valgrind answers only while it runs)."""
    assert d.ps is not None
    process = subprocess.Popen(["callgrind_control", *args, str(d.ps.pid)], stdout=subprocess.DEVNULL)
    while process.poll() is None:
        d.request("ping")
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--before", metavar="DIR", help="the daemon serves the loopwarden of this checkout")
    ap.add_argument("--label", default="run")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    which = "before" if args.before else "after"
    out = OUT / f"callgrind-kill-{args.label}-{which}-{time.strftime('%H%M%S')}"
    serve = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=no",
             f"--callgrind-out-file={out}.%p", PY, "-m", "loopwarden", "serve"]
    d = CallgrindDaemon("killcg", checkout=Path(args.before).resolve() if args.before else None, serve=serve)
    with d:
        assert d.ps is not None
        sids = kill_many.start_sessions(d, args.sessions)
        control(d, "-i", "on")
        c0, w0 = kill_many.cpu(d.ps), time.monotonic()
        for sid in sids:
            d.request("kill", session=sid, note="benchmark")
        kill_many.wait_all_final(d, sids, timeout=600)
        c1, w1 = kill_many.cpu(d.ps), time.monotonic()
        control(d, "-d")
        load = os.getloadavg()[0]
        d.close()
    dumps = glob.glob(f"{out}.*.1")
    text = Path(dumps[0]).read_text() if dumps else ""
    total = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("summary:")), 0)
    print(f"{which} ({args.label}): {total:,} instructions for {args.sessions} kills, {total / args.sessions:,.0f} "
          f"per kill (CPU under valgrind {c1 - c0:.1f} s, wall {w1 - w0:.1f} s, load {load:.2f}); {dumps}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
