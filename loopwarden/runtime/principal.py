"""Who is on the other end of a door: a person's terminal, or a process inside a supervised session.

The daemon judges a process from /proc: its process group, session and parent chain are checked by
locators, each a "pid belongs to session X" source: what live sessions claim (a launched agent its process
group, session and descendants, an adopted process its descendants), what hooks claimed (the agent
process that ran a hook, for as long as it lives), descent from the daemon itself (a child subreaper, so an
agent's double-forked orphan comes back under it), Claude Code's escaped tools, and, needing no daemon, a
live daemon's session mark up the ancestry and any loopwarden daemon among the ancestors. A chain that
cannot be read up to init counts as inside. A process inside a session is refused every operator action,
at every door (the socket here; the web console and `--host` through `whois`, runtime/doors.py). The
environment (LOOPWARDEN_SESSION) can only make a client stricter: an agent can clear it, so nothing trusts
its absence.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from itertools import pairwise

from .hook_claims import PERSON_PROGRAMS
from .procfs import ANCESTRY_LIMIT, MARK_ENV, ProcId, ProcInfo, alive, ancestry, command_line, environment_value

EXPLANATION = "operator actions must come from a person's terminal, not from a supervised agent"
SESSION_ENV = MARK_ENV  # "s3@DAEMONPID.START": the session a launched agent runs in (containment.py sets it)
DAEMON_ENV = "LOOPWARDEN_SESSION_DAEMON"  # ... and the socket of the daemon that launched it

# Every op of the daemon, by who may call it; an op in none of these sets counts as an operator's.
READ_ONLY_OPS = frozenset({"ping", "list", "status", "logs", "processes", "gates", "actions", "exit_code",
                           "subscribe", "whois", "diff"})
HOOK_OPS = frozenset({"hook", "hook_wait"})  # sent by `loopwarden hook`, which runs inside Claude Code
OPERATOR_OPS = frozenset({"run", "adopt", "approve", "deny", "grant", "reset", "inject", "pause", "resume",
                          "kill", "shutdown", "handover", "prune", "set", "rewind", "restart", "continue",
                          "takeover", "notify_test", "worktree", "tag"})

# Clients that watch only: the console served read-only to a browser (`loopwarden web --read-only`) says so
# on every request, so the daemon refuses it every operator op even if the console let one through.
WATCH_ONLY_KINDS = frozenset({"web-readonly"})

KEEPER_MODULE = "loopwarden.runtime.keeper"  # its agents are a daemon's (`runs_daemon`)
TRACE_ATTEMPTS = 3  # an ancestor that exits mid-walk re-parents its children: walk again


@dataclass(frozen=True, slots=True)
class Claim:
    """A live session's claim on `root` and its descendants (with `group`, also on the process group and
    session that `root` leads, as a launched agent does)."""

    session: str | None  # None: an agent whose hook made no session (refused by the bounds), still an agent
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
            return (f"refused: pid {self.pid} could not be traced to a person's terminal (its ancestry ends "
                    f"short of init: a parent exited meanwhile, or it runs more than {ANCESTRY_LIMIT} processes "
                    f"deep); {EXPLANATION}")
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


def process_owner(pid: int) -> int | None:
    """The uid a process runs as, or None when there is no such process."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def owner_refusal(pid: int, owner: int | None) -> str | None:
    """Why a process that cannot be seen, or runs as another user, may not act here; None for our own."""
    if owner is None:
        return f"refused: pid {pid} cannot be seen (it exited, or is hidden)"
    if owner != os.getuid():
        return f"refused: pid {pid} belongs to uid {owner}, not to this user (uid {os.getuid()})"
    return None


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


def claude_code_tool(attached: Sequence[str], claimed: bool = False) -> Locator:
    """A locator for Claude Code's tools that left its process tree (setsid, a double fork: re-parented to
    init, not to the daemon): while Claude Code sessions are attached by hooks (`attached`), or a process a
    hook claimed still lives (`claimed`), a process whose environment says it runs under Claude Code
    (CLAUDECODE=1, which Claude Code gives every tool) is inside one. An agent can clear the variable
    first; the security model (docs/security.md) says so."""

    def locate(chain: Sequence[ProcInfo]) -> Inside | None:
        if not (attached or claimed) or not chain or environment_value(chain[0].pid, "CLAUDECODE") != "1":
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


def marked_ancestor() -> Locator:
    """A locator for a process whose environment, or an ancestor's, carries the session mark of a daemon that
    still runs (any profile's): clearing the variable in the last step does not clear it from the agent that
    ran it, and a process that left its daemon's tree keeps the mark it was started with."""

    def locate(chain: Sequence[ProcInfo]) -> Inside | None:
        if not traced(chain):  # refused as untraced anyway: no environment read per ancestor of a deep chain
            return None
        for depth, stat in enumerate(chain):
            mark = environment_value(stat.pid, SESSION_ENV)
            owner = mark_owner(mark) if mark else None
            if mark and owner is not None and alive(owner):
                whose = "its" if depth == 0 else f"its ancestor pid {stat.pid}'s"
                return Inside(mark.split("@", 1)[0][:40], f"{SESSION_ENV} in {whose} environment")
        return None

    return locate


def mark_owner(mark: str) -> ProcId | None:
    """The daemon a session mark ("s3@DAEMONPID.START") names, or None when it is not a mark."""
    try:
        daemon, start = mark.split("@", 1)[1].split(".", 1)
        return ProcId(int(daemon), int(start))
    except (IndexError, ValueError):
        return None


def under_a_daemon() -> Locator:
    """A locator for the agents of any loopwarden daemon, this profile's or another's: a daemon among the
    ancestors (an agent chooses its LOOPWARDEN_HOME, not its ancestors)."""

    def locate(chain: Sequence[ProcInfo]) -> Inside | None:
        daemon = daemon_ancestor(chain) if traced(chain) else None
        if daemon is None:
            return None
        return Inside(None, f"it descends from the loopwarden daemon pid {daemon}, as every agent of it does")

    return locate


def offline_locators() -> list[Locator]:
    """What tells an agent with no daemon to ask: the marks and the daemons among its ancestors."""
    return [marked_ancestor(), under_a_daemon()]


def daemon_locators(claims: Iterable[Claim], daemon_pid: int, helpers: Collection[int],
                    attached: Sequence[str], hooks_claimed: bool = False) -> list[Locator]:
    """Every locator a daemon judges with: its sessions' claims, descent from itself (but for its
    `helpers`), Claude Code's escaped tools while any is attached or claimed, and what needs no daemon at
    all. Every door (the socket, the web console, `--host`) asks the daemon, so all judge by this list."""
    return [claimed_by(claims), descends_from(daemon_pid, helpers), claude_code_tool(attached, hooks_claimed),
            *offline_locators()]


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
        if info.comm not in PERSON_PROGRAMS and runs_daemon(command_line(info.pid)):
            return info.pid
    return None


def runs_daemon(argv: Sequence[str]) -> bool:
    """Whether a command line is a daemon's or a keeper's (whose agents are a daemon's): `loopwarden serve`,
    `python -m loopwarden serve`, `python -m loopwarden.runtime.keeper` (a tmux server that was started with
    `tmux new loopwarden serve` keeps those words further in: not one)."""
    words = list(argv[:4])
    if words[:1] and Path(words[0]).name.startswith("python"):
        words = words[1:]
        if words[:2] == ["-m", KEEPER_MODULE]:
            return True
        if words[:2] != ["-m", "loopwarden"]:
            return False
        words = ["loopwarden", *words[2:]]
    return len(words) >= 2 and Path(words[0]).name == "loopwarden" and words[1] == "serve"
