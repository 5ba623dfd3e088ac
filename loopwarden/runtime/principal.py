"""Who is on the other end of the control socket: a person's terminal, or a process inside a supervised session.

The daemon classifies each connection once, when it connects, from /proc: the peer's process group,
session and parent chain are checked by locators, each a "pid belongs to session X" source. Two are
built in: what live sessions claim (a launched agent its process group, session and descendants, an
adopted process its descendants, a hooked Claude Code session the Claude process that ran its hook),
and descent from the daemon itself, which is a child subreaper, so an agent's double-forked orphan
comes back under it. A process inside a session is refused every operator action. The environment
(LOOPWARDEN_SESSION) can only make a client stricter: an agent can clear it, so nothing trusts its absence.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

from .procfs import MARK_ENV, ProcId, ProcInfo, ancestry, command_line, environment_value

EXPLANATION = "operator actions must come from a person's terminal, not from a supervised agent"
SESSION_ENV = MARK_ENV  # "s3@DAEMONPID.START": the session a launched agent runs in (containment.py sets it)
DAEMON_ENV = "LOOPWARDEN_SESSION_DAEMON"  # ... and the socket of the daemon that launched it

# Every op of the daemon, by who may call it; an op in none of these sets counts as an operator's.
READ_ONLY_OPS = frozenset({"ping", "list", "status", "logs", "processes", "gates", "actions", "exit_code",
                           "subscribe"})
HOOK_OPS = frozenset({"hook", "hook_wait"})  # sent by `loopwarden hook`, which runs inside Claude Code
OPERATOR_OPS = frozenset({"run", "adopt", "approve", "deny", "grant", "reset", "inject", "pause", "resume",
                          "kill", "shutdown", "prune", "set", "rewind", "restart", "notify_test"})

# Clients that watch only: the console served read-only to a browser (`loopwarden web --read-only`) says so
# on every request, so the daemon refuses it every operator op even if the console let one through.
WATCH_ONLY_KINDS = frozenset({"web-readonly"})

TRACE_ATTEMPTS = 3  # an ancestor that exits mid-walk re-parents its children: walk again
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "tcsh", "csh", "ash", "yash", "busybox"})
LAUNCHERS = frozenset({"env", "timeout", "nice", "nohup", "stdbuf", "setsid", "ionice", "flock", "uv", "uvx",
                       "pipx", "npx"})
_SHELL_VALUE_OPTIONS = frozenset({"--rcfile", "--init-file"})


@dataclass(frozen=True, slots=True)
class Claim:
    """A live session's claim on `root` and its descendants (with `group`, also on the process group and
    session that `root` leads, as a launched agent does)."""

    session: str
    root: ProcId
    what: str  # how a refusal names the root: "the agent", "the adopted process", ...
    group: bool = False


def operator_op(op: str) -> bool:
    """Whether only a person may call `op`: every op that is neither read-only nor a hook's."""
    return op not in READ_ONLY_OPS and op not in HOOK_OPS


@dataclass(frozen=True, slots=True)
class Inside:
    """Where a process runs: a session (None: some agent's, not known which) and how that was seen."""

    session: str | None
    how: str

    def refusal(self, pid: int) -> str:
        where = f"session {self.session}" if self.session else "a supervised session"
        return f"refused: pid {pid} runs inside {where} ({self.how}); {EXPLANATION}"


Locator = Callable[[Sequence[ProcInfo]], Inside | None]
"""A source of "this process belongs to session X": given the peer and its ancestors (nearest first)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request: the client's kind (its own word) and what the daemon measured of its process."""

    kind: str
    pid: int
    uid: int
    user: str
    tty: str | None
    inside: Inside | None
    traced: bool  # its parent chain was read up to init
    chain: tuple[ProcInfo, ...] = ()
    claimed: str | None = None  # the session its environment names; believed only against itself

    @property
    def actor(self) -> str:
        return f"uid {self.uid} ({self.user})"

    @property
    def client(self) -> str:
        return f"{self.kind} pid {self.pid}"

    def acting_as(self, kind: object, claimed: object = None) -> Principal:
        """This connection's principal for one request: its declared client kind and session claim."""
        return replace(self, kind=str(kind or "client")[:40],
                       claimed=claimed[:40] if isinstance(claimed, str) and claimed else None)

    def refusal(self, op: str) -> str | None:
        """Why `op` is refused to this principal (one line), or None when it may call it."""
        if not operator_op(op):
            return None
        if self.kind in WATCH_ONLY_KINDS:
            return f"refused: a read-only client ({self.kind}) cannot {op}"
        if self.inside:
            return self.inside.refusal(self.pid)
        if not self.traced:
            return (f"refused: pid {self.pid} could not be traced to a person's terminal (it, or a parent, "
                    f"exited while it connected); {EXPLANATION}")
        if self.claimed:
            return Inside(self.claimed, f"{SESSION_ENV} says so").refusal(self.pid)
        return None

    def audit_facts(self) -> dict[str, object]:
        """The columns of the audit log that describe this principal."""
        inside = (self.inside.session or "?") if self.inside else self.claimed
        return {"client_kind": self.kind, "pid": self.pid, "uid": self.uid, "user": self.user, "tty": self.tty,
                "inside_session": inside}


# ---- /proc ----------------------------------------------------------------------

def traced(chain: Sequence[ProcInfo]) -> bool:
    """Whether a chain reaches the top (a process whose parent is 0: init, or kthreadd)."""
    return bool(chain) and chain[-1].ppid == 0


def tty_name(tty_nr: int) -> str | None:
    """A controlling terminal's name from /proc's tty_nr (0: none)."""
    if tty_nr == 0:
        return None
    major = (tty_nr >> 8) & 0xFFF
    minor = (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
    if 136 <= major <= 143:  # Unix98 pty slaves
        return f"pts/{(major - 136) * 256 + minor}"
    if major == 4:
        return f"tty{minor}" if minor < 64 else f"ttyS{minor - 64}"
    return f"tty({major},{minor})"


@lru_cache(maxsize=64)
def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


# ---- classifying a peer ----------------------------------------------------------------

def claimed_by(claims: Iterable[Claim]) -> Locator:
    """A locator for what live sessions claim: their roots, descendants and (for agents) groups."""
    roots: dict[int, Claim] = {}
    groups: dict[int, Claim] = {}
    for claim in claims:
        roots[claim.root.pid] = claim
        if claim.group:
            groups[claim.root.pid] = claim

    def locate(chain: Sequence[ProcInfo]) -> Inside | None:
        for depth, stat in enumerate(chain):
            claim = roots.get(stat.pid)
            if claim and claim.root.matches(stat):
                how = f"it is {claim.what}" if depth == 0 else f"it descends from {claim.what}, pid {stat.pid}"
                return Inside(claim.session, how)
            for leader, name in ((stat.pgid, "process group"), (stat.sid, "session")):
                claim = groups.get(leader)
                if claim:
                    how = f"its {name}" if depth == 0 else f"it descends from pid {stat.pid}, in the agent's {name}"
                    return Inside(claim.session, how)
        return None

    return locate


def claude_code_tool(attached: Sequence[str]) -> Locator:
    """A locator for Claude Code's tools that left its process tree (setsid, a double fork: re-parented to
    init, not to the daemon): while Claude Code sessions are attached by hooks, a process whose environment
    says it runs under Claude Code (CLAUDECODE=1, which Claude Code gives every tool) is inside one. An
    agent can clear the variable first; the README's security model says so."""

    def locate(chain: Sequence[ProcInfo]) -> Inside | None:
        if not attached or not chain or environment_value(chain[0].pid, "CLAUDECODE") != "1":
            return None
        return Inside(attached[0] if len(attached) == 1 else None,
                      "CLAUDECODE=1 in its environment: a tool of Claude Code, which is attached")

    return locate


def descends_from(daemon_pid: int, exempt: Collection[int]) -> Locator:
    """A locator for the daemon's descendants: its agents and their orphans, which it reaps as a
    subreaper; its own helpers (`exempt`, the guardian) are not agents."""

    def locate(chain: Sequence[ProcInfo]) -> Inside | None:
        for child, parent in pairwise(chain):
            if parent.pid == daemon_pid:
                if child.pid in exempt:
                    return None
                return Inside(None, f"it descends from the loopwarden daemon, pid {daemon_pid}, as an agent's "
                                    "orphan does")
        return None

    return locate


def classify(pid: int, uid: int, locators: Sequence[Locator]) -> Principal:
    """What the daemon knows of a peer when it connects: its tty and the session it runs inside, if any."""
    chain = ancestry(pid)
    for _ in range(TRACE_ATTEMPTS - 1):
        if traced(chain):
            break
        chain = ancestry(pid)
    inside = None
    if chain:
        for locate in locators:
            inside = locate(chain)
            if inside:
                break
    return Principal(kind="client", pid=pid, uid=uid, user=user_name(uid),
                     tty=tty_name(chain[0].tty_nr) if chain else None, inside=inside, traced=traced(chain),
                     chain=chain)


# ---- hooks: which process is Claude Code ------------------------------------------------

def hook_agent(chain: Sequence[ProcInfo], stop: Collection[int]) -> ProcId | None:
    """The Claude Code process that ran a hook (chain[0]), or None when it cannot be told.

    CLAUDE_PID in the hook's environment when it names an ancestor; else the nearest ancestor that is
    not a shell running a command, a launcher or loopwarden. The walk gives up at an interactive
    shell (the hook was run by hand, and that shell is where a person types `loopwarden approve`), at
    init and at `stop` (the daemon and its ancestors), so none of those is ever marked.
    """
    ancestors: list[ProcInfo] = []
    for stat in chain[1:]:
        if stat.pid <= 1 or stat.pid in stop:
            break
        ancestors.append(stat)
    said = environment_value(chain[0].pid, "CLAUDE_PID") if chain else None
    named = next((stat for stat in ancestors if str(stat.pid) == said), None)
    if named and not _is_shell(named, command_line(named.pid)):
        return ProcId(named.pid, named.start)
    for stat in ancestors:
        argv = command_line(stat.pid)
        if _is_shell(stat, argv):
            if not _runs_command(argv):
                return None
        elif stat.comm not in LAUNCHERS and not _is_loopwarden(stat, argv):
            return ProcId(stat.pid, stat.start)
    return None


def _is_shell(stat: ProcInfo, argv: Sequence[str]) -> bool:
    return stat.comm in SHELLS or (bool(argv) and Path(argv[0].lstrip("-")).name in SHELLS)


def _runs_command(argv: Sequence[str]) -> bool:
    """Whether a shell runs a command (-c) or a script, rather than reading what a person types."""
    if not argv or argv[0].startswith("-"):  # a login shell
        return False
    args = iter(argv[1:])
    for arg in args:
        if arg in _SHELL_VALUE_OPTIONS:
            next(args, None)
        elif arg.startswith("--"):
            continue
        elif arg[:1] in ("-", "+") and len(arg) > 1:
            flags = arg[1:]
            if arg[0] == "-" and ("i" in flags or "s" in flags):
                return False
            if "c" in flags:
                return True
            if "o" in flags or "O" in flags:
                next(args, None)
        else:
            return True  # a script file
    return False


def _is_loopwarden(stat: ProcInfo, argv: Sequence[str]) -> bool:
    return stat.comm == "loopwarden" or any(Path(a).name == "loopwarden" or a.startswith("loopwarden.")
                                            for a in argv[:3])


# ---- the environment of launched agents -------------------------------------------------

def agent_environment(socket: str | os.PathLike[str]) -> dict[str, str]:
    """What tells a launched agent's own loopwarden calls which daemon they run under (the session's mark,
    SESSION_ENV, comes with its containment): a claim naming another daemon is not this one's business."""
    return {DAEMON_ENV: os.path.realpath(socket)}


def env_refusal(environ: Mapping[str, str], socket: str | os.PathLike[str], pid: int) -> str | None:
    """The refusal a client gives itself when its environment says it runs inside a session of the
    daemon at `socket` (the daemon's own words), or None."""
    session = env_claim(environ, socket)
    return Inside(session, f"{SESSION_ENV} says so").refusal(pid) if session else None


def env_claim(environ: Mapping[str, str], socket: str | os.PathLike[str]) -> str | None:
    """The session this process's environment says it runs inside, for the daemon at `socket`; a claim
    naming another daemon is ignored, so loopwarden's own tests still run inside a supervised agent."""
    session = environ.get(SESSION_ENV)
    if not session or environ.get(DAEMON_ENV) != os.path.realpath(socket):
        return None
    return session.split("@", 1)[0]  # containment's mark, "s3@DAEMONPID.START", names the session first


def daemon_ancestor(chain: Sequence[ProcInfo]) -> int | None:
    """The pid of a loopwarden daemon, any profile's, among the ancestors in `chain` (nearest first, the
    process itself first): an agent chooses its LOOPWARDEN_HOME, not its ancestors."""
    for info in chain[1:]:
        argv = command_line(info.pid)
        if any(os.path.basename(word) == "loopwarden" and following == "serve" for word, following in
               pairwise(argv[:4])):  # `python -m loopwarden serve`, `loopwarden serve`
            return info.pid
    return None
