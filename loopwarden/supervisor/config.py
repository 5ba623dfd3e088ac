"""Limits and thresholds: defaults, presets, TOML, environment and --set, in rising precedence."""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .ladders import OWN as OWN_LADDERS
from .ladders import LadderError
from .ladders import parse_entry as parse_ladder
from .prices import PriceError, parse_entry

ENV_PREFIX = "LOOPWARDEN_"


class ConfigError(ValueError):
    """A bad key or value; the message is one line that names the key and what it accepts."""


def _key(kind: str, help: str, default: Any) -> Any:
    return field(default=default, metadata={"kind": kind, "help": help})


def _list_key(help: str, default: list[str], kind: str = "list") -> Any:
    return field(default_factory=lambda: list(default), metadata={"kind": kind, "help": help})


# Every rule a verdict can name, with what it watches, in the order of the rule table (docs/rules.md): `rules.disabled`,
# `tools.exempt` and `loopwarden explain` use these names. A new guard adds its name here.
RULES: dict[str, str] = {
    "repetition": "the same call with the same arguments, consecutively",
    "polling": "the same call again and again while its output keeps changing (a poll with no ceiling)",
    "same_error": "one tool returning the same error, whatever its arguments",
    "alternation": "two calls alternating A,B,A,B with identical results",
    "monologue": "assistant messages in a row with no tool call",
    "stall": "silence: no event for limits.stall_timeout",
    "runtime": "wall clock over limits.max_runtime",
    "validation": "malformed lines or model outputs in a row",
    "consecutive_failures": "failures in a row with no success between",
    "loop_counter": "the same failure repeated within a task, test regressions, repeated requests for help",
    "attempts": "attempts of one task: a done task revisited, a blocked spin, no-progress repeats",
    "completed_task_revisit": "a task already done, attempted again",
    "blocked_task_spin": "a blocked task attempted again and again",
    "no_progress_repeat": "attempts of a task that change nothing",
    "iterations": "failed iterations per model, stuck iteration patterns, max iterations",
    "model_escalation": "failed iterations on one model: the next model up, then a human",
    "stuck_loop": "iterations stuck in one pattern (the same error, files or failing tests)",
    "budget": "tokens, cost, output, memory or processes over their limits",
    "large_output": "a tool output too large to pass on (spilled to a file)",
    "gate_request": "the agent asking a human to approve something",
    "condensation": "context trimming that frees no room, back to back",
    "rereads": "the same file read again and again without being written",
    "chanting": "one message repeating the same passage",
    "reflections": "failed test or lint rounds since the last human message",
}
RULE_ALIASES = {"max_runtime": "runtime", "max_iterations": "iterations"}

# The keys one tool may have its own value of (`tools.limits`): thresholds judged per call of that tool.
TOOL_KEYS = ("repetition.nudge_after", "repetition.max_identical_calls", "repetition.max_same_error",
             "repetition.progress_nudge_after", "repetition.progress_gate_after")

# Commands that only wait, exempt by default from the repetition rules and the stall (tools.waiting).
# A one-word entry also names a tool: Claude Code's BashOutput polls a shell it started in the background.
WAITING_COMMANDS = ["sleep", "wait", "watch", "tail -f", "tail -F", "gh run watch", "gh pr checks --watch",
                    "kubectl rollout status", "kubectl wait", "docker wait", "docker compose wait", "BashOutput"]


@dataclass(frozen=True)
class Limits:
    max_runtime: float = _key("duration", "hard wall-clock limit; 0 = off", 4 * 3600.0)
    stall_timeout: float = _key("duration", "silence before a stall nudge; 0 = off", 30.0)
    max_iterations: int = _key("int", "iterations before terminate(max_iterations); 0 = off", 10)
    max_tokens: int = _key("int", "input+output tokens the session may use; reached, its next tool call waits "
                                  "(limits.budget_action); 0 = off", 0)
    max_cost_usd: float = _key("float", "cost in USD the session may spend; reached, its next tool call waits "
                                        "(limits.budget_action); 0 = off", 0.0)
    budget_action: str = _key("choice:pause,terminate", "what reaching a budget (limits.max_cost_usd, "
                                                        "limits.max_tokens, budgets.*) does: pause holds the next "
                                                        "tool call behind a gate until the budget is raised or the "
                                                        "gate decided; terminate ends the session (budget)", "pause")
    max_line_bytes: int = _key(
        "size", "longest accepted input line; 0 = 1 MiB for native, 64 MiB for recorded formats", 0
    )
    max_output_bytes: int = _key("size", "bytes a session may print before terminate(budget); 0 = off", 0)
    max_rss: int = _key("size", "memory of the process tree before terminate(budget); 0 = off", 0)
    max_processes: int = _key("int", "processes in the tree before terminate(budget); 0 = off", 0)
    kill_grace: float = _key("duration", "after SIGTERM, wait this long before SIGKILL", 5.0)
    stdin_backlog: int = _key("size", "bytes queued for an agent that does not read its input before it is "
                                      "stopped (validation_failure)", 1 << 20)


@dataclass(frozen=True)
class Repetition:
    nudge_after: int = _key("int", "consecutive identical calls that earn a recovery prompt", 2)
    max_identical_calls: int = _key("int", "identical consecutive calls allowed; the next is blocked", 5)
    max_blocks: int = _key("int", "blocked repeats before terminate(repetition_loop)", 3)
    max_same_error: int = _key("int", "same error fingerprint from a tool before its next call is blocked", 3)
    alternation_window: int = _key("int", "calls in an A,B,A,B pattern with identical results", 6)
    max_monologue: int = _key("int", "assistant messages in a row with no tool call", 3)
    reset_on_user_message: bool = _key("bool", "a human turn resets the windows and failure count", True)
    progress_nudge_after: int = _key("int", "identical calls in a row whose output keeps changing (polling, paging) "
                                            "before a nudge; 0 = off", 10)
    progress_gate_after: int = _key("int", "identical calls in a row whose output keeps changing allowed; the next "
                                           "waits for a human (a gate); 0 = off", 30)


@dataclass(frozen=True)
class Condensation:
    max_in_a_row: int = _key("int", "context condensations in a row with no work between them before a gate "
                                    "(OpenHands: 10); 0 = off", 10)


_READ_TOOLS = ["read", "read_file", "readfile", "view", "view_file", "open_file", "cat", "fs/read_text_file"]
_WRITE_TOOLS = ["write", "write_file", "edit", "edit_file", "multiedit", "str_replace", "str_replace_editor",
                "str_replace_based_edit_tool", "text_editor", "create_file", "apply_patch", "notebookedit", "replace",
                "fs/write_text_file"]


@dataclass(frozen=True)
class Rereads:
    max_reads: int = _key("int", "reads of one file (any offset) with no write to it allowed; the next read is "
                                 "blocked (Goose fork: 5); 0 = off", 5)
    window: int = _key("int", "a read counts only if the file's previous read was among this many tool calls "
                              "(OpenHands V1 judges the last 20 events)", 20)
    read_tools: list[str] = _list_key("tools that read a file (names compared case-insensitively)", _READ_TOOLS)  # noqa: RUF009 - a default_factory
    write_tools: list[str] = _list_key("tools that write or edit a file", _WRITE_TOOLS)  # noqa: RUF009 - a default_factory


@dataclass(frozen=True)
class Chanting:
    repeats: int = _key("int", "times one passage recurs close together in an assistant message before a nudge "
                               "(Gemini CLI: 10); 0 = off", 10)
    chunk_chars: int = _key("int", "length of the passage compared (Gemini CLI: 50)", 50)


_CHECK_COMMANDS = ["pytest", "py.test", "tox", "nox", "unittest", "jest", "vitest", "mocha", "rspec", "phpunit",
                   "ctest", "npm test", "npm run test", "npm run lint", "pnpm test", "pnpm lint", "yarn test",
                   "yarn lint", "bun test", "cargo test", "cargo clippy", "cargo check", "go test", "go vet",
                   "dotnet test", "mvn test", "gradle test", "make test", "make check", "make lint", "ruff",
                   "flake8", "pylint", "mypy", "pyright", "eslint", "tsc", "golangci-lint", "shellcheck", "rubocop"]


@dataclass(frozen=True)
class Reflections:
    max_rounds: int = _key("int", "failed test or lint rounds per task since the last human message or passing "
                                  "round; the next failed round opens a gate (Aider: 3); 0 = off", 3)
    commands: list[str] = _list_key("shell commands that are a test or lint round", _CHECK_COMMANDS)  # noqa: RUF009 - a default_factory


@dataclass(frozen=True)
class Validation:
    max_consecutive: int = _key("int", "validation failures in a row before terminate(validation_failure)", 3)


@dataclass(frozen=True)
class Failures:
    max_consecutive: int = _key("int", "failures in a row before terminate(consecutive_failures)", 5)


@dataclass(frozen=True)
class Loop:
    gate_after: int = _key("int", "loop count (exact repeats of a failure) that opens a gate", 3)
    similarity: float = _key("float", "collaboration requests at least this similar are the same", 0.85)
    history: int = _key("int", "failures kept per task as evidence", 10)


@dataclass(frozen=True)
class Attempts:
    max_attempts: int = _key("int", "attempts of one task before a loop is considered", 3)
    window: float = _key("duration", "only attempts this recent count", 3600.0)
    force_next_after: int = _key("int", "no-progress attempts before force_next", 5)
    auto_unblock: bool = _key("bool", "grant unblock authority on a blocked spin (else escalate)", True)


@dataclass(frozen=True)
class Escalation:
    failures_per_model: int = _key("int", "consecutive failed iterations before the next model", 2)
    failures_at_top: int = _key("int", "failed iterations on the last model before a human is called", 3)
    models: list[str] = _list_key("model ladder for every agent, cheapest first; empty: each agent's own "  # noqa: RUF009
                                  "(escalation.ladders, else its adapter's: Claude haiku,sonnet,opus; Codex "
                                  "gpt-5.4-mini,gpt-5.4,gpt-5.5; Gemini gemini-3.5-flash-lite,gemini-3.8-flash,"
                                  "gemini-3.1-pro-preview)", [], "names")
    ladders: list[str] = _list_key("a model ladder per agent, AGENT=MODEL,MODEL,... (';'-separated outside TOML), "  # noqa: RUF009
                                   "AGENT an adapter (claude-code, codex) or an ACP agent (gemini, claude-acp, "
                                   "opencode)", [], "ladders")


@dataclass(frozen=True)
class Spill:
    threshold_chars: int = _key("int", "tool outputs longer than this go to a file", 200_000)
    preview_chars: int = _key("int", "characters of a spilled output shown inline", 1000)
    retention: float = _key("duration", "spill files older than this are removed", 24 * 3600.0)
    dir: str = _key("path", "where spill files go; empty = the user cache directory", "")
    max_session_bytes: int = _key("size", "bytes of spill files one session may write; past it an output is cut "
                                          "with a marker line (counted); 0 = no limit", 256 << 20)
    max_total_bytes: int = _key("size", "bytes of spill files all sessions together may leave on disk (those "
                                        "kept from earlier sessions count); past it outputs are cut; 0 = no limit",
                                2 << 30)


@dataclass(frozen=True)
class Store:
    retention: float = _key("duration", "the daemon deletes the history of sessions ended this long ago; 0 = keep",
                            30 * 86400.0)
    audit_retention: float = _key("duration", "the daemon deletes audit entries this old; 0 = keep", 0.0)


@dataclass(frozen=True)
class Gates:
    timeout: float = _key("duration", "a pending gate expires after this; 0 = never", 0.0)
    on_timeout: str = _key("choice:deny,approve", "what an expired gate decides", "deny")


@dataclass(frozen=True)
class Rules:
    disabled: list[str] = _list_key("rules switched off, e.g. alternation,monologue (names as in the rule table)",  # noqa: RUF009
                                    [], "rules")


@dataclass(frozen=True)
class Tools:
    exempt: list[str] = _list_key("tools the repetition rules skip: TOOL, or TOOL:RULE for one rule "  # noqa: RUF009
                                  "(e.g. Read:repetition)", [], "names")
    waiting: list[str] = _list_key("commands that only wait (a shell call that is just one of them): exempt "  # noqa: RUF009
                                   "from repetition, same_error, alternation, consecutive_failures and stall",
                                   WAITING_COMMANDS, "names")
    limits: list[str] = _list_key("one tool's own thresholds: TOOL:KEY=VALUE, KEY one of "  # noqa: RUF009
                                  + ", ".join(TOOL_KEYS) + " (e.g. WebFetch:repetition.max_identical_calls=10)",
                                  [], "tool_limits")


@dataclass(frozen=True)
class Recovery:
    on_loop: str = _key("choice:terminate,rewind", "a loop that would terminate a session that can rewind (Codex) "
                                                   "rewinds it to before the loop, with the loop's evidence as "
                                                   "guidance, instead", "terminate")
    max_rewinds: int = _key("int", "rewinds on_loop=rewind makes in one session; the loop after them terminates", 2)


@dataclass(frozen=True)
class Opinion:
    enabled: bool = _key("bool", "put ambiguous cases (a poll at its ceiling, alternation with changing output, a long "
                                 "monologue) to a model; needs the API key in the daemon's environment", False)
    model: str = _key("text", "the model asked for a second opinion", "claude-haiku-4-5")
    timeout: float = _key("duration", "the answer must come within this, or the rule's own verdict stands", 10.0)
    min_confidence: float = _key("float", "the model overrules a verdict only at this confidence or above (0-1)", 0.8)
    base_url: str = _key("text", "the Messages API address; empty = the SDK's default (or ANTHROPIC_BASE_URL)", "")
    api_key_env: str = _key("text", "the environment variable of the daemon that holds the API key (the key "
                                    "itself is never stored, logged or sent to the agent)", "ANTHROPIC_API_KEY")
    max_bytes: int = _key("size", "bytes of recent events sent with a question (sanitised, newest kept)", 16 << 10)
    max_calls: int = _key("int", "questions per session at most; then the rules decide alone; 0 = no limit", 20)


@dataclass(frozen=True)
class Hooks:
    max_sessions: int = _key("int", "live sessions attached by hooks at once; a new one past this is refused; "
                                    "0 = no limit", 256)
    max_per_agent: int = _key("int", "live hook sessions of one agent process at once (hooks whose agent process "
                                     "cannot be told count as one); a new one past this is refused; 0 = no limit",
                              16)
    idle_timeout: float = _key("duration", "a hook session with no event for this long ends as idle (a finished "
                                           "turn ends sooner: LOOPWARDEN_HOOK_IDLE); 0 = never", 3600.0)


@dataclass(frozen=True)
class Daemon:
    keep_agents: bool = _key("bool", "launched agents are held by the keeper, a small process that outlives the "
                                     "daemon: a daemon that crashed, was killed or is restarted for an upgrade "
                                     "takes them up again; false: they stop with the daemon (its guardian stops "
                                     "them); read when the daemon starts", True)


@dataclass(frozen=True)
class Sessions:
    continue_after_reboot: bool = _key("bool", "the daemon continues, in their agents' own conversations, the sessions "
                                               "that were running when an earlier daemon died (a reboot, a crash) and "
                                               "can be continued ('loopwarden continue'), with its own environment; "
                                               "read by the daemon from its config file and environment", False)
    continue_at_once: int = _key("int", "sessions continue_after_reboot starts at once (each waits for its agent to "
                                        "take the conversation up before the next starts)", 2)
    worktree: bool = _key("bool", "each launched session works in a git worktree and branch of its own "
                                  "(loopwarden/ID), made from the repository at its directory; your checkout is left "
                                  "as it is "
                                  "('loopwarden run --worktree', docs/worktrees.md)", False)


@dataclass(frozen=True)
class Kubernetes:
    place: str = _key("text", "where 'loopwarden run' places a session when --on does not say: local (a process "
                              "here), or kubernetes[:CONTEXT[/NAMESPACE]] (a pod of its own on a cluster, "
                              "docs/kubernetes.md)", "local")
    image: str = _key("text", "the image of a session's pod (--image): the agent's program and a python3 for "
                              "loopwarden's keeper", "")
    volume: str = _key("text", "what a session's pod works in, mounted at kubernetes.workdir: claim:NAME (a "
                               "PersistentVolumeClaim: it outlives the pod, so 'loopwarden continue' finds the "
                               "conversation there), host:PATH (a directory of the node), or empty (the pod's "
                               "own, gone with it)", "")
    workdir: str = _key("text", "where the volume is mounted in the pod: the agent's working directory and HOME",
                        "/workspace")
    cpu: str = _key("text", "CPU a session's pod may use, as Kubernetes writes it (500m, 2); empty = no limit; its "
                            "memory limit is limits.max_rss", "")
    pass_env: list[str] = _list_key("variables of the run's environment given to the agent in a pod (its API "  # noqa: RUF009
                                    "keys and endpoints); nothing else of your environment goes there",
                                    ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                                     "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"],
                                    "names")
    agent_user: int = _key("int", "the uid and gid the agent runs as in its pod, another than its keeper's (root in "
                                  "the container, allowed only to switch users): the agent cannot signal, trace or "
                                  "replace its keeper; the volume must be writable by it; 0 = the keeper's own user, "
                                  "which leaves the keeper to the agent's mercy", 1000)
    host_network: bool = _key("bool", "the pod shares its node's network (to reach a service on the node's "
                                      "loopback, such as a test's model server)", False)
    pull_policy: str = _key("choice:IfNotPresent,Always,Never", "when the node pulls the image", "IfNotPresent")
    hold: float = _key("duration", "how long the keeper in a pod holds its agent while no daemon reaches it (the "
                                   "API down, a laptop asleep) before it stops it", 3600.0)
    start_timeout: float = _key("duration", "how long a pod may take to run (scheduling, pulling its image) "
                                            "before the session ends as not started", 300.0)


@dataclass(frozen=True)
class Prices:
    models: list[str] = _list_key("model prices added to or replacing the shipped list prices (docs/cost.md): "  # noqa: RUF009
                                  "MODEL=IN,OUT[,CACHED[,CACHE_WRITE]] in USD per "
                                  "million tokens, MODEL matching ids it starts with (e.g. gpt-5=1.25,10,0.125)",
                                  [], "prices")


@dataclass(frozen=True)
class Budgets:
    day_usd: float = _key("float", "dollars every session together may spend in a local day; reached, every live "
                                   "session's next tool call waits (limits.budget_action); 0 = off; the daemon "
                                   "reads it, 'loopwarden set budgets.day_usd=20' changes it live", 0.0)
    project_usd: float = _key("float", "dollars the sessions of one project (their working directory) may spend in "
                                       "a local day; 0 = off", 0.0)
    projects: list[str] = _list_key("one project's own day budget: PATH=USD (a session whose working directory is "  # noqa: RUF009
                                    "PATH or under it counts as that project), e.g. /home/me/app=5",
                                    [], "project_budgets")


ALERT_EVENTS = ("gate", "ask", "budget", "stall", "ended")  # what the daemon can alert on (notify.events)


@dataclass(frozen=True)
class Notify:
    urls: list[str] = _list_key("where alerts go, as apprise URLs (ntfys://ntfy.sh/TOPIC, tgram://TOKEN/CHAT, "  # noqa: RUF009
                                "json://HOST:PORT/PATH, ...); empty = no alerts. They hold secrets: never shown "
                                "whole", [], "urls")
    events: list[str] = _list_key("what is alerted: gate (a gate opened), ask (an agent asks a human), budget (a "  # noqa: RUF009
                                  "budget reached holds a session), stall (silent past limits.stall_timeout), "
                                  "ended (terminated, crashed or lost)",
                                  list(ALERT_EVENTS), "alert_events")
    dedup_window: float = _key("duration", "the same alert (session, kind, reason) again within this is not sent; "
                                           "0 = send every one", 600.0)
    max_per_minute: int = _key("int", "alerts sent per minute at most (the rest counted, then summed up in one); "
                                      "0 = no limit", 10)
    retries: int = _key("int", "tries again after a failed send, waiting 1 s, 2 s, 4 s ...", 3)
    timeout: float = _key("duration", "one send's connect and read timeout", 10.0)
    link: str = _key("text", "a link added to each alert, {session} and {gate} filled in, e.g. "
                             "https://lw.example/gates/{session}:{gate}; empty = none", "")


@dataclass(frozen=True)
class Config:
    limits: Limits = field(default_factory=Limits)
    repetition: Repetition = field(default_factory=Repetition)
    validation: Validation = field(default_factory=Validation)
    failures: Failures = field(default_factory=Failures)
    condensation: Condensation = field(default_factory=Condensation)
    rereads: Rereads = field(default_factory=Rereads)
    chanting: Chanting = field(default_factory=Chanting)
    reflections: Reflections = field(default_factory=Reflections)
    loop: Loop = field(default_factory=Loop)
    attempts: Attempts = field(default_factory=Attempts)
    escalation: Escalation = field(default_factory=Escalation)
    spill: Spill = field(default_factory=Spill)
    gates: Gates = field(default_factory=Gates)
    store: Store = field(default_factory=Store)
    rules: Rules = field(default_factory=Rules)
    tools: Tools = field(default_factory=Tools)
    recovery: Recovery = field(default_factory=Recovery)
    opinion: Opinion = field(default_factory=Opinion)
    notify: Notify = field(default_factory=Notify)
    hooks: Hooks = field(default_factory=Hooks)
    daemon: Daemon = field(default_factory=Daemon)
    sessions: Sessions = field(default_factory=Sessions)
    prices: Prices = field(default_factory=Prices)
    budgets: Budgets = field(default_factory=Budgets)
    kubernetes: Kubernetes = field(default_factory=Kubernetes)
    preset: str = "recommended"

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {
            s.name: {k.name: getattr(getattr(self, s.name), k.name) for k in fields(getattr(self, s.name))}
            for s in fields(self)
            if s.name != "preset"
        }


SECTIONS: dict[str, type] = {
    "limits": Limits, "repetition": Repetition, "validation": Validation, "failures": Failures,
    "loop": Loop, "attempts": Attempts, "escalation": Escalation, "spill": Spill, "gates": Gates,
    "store": Store, "rules": Rules, "tools": Tools, "recovery": Recovery, "opinion": Opinion,
    "condensation": Condensation, "rereads": Rereads, "chanting": Chanting, "reflections": Reflections,
    "notify": Notify, "hooks": Hooks, "daemon": Daemon, "sessions": Sessions, "prices": Prices, "budgets": Budgets,
    "kubernetes": Kubernetes,
}

PRESETS: dict[str, dict[str, Any]] = {
    "recommended": {},
    "conservative": {
        "attempts.max_attempts": 5,
        "attempts.force_next_after": 8,
        "attempts.auto_unblock": False,
        "repetition.nudge_after": 3,
        "repetition.max_identical_calls": 8,
        "repetition.max_blocks": 5,
        "repetition.max_same_error": 5,
        "validation.max_consecutive": 5,
        "failures.max_consecutive": 8,
        "loop.gate_after": 5,
    },
    "aggressive": {
        "attempts.max_attempts": 2,
        "attempts.force_next_after": 3,
        "attempts.auto_unblock": True,
        "repetition.max_identical_calls": 3,
        "repetition.max_blocks": 2,
        "repetition.max_same_error": 2,
        "validation.max_consecutive": 2,
        "failures.max_consecutive": 3,
        "loop.gate_after": 2,
    },
}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE = re.compile(r"(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1 << 20, "mb": 10**6,
               "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_duration(text: str) -> float:
    """'30s', '5m', '4h', '1h30m', '250ms' or a bare number of seconds, to seconds."""
    s = text.strip().lower().replace(" ", "")
    try:
        value = float(s)
    except ValueError:
        pos, total = 0, 0.0
        for m in _DURATION.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(text) from None
        return total
    if value < 0 or value != value:
        raise ValueError(text)
    return value


def format_duration(seconds: float) -> str:
    """Seconds as a short human duration: 4h, 5m30s, 31.2s."""
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v) or "0s"


def _accepts(kind: str) -> str:
    if kind.startswith("choice:"):
        return "one of " + ", ".join(kind[7:].split(","))
    return {
        "duration": "a duration such as 30s, 5m or 4h",
        "int": "a whole number >= 0",
        "float": "a number >= 0",
        "bool": "true or false",
        "size": "a size such as 1048576, 64KiB or 1MiB",
        "path": "a directory path",
        "text": "a text",
        "list": "a list of names (comma-separated outside TOML)",
        "names": "a list of names, possibly empty (comma-separated outside TOML)",
        "rules": "a list of rule names, possibly empty: " + ", ".join(RULES),
        "tool_limits": "a list of TOOL:KEY=VALUE, possibly empty",
        "urls": "a list of URLs such as ntfys://ntfy.sh/mytopic, possibly empty (comma-separated outside TOML)",
        "alert_events": "a list of " + ", ".join(ALERT_EVENTS) + ", possibly empty",
        "prices": "a list of MODEL=IN,OUT[,CACHED[,CACHE_WRITE]], possibly empty (';'-separated outside TOML)",
        "project_budgets": "a list of PATH=USD, possibly empty, e.g. /home/me/app=5",
        "ladders": "a list of AGENT=MODEL,MODEL,..., possibly empty (';'-separated outside TOML)",
    }[kind]


def convert(key: str, kind: str, value: Any) -> Any:
    """Coerce a raw value (TOML value or string) to the key's type, or raise ConfigError."""
    converter = _CONVERTERS.get(kind) or (_choice if kind.startswith("choice:") else None)
    try:
        converted = converter(key, kind, value) if converter is not None else _INVALID
    except ConfigError:
        raise
    except ValueError:
        converted = _INVALID
    if converted is _INVALID:
        raise ConfigError(f"{key}: {value!r} is not valid; it accepts {_accepts(kind)}")
    return converted


_INVALID = object()  # what a converter returns for a value it does not accept


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _duration(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, str):
        value = parse_duration(value)
    if _number(value) and 0 <= value < math.inf:
        return float(value)  # 0 means off; infinity is not a limit anyone can show or reach
    return _INVALID


def _int(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, str):
        value = int(value.strip().replace("_", ""))
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else _INVALID


def _float(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, str):
        value = float(value.strip())
    return float(value) if _number(value) and 0 <= value < math.inf else _INVALID


def _bool(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return _INVALID


def _size(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    return int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()] if m else _INVALID


def _text(key: str, kind: str, value: Any) -> Any:
    return value if isinstance(value, str) else _INVALID


def _list(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    return _INVALID


def _alert_events(key: str, kind: str, value: Any) -> Any:
    events = _names(key, "names", value)
    unknown = [e for e in events if e not in ALERT_EVENTS]
    if unknown:
        raise ConfigError(f"{key}: unknown event {unknown[0]!r}; it accepts {', '.join(ALERT_EVENTS)}")
    return events


def _project_budgets(key: str, kind: str, value: Any) -> Any:
    return [f"{path}={usd:g}" for path, usd in project_budgets(key, _names(key, "names", value))]


def project_budgets(key: str, entries: list[str]) -> list[tuple[str, float]]:
    """'/home/me/app=5' entries as (absolute path without a trailing slash, dollars), or ConfigError."""
    out = []
    for entry in entries:
        path, sep, raw = entry.rpartition("=")
        path = path.strip().rstrip("/") or "/"
        if not sep or not path.startswith("/"):
            raise ConfigError(f"{key}: {entry!r} is not PATH=USD with an absolute PATH, e.g. /home/me/app=5")
        out.append((os.path.normpath(path), convert(f"{key} {path}", "float", raw)))
    return out


def _tool_limits(key: str, kind: str, value: Any) -> Any:
    return [f"{tool}:{name}={v}" for tool, name, v in tool_limits(key, _names(key, "names", value))]


def _entries(value: Any) -> list[str] | None:
    """A list of strings, or a string of them that ';' or a new line separates; None for anything else."""
    if isinstance(value, str):
        value = [v for v in re.split(r"[;\n]", value) if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def _prices(key: str, kind: str, value: Any) -> Any:
    """Price entries, each checked (prices.parse_entry); ';' or a new line separates them in a string."""
    value = _entries(value)
    if value is None:
        return _INVALID
    try:
        return [f"{model.strip()}={numbers.replace(' ', '')}" for model, _, numbers in
                (entry.partition("=") for entry in value if parse_entry(entry))]
    except PriceError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _ladders(key: str, kind: str, value: Any) -> Any:
    """Ladder entries, each checked (ladders.parse_entry); ';' or a new line separates them in a string."""
    value = _entries(value)
    if value is None:
        return _INVALID
    try:
        return [f"{agent}={','.join(models)}" for agent, models in map(parse_ladder, value)]
    except LadderError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _choice(key: str, kind: str, value: Any) -> Any:
    return value.strip() if isinstance(value, str) and value.strip() in kind[7:].split(",") else _INVALID


def _names(key: str, kind: str, value: Any) -> list[str]:
    """A possibly empty list of names; rule names are checked (with a did-you-mean) and aliases resolved."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(key)
    names = [v.strip() for v in value]
    if kind == "rules":
        names = [RULE_ALIASES.get(n, n) for n in names]
        for name in names:
            if name not in RULES:
                close = difflib.get_close_matches(name, RULES, n=1)
                hint = f" (did you mean {close[0]}?)" if close else f"; it accepts {', '.join(RULES)}"
                raise ConfigError(f"{key}: unknown rule {name!r}{hint}")
    return list(dict.fromkeys(names))


def _urls(key: str, value: Any) -> list[str]:
    """A possibly empty list of URLs (SCHEME://...); the message never repeats one (they hold secrets)."""
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key}: expected a list of URLs such as ntfys://ntfy.sh/mytopic")
    urls = [v.strip() for v in value if v.strip()]
    for n, url in enumerate(urls, 1):
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://\S+", url):
            raise ConfigError(f"{key}: entry {n} is not a URL (SCHEME://...), e.g. ntfys://ntfy.sh/mytopic")
    return list(dict.fromkeys(urls))



def _url_list(key: str, kind: str, value: Any) -> Any:
    return _urls(key, value)


_CONVERTERS: dict[str, Callable[[str, str, Any], Any]] = {
    "duration": _duration, "int": _int, "float": _float, "bool": _bool, "size": _size, "path": _text,
    "text": _text, "list": _list, "names": _names, "rules": _names, "urls": _url_list,
    "alert_events": _alert_events, "tool_limits": _tool_limits, "prices": _prices, "project_budgets": _project_budgets,
    "ladders": _ladders,
}

def redact_url(url: str) -> str:
    """A notify URL as it may be shown: its scheme only (the rest may be a token, a password, a private topic)."""
    scheme, sep, _ = url.partition("://")
    return f"{scheme}://…" if sep and scheme.isascii() and scheme.replace("+", "").isalnum() else "(not a URL)"


def tool_limits(key: str, entries: list[str]) -> list[tuple[str, str, Any]]:
    """'WebFetch:repetition.max_identical_calls=10' entries as (tool, key, converted value), or ConfigError.
    A tool name may hold colons (an MCP server's): the key is what follows the last one before '='."""
    out = []
    for entry in entries:
        left, sep, raw = entry.partition("=")
        tool, colon, name = left.rpartition(":")
        if not sep or not colon or not tool.strip():
            raise ConfigError(f"{key}: {entry!r} is not TOOL:KEY=VALUE, "
                              "e.g. WebFetch:repetition.max_identical_calls=10")
        if name.strip() not in TOOL_KEYS:
            raise ConfigError(f"{key}: {name.strip()!r} cannot be set per tool; it accepts {', '.join(TOOL_KEYS)}")
        name = name.strip()
        out.append((tool.strip(), name, convert(f"{key} {tool.strip()}:{name}", KEYS[name], raw)))
    return out


def _all_keys() -> dict[str, str]:
    return {f"{s}.{k.name}": k.metadata["kind"] for s, cls in SECTIONS.items() for k in fields(cls)}


KEYS: dict[str, str] = _all_keys()


def describe_keys() -> list[tuple[str, str, str, Any]]:
    """(key, accepts, help, default) for every key, for docs and --help."""
    base = Config()
    return [
        (f"{s}.{k.name}", _accepts(k.metadata["kind"]), k.metadata["help"], getattr(getattr(base, s), k.name))
        for s, cls in SECTIONS.items()
        for k in fields(cls)
    ]


def _unknown(key: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(key, KEYS, n=1)
    hint = f" (did you mean {close[0]}?)" if close else "; see 'loopwarden config keys'"
    return ConfigError(f"{where}: unknown key '{key}'{hint}")


def _apply(config: Config, overrides: Mapping[str, Any], where: str) -> Config:
    sections: dict[str, dict[str, Any]] = {}
    for key, raw in overrides.items():
        kind = KEYS.get(key)
        if kind is None:
            raise _unknown(key, where)
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = convert(key, kind, raw)
    for section, values in sections.items():
        config = replace(config, **{section: replace(getattr(config, section), **values)})
    return config


# The user's own sections of the same file, for the console and launches (supervisor/user_config.py)
USER_SECTIONS = ("console", "projects")


def _flatten_toml(data: dict[str, Any], where: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for section, table in data.items():
        if section == "preset" or section in USER_SECTIONS:
            continue
        if not isinstance(table, dict):
            raise _unknown(section, where)
        for name, value in table.items():
            flat[f"{section}.{name}"] = value
    return flat


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX):
            continue
        rest = var[len(ENV_PREFIX):].lower()
        for section in SECTIONS:
            if rest.startswith(section + "_"):
                key = f"{section}.{rest[len(section) + 1:]}"
                if key not in KEYS:
                    raise _unknown(key, f"environment variable {var}")
                out[key] = value
    return out


def parse_set(item: str, where: str = "--set") -> tuple[str, str]:
    """'section.key=value' to (key, value), or raise ConfigError."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{where} {item!r}: expected section.key=value, e.g. limits.max_runtime=30m")
    return key.strip(), value


# Keys a running session takes at once (`loopwarden set`). The others shaped how it started: its adapter's
# line limit and stdin backlog, its spiller, the model ladder it climbs, the daemon's store.
LIVE_KEYS = frozenset(
    {f"limits.{k}" for k in ("max_runtime", "stall_timeout", "max_iterations", "max_tokens", "max_cost_usd",
                             "budget_action", "max_output_bytes", "max_rss", "max_processes", "kill_grace")}
    | {k for k in KEYS if k.split(".")[0] in ("repetition", "validation", "failures", "attempts", "gates", "rules",
                                             "tools", "recovery", "condensation", "rereads", "chanting",
                                             "reflections", "prices")}
    | {"loop.gate_after", "loop.similarity", "escalation.failures_per_model", "escalation.failures_at_top"}
)


# Keys of the daemon itself that `loopwarden set KEY=VALUE` (no session) changes live.
DAEMON_LIVE_KEYS = frozenset({"budgets.day_usd", "budgets.project_usd", "budgets.projects"})


def value_of(config: Config, key: str) -> Any:
    section, name = key.split(".", 1)
    return getattr(getattr(config, section), name)


def show_value(key: str, value: Any) -> str:
    """A key's value as a person writes it: 2h for a duration, true for a bool."""
    kind = KEYS.get(key, "")
    if kind == "duration" and isinstance(value, (int, float)):
        return format_duration(value) if value else "0 (off)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "urls" and isinstance(value, list):
        value = [redact_url(str(v)) for v in value]
    if isinstance(value, list):
        return (";" if kind in ("prices", "ladders") else ",").join(map(str, value)) or "(none)"
    return str(value)


_DEFAULTS = Config()


def changed_settings(config: Config) -> dict[str, str]:
    """Every key whose value differs from its default (by the preset, a file, the environment, --set or
    `loopwarden set`), as a person writes it: what `loopwarden explain` calls retuned or switched off."""
    return {key: show_value(key, value_of(config, key)) for key in KEYS
            if value_of(config, key) != value_of(_DEFAULTS, key) and not _agents_own_ladder(key, config)}


def _agents_own_ladder(key: str, config: Config) -> bool:
    """The ladder a session's adapter brought (written into `escalation.models` at its launch) is its default."""
    return key == "escalation.models" and tuple(config.escalation.models) in OWN_LADDERS


def stored_settings(config: Config) -> dict[str, Any]:
    """Every key whose value differs from its preset's, as its value, secrets (alert URLs) left out: what a
    session's launch stores, so that a continue runs under the same settings (`from_stored`)."""
    base = _apply(Config(preset=config.preset), PRESETS.get(config.preset, {}), "preset")
    return {key: value_of(config, key) for key in KEYS
            if KEYS[key] != "urls" and value_of(config, key) != value_of(base, key)}


def from_stored(preset: str | None, values: Mapping[str, Any]) -> Config:
    """The config `stored_settings` stored, on the defaults of `preset`; ConfigError when it cannot be read."""
    chosen = preset or "recommended"
    if chosen not in PRESETS:
        raise ConfigError(f"preset {chosen!r} is unknown; it accepts one of {', '.join(PRESETS)}")
    config = _apply(Config(preset=chosen), PRESETS[chosen], f"preset {chosen}")
    return _apply(config, {k: v for k, v in values.items() if KEYS.get(k) != "urls"}, "the stored settings")


def change(config: Config, values: Mapping[str, Any]) -> Config:
    """A running session's config with `values` (raw strings or TOML scalars) applied, or ConfigError naming
    an unknown key, a bad value, or a key a running session cannot take (see LIVE_KEYS)."""
    if not values:
        raise ConfigError("set needs at least one KEY=VALUE, e.g. limits.max_runtime=2h")
    for key in values:
        if key not in KEYS:
            raise _unknown(key, "set")
        if key in DAEMON_LIVE_KEYS:
            raise ConfigError(f"set: {key} is the daemon's, for every session: give it without a session, "
                              f"e.g. loopwarden set {key}=VALUE")
        if key not in LIVE_KEYS:
            raise ConfigError(f"set: {key} cannot change on a running session (it shaped how the session "
                              "started); give it to 'loopwarden run --set' instead")
    return _apply(config, values, "set")


def change_daemon(config: Config, values: Mapping[str, Any]) -> Config:
    """The daemon's config with `values` of DAEMON_LIVE_KEYS applied, or ConfigError naming the key that is not
    one (a session's key names the form that takes it)."""
    if not values:
        raise ConfigError("set needs at least one KEY=VALUE, e.g. budgets.day_usd=20")
    for key in values:
        if key not in KEYS:
            raise _unknown(key, "set")
        if key in LIVE_KEYS:
            raise ConfigError(f"set: {key} is a session's: name the session, e.g. loopwarden set SESSION {key}=VALUE")
        if key not in DAEMON_LIVE_KEYS:
            raise ConfigError(f"set: {key} cannot change while the daemon runs; the daemon-wide keys it takes live "
                              f"are {', '.join(sorted(DAEMON_LIVE_KEYS))}")
    return _apply(config, values, "set")


def load_config(
    *,
    preset: str | None = None,
    file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    sets: list[str] | tuple[str, ...] = (),
) -> Config:
    """Build the effective configuration: defaults < preset < file < environment < --set."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    if file is not None:
        path = Path(file)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"config file {path}: cannot read it ({exc.strerror or exc})") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path}: not valid TOML ({exc})") from None
    chosen = preset or env.get(ENV_PREFIX + "PRESET") or data.get("preset") or "recommended"
    if not isinstance(chosen, str) or chosen not in PRESETS:
        raise ConfigError(f"preset {chosen!r} is unknown; it accepts one of {', '.join(PRESETS)}")
    config = _apply(Config(preset=chosen), PRESETS[chosen], f"preset {chosen}")
    if file is not None:
        config = _apply(config, _flatten_toml(data, f"config file {file}"), f"config file {file}")
    config = _apply(config, _env_overrides(env), "environment")
    set_values = dict(parse_set(item) for item in sets)
    return _apply(config, set_values, "--set")


def given_keys(file: str | os.PathLike[str] | None, env: Mapping[str, str]) -> set[str]:
    """The keys a `--config` file and the environment set: explicit choices, which a project's launch defaults
    do not override. A file or variable in error gives none here (load_config says why)."""
    keys: set[str] = set()
    try:
        keys |= set(_env_overrides(env))
        if file is not None:
            data = tomllib.loads(Path(file).read_text(encoding="utf-8"))
            keys |= set(_flatten_toml(data, f"config file {file}"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ConfigError):
        pass
    return keys
