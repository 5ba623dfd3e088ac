"""Agents are the kernel's likelier victims under memory pressure, not the daemon and its guardian.

Every launched agent starts with an `oom_score_adj` RAISE_BY above the daemon's (at most 1000), which its
children inherit; the guardian keeps the daemon's. The agent writes it itself before its program starts:
it is launched through `/bin/sh`, whose builtin `echo` writes `/proc/self/oom_score_adj` (any process may
raise its own; only a privileged one may lower it) and which then `exec`s the agent, the way a session's
cgroup is joined (cgroups.py). The daemon checks once at its start that a shell can do this; if not, it
says so once in its log and launches agents as they are.

Standard library only.
"""

from __future__ import annotations

import subprocess

from .cgroups import SHELL

RAISE_BY = 500
MOST = 1000
_OWN = "/proc/self/oom_score_adj"
_PROBE = 'echo "$0" > /proc/self/oom_score_adj && read -r v < /proc/self/oom_score_adj && echo "$v"'


def own_score() -> int | None:
    """This process's oom_score_adj, or None where there is none (no /proc)."""
    try:
        with open(_OWN, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def agent_score() -> tuple[int | None, str]:
    """The oom_score_adj agents start with (None: they keep the daemon's), and a line for the daemon's log."""
    own = own_score()
    if own is None:
        return None, "agents keep the daemon's OOM score: /proc/self/oom_score_adj cannot be read"
    score = min(MOST, own + RAISE_BY)
    if score <= own:
        return None, f"agents keep the daemon's OOM score: the daemon's oom_score_adj is {own} already"
    trouble = _probe(score)
    if trouble:
        return None, f"agents keep the daemon's OOM score ({own}): {trouble}"
    return score, (f"agents start with oom_score_adj {score} (the daemon's {own} + {RAISE_BY}): under memory "
                   "pressure the kernel ends them before the daemon and its guardian")


def _probe(score: int) -> str | None:
    """Why a shell cannot raise its own oom_score_adj to `score`, or None when it can."""
    try:
        done = subprocess.run([SHELL, "-c", _PROBE, str(score)], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot start {SHELL} ({exc})"
    if done.stdout.strip() != str(score):
        return f"a process cannot raise its own ({(done.stderr.strip() or done.stdout.strip())[:200] or 'refused'})"
    return None


def wrap(argv: list[str], score: int, join: str | None = None) -> list[str]:
    """`argv` started with oom_score_adj `score`, first joining the cgroup whose `cgroup.procs` is `join`."""
    script = f"echo {int(score)} > /proc/self/oom_score_adj 2>/dev/null; "
    if join is not None:
        script += 'echo $$ > "$0" 2>/dev/null; '  # as cgroups.py's wrap: the agent's first instruction runs there
    return [SHELL, "-c", script + 'exec "$@"', join or "loopwarden-agent", *argv]
