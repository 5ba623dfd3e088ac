"""Emits varied, valid native events at a steady rate until a time limit or SIGTERM.

    python tests/agents/paced_flood.py [--rate 1000] [--seconds N] [--until FILE] [--tick 0.01]

Like flood.py (the same `hello`, the same cycle of tool_call, tool_result,
assistant_message, usage, system_nudge and condensation with arguments and
outputs that never repeat, so no guard fires on the default config), but paced:
every tick (~10 ms) it writes, in one write, the events due since the start at
`--rate` events per second. If the reader falls behind (the pipe is full), the
writer catches up by at most one second's worth and then forgets the rest, so
the rate never overshoots for long. `--seconds 0` (the default) runs until
killed; otherwise `done` follows the last event. `--until FILE` likewise ends
with `done` once FILE exists (checked every tick), so a test releases its
writers when it is ready rather than racing a fixed time. stdin is never read. SIGTERM
(or SIGINT) ends it cleanly with exit status 0. On the way out it prints one
line to stderr: events written, seconds, the achieved rate and how many events
it gave up on because the reader was behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


class Stop(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise Stop()


def event_line(i: int, ts: float) -> str:
    """The i-th event of the same cycle as flood.py, as one JSON line (the values never need escaping)."""
    k = i % 6
    if k == 0:
        body = f'"type":"tool_call","tool":"read_file","args":{{"path":"src/f{i}.py"}},"call_id":"f{i}"'
    elif k == 1:
        body = f'"type":"tool_result","tool":"read_file","call_id":"f{i - 1}","output":"line {i}"'
    elif k == 2:
        body = f'"type":"assistant_message","text":"step {i} looks fine"'
    elif k == 3:
        body = f'"type":"usage","input_tokens":{100 + i % 50},"output_tokens":10'
    elif k == 4:
        body = f'"type":"system_nudge","text":"reminder {i}"'
    else:
        body = f'"type":"condensation","text":"trimmed to step {i}"'
    return f'{{{body},"ts":{ts!r}}}\n'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0, help="events per second (default 1000)")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (default 0: until killed)")
    ap.add_argument("--until", help="stop (with `done`) once this file exists")
    ap.add_argument("--tick", type=float, default=0.01, help="seconds between writes (default 0.01)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    fd = sys.stdout.fileno()
    written = given_up = 0
    t0 = time.monotonic()
    try:
        os.write(fd, b'{"type":"hello","name":"paced_flood","protocol":1,"handshake":false}\n')
        t0 = time.monotonic()
        end = t0 + args.seconds if args.seconds > 0 else float("inf")
        base, base_count = t0, 0  # the schedule: base_count events are due at `base`, then `rate` per second
        cap = max(1, int(args.rate))  # catch up by at most one second's worth
        next_tick = t0
        while True:
            if args.until and os.path.exists(args.until):
                end = time.monotonic()
            now = min(time.monotonic(), end)
            due = base_count + int((now - base) * args.rate) - written
            if due > cap:  # the reader was behind: forget what cannot be caught up
                given_up += due - cap
                base, base_count, due = now, written + cap, cap
            if due > 0:
                ts = time.time()
                data = "".join(event_line(written + j, ts) for j in range(due)).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                written += due
            if now >= end:
                break
            next_tick += args.tick
            pause = next_tick - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                next_tick = time.monotonic()
        os.write(fd, f'{{"type":"done","summary":"{written} events","ts":{time.time()!r}}}\n'.encode())
    except (Stop, BrokenPipeError):
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one clean exit, even when signalled again
        seconds = time.monotonic() - t0
        try:
            sys.stderr.write(f"paced_flood: {written} events in {seconds:.1f} s = {written / max(seconds, 1e-9):.0f}/s "
                             f"(target {args.rate:g}/s, {given_up} given up while the reader was behind)\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
