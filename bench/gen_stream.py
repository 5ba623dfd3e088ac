"""Generate a deterministic, realistic and *healthy* native-protocol stream for benchmarks.

    .venv/bin/python bench/gen_stream.py                       # 1,000,000 events -> bench/out/stream.jsonl
    .venv/bin/python bench/gen_stream.py -n 100000 -o /tmp/s.jsonl --seed 7

The stream imitates a long coding-agent session: ~60% tool_call/tool_result
pairs (bash, read_file, edit_file, grep, ...) with realistic arguments and
outputs of 50-2000 characters (about 1 in 9 results fails), plus
assistant_message, usage, test_result, error, attempt, iteration,
collaboration and condensation events, a `hello` first line and a rare
`user_message` (a human turn).  `ts` grows by small steps (never near the
30 s stall timeout).

"Healthy" means the engine judges every line without terminating the session
(with limits.max_iterations=0 and limits.max_runtime=0, see
replay_throughput.py).  The generator therefore keeps its own view of the
guards' counters and never lets them reach a limit:

* at most 3 failures in a row (failures.max_consecutive = 5), tool errors
  and `error` events included; at most 2 failures in a row per tool
  (repetition.max_same_error = 3);
* identical consecutive tool calls: usually 1, sometimes 2 (a repetition
  nudge), and rarely a stuck episode of 6 (a nudge, then one block); a
  `user_message` follows each episode, which resets the shared block ledger
  (repetition.max_blocks = 3);
* at most 2 assistant messages in a row (repetition.max_monologue = 3);
* at most 2 failed iterations in a row (so escalation goes haiku -> sonnet ->
  opus but never to a human gate; never a 3-failure stuck pattern);
* per task, failing test counts never grow and coverage always rises (no
  loop-counter increments); at most 3 failed check rounds (a failing test
  run, type check or lint, or a failing test report) per human turn
  (reflections.max_rounds = 3: a fourth waits for a `user_message`); error messages carry unique details (no exact
  repeats); collaboration requests are random word mixes (low similarity);
* attempts vary their `work` and `blockers`; a task is `done` once and the
  next task starts.

The output is a pure function of (--events, --seed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "out" / "stream.jsonl"

# ---- vocabularies ---------------------------------------------------------
DIRS = ["src/app", "src/app/api", "src/app/models", "src/app/services", "src/app/utils", "src/cli",
        "tests", "tests/unit", "tests/integration", "lib", "scripts", "docs", "config", "migrations"]
STEMS = ["user", "order", "invoice", "session", "parser", "formatter", "cache", "client", "server", "auth",
         "config", "router", "schema", "billing", "report", "queue", "worker", "storage", "metrics", "search",
         "payment", "account", "export", "import", "notify", "token", "upload", "audit", "pricing", "tenant"]
SUFFIXES = ["", "_utils", "_service", "_models", "_handler", "_views", "_helpers", "_client", "_test", "_api"]
EXTS = [".py", ".py", ".py", ".ts", ".tsx", ".js", ".rs", ".go", ".md", ".toml", ".json", ".yaml"]
WORDS = ("add remove update fix refactor parse validate serialize render compute fetch store load save "  # noqa: SIM905 - reads better than 250 quoted words
         "retry timeout handler request response payload header token session cache index query filter "
         "sort page limit offset cursor batch stream buffer chunk encode decode migrate schema column table "
         "field record model view controller service client server router middleware logger metric trace "
         "span event queue worker job task scheduler cron lock mutex thread async await future promise "
         "callback error exception panic fallback default config option flag feature toggle release deploy "
         "build compile link bundle lint format typecheck coverage fixture mock stub assert expect snapshot "
         "regression flaky slow fast memory leak allocation pointer reference borrow lifetime generic trait "
         "interface struct enum variant union tuple vector array dict mapping set frozen immutable mutable "
         "public private internal module package crate import export dependency version upgrade downgrade "
         "pin lockfile registry mirror proxy network socket port host dns tls certificate secret vault "
         "permission role policy tenant account invoice billing pricing discount currency rounding locale "
         "timezone calendar date duration interval window quota budget cost estimate report dashboard chart "
         "upload download archive compress checksum digest signature verify encrypt decrypt hash salt").split()
IDENTS = ["value", "result", "items", "config", "request", "response", "payload", "user_id", "order", "total",
          "count", "offset", "limit", "cursor", "session", "client", "handler", "records", "row", "data",
          "ctx", "args", "kwargs", "path", "buf", "err", "msg", "key", "cache", "state"]
TOOLS = ["bash", "read_file", "edit_file", "write_file", "grep", "list_dir", "run_tests", "web_fetch"]
TOOL_WEIGHTS = [30, 25, 15, 5, 10, 6, 7, 2]
AGENTS = ["planner", "coder", "reviewer", "tester", "researcher"]
ERROR_TYPES = ["ValueError", "TypeError", "KeyError", "AttributeError", "ImportError", "FileNotFoundError",
               "AssertionError", "RuntimeError", "TimeoutError", "PermissionError", None, None]


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        r = self.r
        self.ts = 1_760_000_000.0
        self.call_n = 0
        # pools of pre-built lines (built from the seeded RNG, so deterministic)
        self.code_lines = [self._code_line() for _ in range(600)]
        self.prose = [self._sentence() for _ in range(800)]
        self.paths = [f"{r.choice(DIRS)}/{r.choice(STEMS)}{r.choice(SUFFIXES)}{r.choice(EXTS)}"
                      for _ in range(400)]
        self.tests = [f"tests/test_{r.choice(STEMS)}.py::test_{r.choice(WORDS)}_{r.choice(WORDS)}"
                      for _ in range(300)]
        # guard-mirroring state
        self.consec_fail = 0          # FailuresGuard
        self.tool_fail: dict[str, int] = {}   # SameErrorGuard (per tool)
        self.monologue = 0            # MonologueGuard
        self.iter_n = 0
        self.iter_fail = 0            # IterationsGuard
        self.last_call: tuple[str, dict] | None = None
        self.streak = 0
        self.task_n = 0
        self.failed_reports = 0       # ReflectionsGuard: failing test reports since the last human turn
        self._new_task()

    # ---- text helpers ------------------------------------------------------
    def _code_line(self) -> str:
        r = self.r
        ind = "    " * r.randint(0, 3)
        a, b = r.choice(IDENTS), r.choice(IDENTS)
        return ind + r.choice([
            f"{a} = {b}.get({r.choice(WORDS)!r}, {r.randint(0, 100)})",
            f"def {r.choice(WORDS)}_{r.choice(WORDS)}(self, {a}, {b}=None):",
            f"if {a} is None or not {b}:",
            f"return {{'{a}': {b}, 'ok': {r.choice(['True', 'False'])}}}",
            f"for {a} in {b}:",
            f"logger.debug(\"{r.choice(WORDS)} %s\", {a})",
            f"raise {r.choice(['ValueError', 'KeyError', 'RuntimeError'])}(f\"bad {a}: {{{b}}}\")",
            f"self.{a} = {b}",
            f"# TODO: {r.choice(WORDS)} the {r.choice(WORDS)} before {r.choice(WORDS)}",
            f"from .{r.choice(STEMS)} import {r.choice(IDENTS)}, {r.choice(IDENTS)}",
            f"assert {a} == {b}, \"{r.choice(WORDS)} mismatch\"",
            f"{a}.append({b}[{r.randint(0, 9)}])",
        ])

    def _sentence(self) -> str:
        r = self.r
        words = [r.choice(WORDS) for _ in range(r.randint(6, 18))]
        return words[0].capitalize() + " " + " ".join(words[1:]) + r.choice([".", ".", ".", "?", ":"])

    def _size(self) -> int:
        """50..2000 characters, skewed towards short outputs (median ~400)."""
        return max(50, min(2000, int(self.r.lognormvariate(6.0, 0.8))))

    def _fill(self, lines: list[str], size: int) -> str:
        r = self.r
        out: list[str] = []
        n = 0
        while n < size:
            line = r.choice(lines)
            out.append(line)
            n += len(line) + 1
        return "\n".join(out)[:size]

    def _prose(self, lo: int, hi: int) -> str:
        r = self.r
        size = r.randint(lo, hi)
        parts: list[str] = []
        n = 0
        while n < size:
            s = r.choice(self.prose)
            parts.append(s)
            n += len(s) + 1
        return " ".join(parts)[:size]

    def _path(self) -> str:
        return self.r.choice(self.paths)

    def _uniq(self) -> str:
        return f"{self.r.getrandbits(40):010x}"

    # ---- the session ---------------------------------------------------------
    def _new_task(self) -> None:
        r = self.r
        self.task_n += 1
        self.task = f"T-{self.task_n}"
        self.task_attempts_left = r.randint(4, 12)
        self.t_failed = r.randint(0, 9)
        self.t_passed = r.randint(20, 400)
        self.t_cov = round(r.uniform(40.0, 70.0), 2)

    def _tick(self, lo: float = 0.02, hi: float = 1.5) -> float:
        self.ts += self.r.uniform(lo, hi)
        return round(self.ts, 3)

    def _args(self, tool: str) -> dict:
        r = self.r
        if tool == "bash":
            cmd = r.choice([
                f"pytest -q {r.choice(self.tests).split('::')[0]} -k {r.choice(WORDS)}",
                f"grep -rn '{r.choice(WORDS)}' {r.choice(DIRS)}",
                f"ls -la {r.choice(DIRS)}",
                "git status --short", "git diff --stat",
                f"git log --oneline -n {r.randint(3, 30)}",
                f"python -m mypy {r.choice(DIRS)}",
                f"ruff check {self._path()}",
                f"cat {self._path()} | head -n {r.randint(10, 200)}",
                f"npm test -- {r.choice(STEMS)}", f"cargo build -p {r.choice(STEMS)}",
                f"sed -n '{r.randint(1, 300)},{r.randint(301, 600)}p' {self._path()}",
            ])
            a = {"command": cmd}
            if r.random() < 0.3:
                a["timeout"] = r.choice([30, 60, 120, 600])
            return a
        if tool == "read_file":
            a = {"path": self._path()}
            if r.random() < 0.5:
                a.update(offset=r.randint(0, 800), limit=r.choice([50, 100, 200, 400]))
            return a
        if tool == "edit_file":
            return {"path": self._path(), "old_str": self._fill(self.code_lines, r.randint(30, 300)),
                    "new_str": self._fill(self.code_lines, r.randint(30, 400))}
        if tool == "write_file":
            return {"path": self._path(), "content": self._fill(self.code_lines, r.randint(100, 1500))}
        if tool == "grep":
            a = {"pattern": f"{r.choice(IDENTS)}|{r.choice(WORDS)}", "path": r.choice(DIRS)}
            if r.random() < 0.4:
                a["include"] = "*" + r.choice(EXTS)
            return a
        if tool == "list_dir":
            return {"path": r.choice(DIRS), "depth": r.randint(1, 3)}
        if tool == "run_tests":
            return {"target": r.choice(self.tests).split("::")[0], "verbose": r.random() < 0.3}
        return {"url": f"https://docs.example.com/{r.choice(STEMS)}/{r.choice(WORDS)}#{self._uniq()}"}

    def _ok_output(self, tool: str, args: dict) -> str:
        r = self.r
        size = self._size()
        if tool in ("read_file", "write_file", "edit_file") or (tool == "bash" and "cat " in args["command"]):
            if tool == "edit_file":
                head = f"Edited {args['path']}: replaced 1 occurrence ({self._uniq()})\n"
            elif tool == "write_file":
                head = f"Wrote {len(args['content'])} bytes to {args['path']} ({self._uniq()})\n"
            else:
                head = f"# {args.get('path', '')} @{self._uniq()}\n"
            return (head + self._fill(self.code_lines, size))[:max(size, len(head))]
        if tool in ("grep",) or (tool == "bash" and args["command"].startswith("grep")):
            lines = [f"{self._path()}:{r.randint(1, 900)}:{r.choice(self.code_lines).strip()}" for _ in range(40)]
            return self._fill(lines, size)
        if tool == "list_dir" or (tool == "bash" and args["command"].startswith("ls")):
            lines = [f"-rw-r--r--  1 dev staff {r.randint(80, 90000):6d} Mar {r.randint(1, 28):2d} "
                     f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d} "
                     f"{r.choice(STEMS)}{r.choice(SUFFIXES)}{r.choice(EXTS)}"
                     for _ in range(30)]
            return self._fill(lines, size)
        if tool == "run_tests" or (tool == "bash" and ("pytest" in args["command"] or "test" in args["command"])):
            lines = [f"{t} PASSED" for t in r.sample(self.tests, 30)]
            body = self._fill(lines, max(0, size - 60))
            return body + f"\n{r.randint(5, 400)} passed in {r.uniform(0.2, 40):.2f}s ({self._uniq()})"
        if tool == "web_fetch":
            return self._prose(50, size)
        # git / mypy / ruff / build: mixed log lines
        return self._fill(self.prose + self.code_lines, size) + f"\n[{self._uniq()}]"

    def _err_output(self, tool: str, args: dict) -> tuple[str, dict]:
        r = self.r
        size = self._size()
        u = self._uniq()
        kind = r.randrange(5)
        if kind == 0:
            head = (f"Traceback (most recent call last):\n  File \"{self._path()}\", line {r.randint(1, 900)}, in "
                    f"{r.choice(WORDS)}\n    {r.choice(self.code_lines).strip()}\n")
            tail = f"{r.choice(ERROR_TYPES[:10])}: {r.choice(self.prose)} [{u}]"
            text = head + self._fill(self.code_lines, max(0, size - len(head) - len(tail))) + "\n" + tail
        elif kind == 1:
            text = f"bash: {r.choice(WORDS)}-{u}: command not found"
        elif kind == 2:
            failing = r.sample(self.tests, r.randint(1, 5))
            text = "\n".join(f"FAILED {t} - AssertionError: expected {r.randint(0, 99)} got {r.randint(100, 999)}"
                             for t in failing)
            text += f"\n{len(failing)} failed, {r.randint(5, 300)} passed ({u})"
        elif kind == 3:
            text = f"FileNotFoundError: [Errno 2] No such file or directory: '{self._path()}.{u}'"
        else:
            text = (f"error[E0{r.randint(100, 999)}]: mismatched types in {r.choice(STEMS)} ({u})\n"
                    + self._fill(self.code_lines, size))
        extra: dict = {"is_error": True} if r.random() < 0.5 else {"exit_code": r.choice([1, 2, 101, 127])}
        return text[:2000], extra

    # ---- event builders -------------------------------------------------------
    def _can_fail(self, tool: str | None = None) -> bool:
        if self.consec_fail >= 3:
            return False
        return tool is None or self.tool_fail.get(tool, 0) < 2

    def tool_pair(self, tool: str | None = None, args: dict | None = None,
                  allow_fail: bool = True, result: bool = True, output: str | None = None) -> list[dict]:
        r = self.r
        if tool is None:
            tool = r.choices(TOOLS, TOOL_WEIGHTS)[0]
            args = self._args(tool)
        assert args is not None
        self.call_n += 1
        cid = f"call_{self.call_n:07d}"
        call = {"type": "tool_call", "ts": self._tick(), "tool": tool, "args": args, "call_id": cid}
        if self.last_call == (tool, args):
            self.streak += 1
        else:
            self.last_call, self.streak = (tool, args), 1
        self.monologue = 0
        if not result:  # blocked: the agent never ran it
            return [call]
        check = tool == "bash" and str(args.get("command", "")).startswith(CHECKS)
        fail = allow_fail and self._can_fail(tool) and r.random() < 0.11 and not (check and self.failed_reports >= 3)
        if check and fail:  # a round of the reflection budget (counted even where the guard would not)
            self.failed_reports += 1
        res: dict = {"type": "tool_result", "ts": self._tick(0.05, 20.0), "tool": tool, "call_id": cid}
        if fail:
            res["output"], extra = self._err_output(tool, args)
            res.update(extra)
            self.consec_fail += 1
            self.tool_fail[tool] = self.tool_fail.get(tool, 0) + 1
        else:
            res["output"] = self._ok_output(tool, args) if output is None else output
            if r.random() < 0.4:
                res["exit_code"] = 0
            self.consec_fail = 0
            self.tool_fail[tool] = 0
        return [call, res]

    def assistant(self) -> list[dict]:
        if self.monologue >= 2:
            return self.tool_pair()
        self.monologue += 1
        return [{"type": "assistant_message", "ts": self._tick(), "text": self._prose(50, 1500)}]

    def usage(self) -> list[dict]:
        r = self.r
        i, o = r.randint(800, 150_000), r.randint(20, 4000)
        return [{"type": "usage", "ts": self._tick(0.0, 0.05), "input_tokens": i, "output_tokens": o,
                 "cost_usd": round(i * 3e-6 + o * 15e-6, 6)}]

    def test_result(self) -> list[dict]:
        r = self.r
        if self.t_failed and r.random() < 0.35:
            fixed = r.randint(1, self.t_failed)
            self.t_failed -= fixed
            self.t_passed += fixed
        self.t_passed += r.randint(0, 3)
        self.t_cov = round(self.t_cov + r.uniform(0.01, 0.3), 2)  # always rises: never a "no progress" repeat
        human = []
        if self.t_failed and self.failed_reports >= 3:  # a fourth failed round would exhaust the budget
            human = [{"type": "user_message", "ts": self._tick(1.0, 20.0), "text": "Keep going on the failing tests."}]
            self.failed_reports = 0
        ev = {"type": "test_result", "ts": self._tick(0.5, 10.0), "task": self.task, "passed": self.t_passed,
              "failed": self.t_failed, "coverage": self.t_cov}
        if self.t_failed:
            ev["failing"] = r.sample(self.tests, min(self.t_failed, 8))
        self.failed_reports += 1 if self.t_failed else 0  # a passing report clears its task's rounds, not
        return [*human, ev]                                # those of calls sent without a task (these)

    def error(self) -> list[dict]:
        r = self.r
        if not self._can_fail():
            return self.tool_pair(allow_fail=False)
        self.consec_fail += 1
        et = r.choice(ERROR_TYPES)
        ev: dict = {"type": "error", "ts": self._tick(), "task": self.task,
                    "message": f"{r.choice(self.prose)} ({self._path()}:{r.randint(1, 900)}, id {self._uniq()})",
                    "location": f"{self._path()}:{r.randint(1, 900)}"}
        if et:
            ev["error_type"] = et
        if r.random() < 0.5:
            ev["stack"] = "Traceback (most recent call last):\n" + "\n".join(
                f"  File \"{self._path()}\", line {r.randint(1, 900)}, in {r.choice(WORDS)}\n    "
                + r.choice(self.code_lines).strip() for _ in range(r.randint(2, 8)))
        return [ev]

    def attempt(self) -> list[dict]:
        r = self.r
        self.task_attempts_left -= 1
        work = [f"{r.choice(WORDS)} {r.choice(WORDS)} in {self._path()}" for _ in range(r.randint(1, 4))]
        ev: dict = {"type": "attempt", "ts": self._tick(), "task": self.task, "work": work}
        if self.task_attempts_left <= 0:
            ev["status"] = "done"
            out = [ev]
            self._new_task()
            return out
        if r.random() < 0.12:
            ev["status"] = "blocked"
            ev["blockers"] = [f"{r.choice(WORDS)} {r.choice(WORDS)} unavailable ({self._uniq()})"]
        else:
            ev["status"] = r.choice(["in_progress", "in_progress", "in_progress", "pending"])
        return [ev]

    def iteration(self) -> list[dict]:
        r = self.r
        self.iter_n += 1
        fail = self.iter_fail < 2 and r.random() < 0.25
        self.iter_fail = self.iter_fail + 1 if fail else 0
        self.monologue = 0
        ev: dict = {"type": "iteration", "ts": self._tick(), "task": self.task, "n": self.iter_n,
                    "status": "fail" if fail else "pass",
                    "files_modified": r.sample(self.paths, r.randint(0, 6))}
        if fail:
            ev["failing_tests"] = r.sample(self.tests, r.randint(1, 4))
            if r.random() < 0.5:
                ev["error"] = f"{r.choice(self.prose)} ({self._uniq()})"
        return [ev]

    def collaboration(self) -> list[dict]:
        r = self.r
        a, b = r.sample(AGENTS, 2)
        req = " ".join(r.choice(WORDS) for _ in range(r.randint(8, 30))) + f" in {self._path()}"
        return [{"type": "collaboration", "ts": self._tick(), "task": self.task, "agent": a,
                 "from_agent": a, "to_agent": b, "request": req}]

    def condensation(self) -> list[dict]:
        r = self.r
        return [{"type": "condensation", "ts": self._tick(),
                 "text": f"Dropped {r.randint(5, 80)} old tool results; kept the plan. " + self._prose(60, 400)}]

    def repeat_last(self) -> list[dict]:
        """Call the previous tool again with identical arguments (a streak of 2: a nudge)."""
        if self.last_call is None or self.streak != 1:
            return self.tool_pair()
        tool, args = self.last_call
        return self.tool_pair(tool, args)

    def stuck_episode(self) -> list[dict]:
        """Six identical calls with identical output (nudge at 2, block at 6), then a human steps in."""
        tool, args = "bash", {"command": f"pytest -q tests/test_{self.r.choice(STEMS)}.py -x"}
        same = self._ok_output(tool, args)
        out: list[dict] = []
        for i in range(6):
            out += self.tool_pair(tool, args, allow_fail=False, result=i < 5, output=same)
        out.append({"type": "user_message", "ts": self._tick(1.0, 20.0),
                    "text": "Stop re-running that test; read the failing assertion and fix the code first."})
        self.failed_reports = 0
        self.consec_fail = 0
        self.tool_fail.clear()
        self.monologue = 0
        return out


CHECKS = ("pytest", "python -m mypy", "ruff check", "npm test")  # the check commands _args runs
KINDS = ["tool", "assistant", "usage", "test_result", "error", "attempt", "iteration",
         "collaboration", "condensation", "repeat", "stuck"]
# pairs: 28.5 (two events each) vs 38 single events -> ~60% of events are tool_call/tool_result
WEIGHTS = [28.0, 14.0, 12.0, 3.0, 1.5, 3.0, 2.5, 1.5, 0.5, 0.5, 0.003]


def generate(n: int, seed: int, path: Path) -> dict[str, int]:
    g = Gen(seed)
    methods = {"tool": g.tool_pair, "assistant": g.assistant, "usage": g.usage, "test_result": g.test_result,
               "error": g.error, "attempt": g.attempt, "iteration": g.iteration,
               "collaboration": g.collaboration, "condensation": g.condensation,
               "repeat": g.repeat_last, "stuck": g.stuck_episode}
    r = g.r
    counts: dict[str, int] = {}
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    written = 0
    with open(tmp, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as f:
        hello = {"type": "hello", "ts": g._tick(), "name": "bench-agent", "protocol": 1, "handshake": False}
        f.write(dumps(hello) + "\n")
        counts["hello"] = 1
        written = 1
        while written < n:
            kind = r.choices(KINDS, WEIGHTS)[0]
            batch = methods[kind]()
            batch = batch[: n - written]
            f.write("".join(dumps(ev) + "\n" for ev in batch))
            for ev in batch:
                counts[ev["type"]] = counts.get(ev["type"], 0) + 1
            written += len(batch)
    os.replace(tmp, path)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--events", type=int, default=1_000_000, help="number of lines/events (default 1,000,000)")
    p.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, help=f"output file (default {DEFAULT_OUT})")
    p.add_argument("--seed", type=int, default=20260509, help="random seed (default 20260509)")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    counts = generate(a.events, a.seed, a.out)
    dt = time.perf_counter() - t0
    size = a.out.stat().st_size
    total = sum(counts.values())
    print(f"wrote {total:,} events ({size / 1e6:,.1f} MB, {size / total:,.0f} B/line) to {a.out} "
          f"in {dt:.1f}s (seed {a.seed})")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<18} {v:>9,}  {100 * v / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
