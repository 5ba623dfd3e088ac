"""False alarms: per-rule fire counts over the healthy real recordings and a generated healthy stream.

    .venv/bin/python bench/false_alarms.py                 # recordings + 1,000,000 generated events
    .venv/bin/python bench/false_alarms.py -n 100000       # a smaller stream
    .venv/bin/python bench/false_alarms.py --json

A hard intervention is a block, a gate (an escalation to a human opens one) or a terminate.
On a healthy recording every hard intervention is a false alarm. The generated stream
(bench/gen_stream.py) is healthy too, except for the rare stuck episodes it plants on purpose
(six identical test runs with identical output, then a human steps in): each should earn one
repetition nudge and one block, so the table shows those planted blocks apart from the rest.
Soft verdicts (nudge, spill, force_next...) are counted and shown, not judged. Always exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRANSCRIPTS = ROOT.parent / "shared" / "data" / "transcripts"
TEST_DATA = ROOT / "tests" / "data"
DEFAULT_STREAM = HERE / "out" / "stream.jsonl"
HARD = ("block", "gate", "terminate")
STUCK_TEXT = "Stop re-running that test"  # gen_stream.py's human turn after each planted stuck episode

# Every real recording we have, each read to the end by hand: none is a loop. (file, why it is healthy)
HEALTHY = [
    ("claude_stream-json__claude-clean__simple.jsonl",
     "Claude Code 2.0.25 exploring a repository with Task sub-agents; one tool error; ends in success"),
    ("claude_stream-json__ccagent__claude_response1.jsonl",
     "a 139-turn refactoring: make lint-fix fails three times with different compile errors, each "
     "fixed by edits in between, then passes; the tests run once"),
    ("claude_stream-json__ccagent__claude-session-with-image.jsonl",
     "Claude Code 2.0.22 editing after a screenshot; a 1.1 MB line"),
    ("claude_turns_array__claude-code-action__sample-turns.json",
     "Anthropic's hand-made fixture of three turns (an official example, not a recording)"),
    ("codex_exec_json__agentcmd__stream-output-2.jsonl", "codex exec: one ls, an answer"),
    ("codex_exec_json__agentcmd__stream-output-3.jsonl", "codex exec: one file added"),
    ("codex_exec_json__agentcmd__stream-output-4.jsonl", "codex exec: one cat, an answer"),
    ("codex_exec_json__agentcmd__stream-output-5.jsonl", "codex exec under zsh with stray stderr"),
    ("codex_exec_json__openai-codex-docs__exec-md-sample.jsonl", "the sample in Codex's docs/exec.md"),
]


def find(name: str) -> Path | None:
    """A recording from the shared transcripts, else the copy in tests/data, else None."""
    for folder in (TRANSCRIPTS, TEST_DATA):
        if (folder / name).exists():
            return folder / name
    return None


def kind(verdict: Any) -> str:
    """A verdict's action, an escalation to a human counted as the gate it opens."""
    action = str(verdict.action)
    return "gate" if action == "escalate" and verdict.target == "human" else action


def replay(path: Path, config: Any) -> tuple[Counter[tuple[str, str]], list[dict[str, Any]]]:
    """(rule, action) counts of one recording replayed (format told from its first lines), and its
    hard verdicts."""
    from loopwarden.replay import Replayer, open_recording

    found: Counter[tuple[str, str]] = Counter()
    hard: list[dict[str, Any]] = []

    def on_verdict(v: Any) -> None:
        found[(v.rule, kind(v))] += 1
        if kind(v) in HARD:
            hard.append({"seq": v.seq, "rule": v.rule, "action": kind(v), "reason": v.reason})

    with open(path, "rb") as raw:
        guess, stream = open_recording(raw)
        Replayer(config, spill=False).run(stream, guess.fmt or "native", on_verdict, array=guess.array,
                                          detected=True)
    return found, hard


def recordings(config: Any) -> dict[str, Any]:
    counts: Counter[tuple[str, str]] = Counter()
    hard: list[dict[str, Any]] = []
    read = []
    for name, _why in HEALTHY:
        path = find(name)
        if path is None:
            continue
        found, alarms = replay(path, config)
        counts += found
        hard += [{"recording": name, **a} for a in alarms]
        read.append(name)
    return {"read": read, "counts": counts, "hard": hard}


def generated(n: int, stream: Path, config: Any) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import gen_stream

    if not stream.exists() or _lines(stream) != n:
        gen_stream.generate(n, 20260509, stream)
    with open(stream, "rb") as f:
        planted = sum(1 for line in f if STUCK_TEXT.encode() in line)
    t0 = time.perf_counter()
    counts, hard = replay(stream, config)
    return {"events": n, "planted": planted, "counts": counts, "hard": len(hard),
            "seconds": round(time.perf_counter() - t0, 1)}


def _lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def table(rec: dict[str, Any], gen: dict[str, Any] | None) -> str:
    rules = sorted({r for r, _ in rec["counts"]} | ({r for r, _ in gen["counts"]} if gen else set()))
    head = f"{'rule':<24} {'recordings soft':>15} {'recordings hard':>15}"
    if gen:
        head += f" {'stream soft':>12} {'stream hard':>12}"
    lines = [head, "-" * len(head)]

    def split(counts: Counter[tuple[str, str]], rule: str) -> tuple[int, int]:
        hard = sum(n for (r, a), n in counts.items() if r == rule and a in HARD)
        return sum(n for (r, _), n in counts.items() if r == rule) - hard, hard

    for rule in rules:
        soft, hard = split(rec["counts"], rule)
        line = f"{rule:<24} {soft:>15,} {hard:>15,}"
        if gen:
            gsoft, ghard = split(gen["counts"], rule)
            line += f" {gsoft:>12,} {ghard:>12,}"
        lines.append(line)
    if not rules:
        lines.append("(no verdict at all)")
    lines.append(f"recordings: {len(rec['read'])} of {len(HEALTHY)} found; hard interventions: {len(rec['hard'])}")
    lines += [f"  FALSE ALARM {a['recording']} line {a['seq']}: {a['action']} {a['rule']}: {a['reason']}"
              for a in rec["hard"]]
    if gen:
        lines.append(f"stream: {gen['events']:,} events in {gen['seconds']}s; hard interventions {gen['hard']:,}, "
                     f"planted stuck episodes {gen['planted']:,} (one block each expected); "
                     f"unexplained: {max(0, gen['hard'] - gen['planted']):,}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--events", type=int, default=1_000_000, help="generated events (0: recordings only)")
    p.add_argument("--stream", type=Path, default=DEFAULT_STREAM,
                   help=f"the generated stream (default {DEFAULT_STREAM})")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from loopwarden.supervisor.config import load_config

    rec = recordings(load_config(env={}))
    # the stream spans days of simulated time and ~25k iterations: the same caps as replay_throughput.py
    gen = generated(a.events, a.stream, load_config(env={}, sets=["limits.max_iterations=0", "limits.max_runtime=0",
                                                                   "spill.threshold_chars=0"])) if a.events else None
    if a.json:
        def flat(c: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
            out: dict[str, dict[str, int]] = {}
            for (rule, action), n in c.items():
                out.setdefault(rule, {})[action] = n
            return out
        print(json.dumps({"recordings": {**rec, "counts": flat(rec["counts"])},
                          "stream": {**gen, "counts": flat(gen["counts"])} if gen else None}, indent=1))
    else:
        print(table(rec, gen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
