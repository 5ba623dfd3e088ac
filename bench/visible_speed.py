"""The sanitiser's cost per call: `visible` on clean and dirty strings, `visible_tree` on records.

The CLI and the console call it on every field they show, so the clean case must cost about as
much as a function call. Printed: the best of ROUNDS rounds, in ns per call, beside a bare call of
`str.isprintable` (the fast path's own cost) and `str.translate` with the same escapes (the
obvious alternative). Always exits 0.

    .venv/bin/python bench/visible_speed.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

from loopwarden.supervisor.visible import ESCAPED, _escape, visible, visible_lines, visible_tree

TABLE = {code: _escape(code) for first, last in ESCAPED for code in range(first, last + 1)}

CASES: dict[str, str] = {
    "short clean (22 chars)": "pytest -q tests/engine",
    "short clean, non-ASCII (18 chars)": "café 中文 naïve ✓",
    "short dirty (27 chars, 3 escapes)": "evil\x1b]0;pwned\x07 name\u202e",
    "line with 3 newlines (200 chars)": ("x" * 49 + "\n") * 4,
    "output 200k chars, 2,500 newlines": ("y" * 79 + "\n") * 2500,
    "output 200k chars, colours (7,500 escapes)": ("\x1b[32mok\x1b[0m " + "z" * 70 + "\n") * 2500,
}
RECORD: dict[str, Any] = {"kind": "event", "data": {
    "type": "tool_call", "seq": 42, "ts": 1767225600.5, "tool": "bash", "call_id": "toolu_01",
    "args": {"command": "pytest -q tests/engine", "timeout": 120, "env": {"CI": "1"}}, "task": "T1"}}
DIRTY_RECORD: dict[str, Any] = {**RECORD, "data": {**RECORD["data"], "tool": "bash\x1b]0;title\x07"}}
SNAPSHOT: dict[str, Any] = {"kind": "session", "session": "s7", "data": {  # what the console gets 4 times a second
    "id": "s7", "name": "repetition", "adapter": "native", "state": "running", "pid": 4242,
    "command": ["python", "-m", "agent", "--task", "login"], "started_at": 1767225600.0, "runtime": 83.0,
    "max_runtime": 14400.0, "termination": None, "tool_calls": 9, "events": 17, "pending_gates": ["g1"],
    "counters": {name: [3, 5] for name in ("blocks", "validation", "runtime", "silence", "identical_calls",
                                           "same_error", "alternation", "failures", "tokens")},
    "last_verdict": {"action": "nudge", "rule": "repetition", "reason": "read_file was called 2 times in a row"},
    "cpu_percent": 1.0, "rss": 18 << 20, "processes": 2, "rate": [0, 1, 3, 5, 2, 0, 4, 6, 1, 0] * 3}}


def best_ns(func: Callable[[], Any], number: int, rounds: int) -> float:
    return min(timeit.repeat(func, number=number, repeat=rounds)) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    print(f"{'case':<45} {'visible':>12} {'visible_lines':>14} {'isprintable':>12} {'translate':>12}  (ns per call)")
    for name, text in CASES.items():
        number = 100_000 if len(text) < 1000 else 20
        row = [best_ns(lambda f=f, t=text: f(t), number, rounds) for f in (visible, visible_lines)]
        row += [best_ns(text.isprintable, number, rounds),
                best_ns(lambda t=text: t.translate(TABLE), number, rounds)]
        print(f"{name:<45} " + " ".join(f"{ns:>12,.0f}" for ns in row[:1]) + f" {row[1]:>14,.0f}"
              + "".join(f" {ns:>12,.0f}" for ns in row[2:]))
    for name, record in (("a clean tool_call record (12 strings)", RECORD),
                         ("the same record, an ESC in its tool name", DIRTY_RECORD),
                         ("a clean session snapshot (119 values)", SNAPSHOT)):
        print(f"visible_tree, {name}: {best_ns(lambda r=record: visible_tree(r), 20_000, rounds):,.0f} ns")


if __name__ == "__main__":
    main()
