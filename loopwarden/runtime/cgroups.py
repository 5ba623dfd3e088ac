"""A cgroup v2 per session, under the daemon's own cgroup, so no process of a session can get away.

A process group is left with one `setsid()`, and a double fork leaves the process tree;
a cgroup is inherited by every child and only a writer of `cgroup.procs` can leave it.
Layout: `<the daemon's cgroup>/loopwarden-<daemon pid>-<daemon start>/<session id>`.

A launched process must be inside its cgroup before it can fork. anyio's `open_process`
has no `preexec_fn` (and a preexec_fn is unsafe in a process with threads), and Python
cannot `clone3(CLONE_INTO_CGROUP)`; so the agent is started through `/bin/sh`, which
writes its own pid to `cgroup.procs` and then `exec`s the agent: the agent's first
instruction already runs in its cgroup, at the cost of one shell start (about 1 ms).

Standard library only: the guardian imports it too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .procfs import proc_id

DISABLE_ENV = "LOOPWARDEN_CGROUPS"  # "off" makes the daemon track descendants by /proc instead
PREFIX = "loopwarden-"
SHELL = "/bin/sh"
_JOIN = 'echo $$ > "$0" 2>/dev/null; exec "$@"'  # if joining fails the agent still starts; /proc tracking covers it
_SHOW_CGROUP = 'while read -r line; do echo "$line"; done < /proc/self/cgroup'  # no program but the shell
KILL_ROUNDS = 50  # without cgroup.kill (before Linux 5.14): kill what is listed, again, until nothing is


def own_cgroup() -> Path | None:
    """The directory of this process's cgroup v2, or None when there is no v2 hierarchy."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            relative = next((line.strip()[3:] for line in f if line.startswith("0::")), None)
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    if relative is None:
        return None
    for fields in mounts:
        dash = fields.index("-") if "-" in fields else -1
        if dash < 0 or fields[dash + 1] != "cgroup2":
            continue
        root, mount_point = fields[3], fields[4]
        if root != "/" and not (relative + "/").startswith(root.rstrip("/") + "/"):
            continue  # a mount of a subtree that does not hold us
        inside = relative[len(root.rstrip("/")):] if root != "/" else relative
        path = Path(mount_point) / inside.lstrip("/")
        if path.is_dir():
            return path
    return None


class SessionCgroup:
    """One session's cgroup: every process the agent starts, wherever it goes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside this cgroup (see the module's docstring)."""
        return [SHELL, "-c", _JOIN, str(self.path / "cgroup.procs"), *argv]

    def pids(self) -> set[int]:
        """Every process in this cgroup and the cgroups below it."""
        out: set[int] = set()
        stack = [str(self.path)]
        while stack:  # os.walk's generator costs more than the reads: this runs per session per look
            directory = stack.pop()
            try:
                fd = os.open(os.path.join(directory, "cgroup.procs"), os.O_RDONLY | os.O_CLOEXEC)
                try:
                    out.update(map(int, os.read(fd, 1 << 20).split()))
                finally:
                    os.close(fd)
                # cgroups below it (a cgroup directory's link count is 2 without): read after its processes, so a
                # cgroup made meanwhile, and a process moved into it, is seen
                if os.stat(directory).st_nlink != 2:
                    with os.scandir(directory) as entries:
                        stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
            except (OSError, ValueError):
                continue
        return out

    def populated(self) -> bool:
        """Whether any live process is in it (zombies are not)."""
        try:
            with open(self.path / "cgroup.events", encoding="ascii") as f:
                return "populated 1" in f.read()
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL every process in it, new forks included (cgroup.kill), or round by round without it."""
        try:
            with open(self.path / "cgroup.kill", "w", encoding="ascii") as f:
                f.write("1")
            return
        except FileNotFoundError:
            pass
        except OSError:
            return  # the cgroup is gone
        for _ in range(KILL_ROUNDS):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass

    def remove(self) -> bool:
        """Remove the (empty) cgroup and those below it; False while a process is still inside."""
        try:
            os.rmdir(self.path)  # the usual case, with no cgroup below: one call, no walk
            return True
        except FileNotFoundError:
            return True
        except OSError:
            pass
        for directory, _dirs, _files in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                continue
            except OSError:
                return False
        return True


class CgroupTree:
    """The daemon's container cgroup, holding one cgroup per session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.root = SessionCgroup(path)

    @classmethod
    def create(cls, env: dict[str, str] | None = None) -> tuple[CgroupTree | None, str]:
        """The container for this daemon when cgroup v2 is there, writable and joinable, and why (not)."""
        env = dict(os.environ) if env is None else env
        if env.get(DISABLE_ENV, "").lower() in ("0", "off", "no", "false"):
            return None, f"cgroups turned off by {DISABLE_ENV}"
        parent = own_cgroup()
        if parent is None:
            return None, "no cgroup v2 hierarchy"
        if not os.access(parent, os.W_OK) or not os.access(parent / "cgroup.procs", os.W_OK):
            return None, f"cgroup {parent} is not writable"
        me = proc_id(os.getpid())
        path = parent / f"{PREFIX}{os.getpid()}-{me.start if me else 0}"
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            return None, f"cannot create a cgroup in {parent} ({exc.strerror or exc})"
        tree = cls(path)
        why = tree._probe()
        if why:
            tree.root.remove()
            return None, why
        removed = remove_stale(parent)
        return tree, f"a cgroup per session under {path}" + (f"; removed {removed} stale" if removed else "")

    def _probe(self) -> str | None:
        """Start one process through the wrapper and check it landed in the cgroup."""
        probe = self.session("probe")
        if probe is None:
            return f"cannot create a cgroup in {self.path}"
        try:
            done = subprocess.run(probe.wrap([SHELL, "-c", _SHOW_CGROUP]), capture_output=True, timeout=10, check=False,
                                  text=True)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cannot start {SHELL} ({exc})"
        finally:
            probe.remove()
        if f"/{self.path.name}/probe" not in done.stdout:
            return f"a process cannot be moved into {probe.path}"
        return None

    def session(self, sid: str) -> SessionCgroup | None:
        """A new cgroup for one session, or None when it cannot be made."""
        path = self.path / sid
        try:
            path.mkdir(exist_ok=True)
        except OSError:
            return None
        return SessionCgroup(path)

    def close(self) -> bool:
        """Kill whatever is left and remove the container; False when something could not be removed."""
        if self.root.populated():
            self.root.kill()
        return self.root.remove()


def remove_stale(parent: Path) -> int:
    """Remove the empty containers of daemons that are gone; a populated one is left to its guardian."""
    removed = 0
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
    except OSError:
        return 0
    for name in names:
        pid, _, start = name[len(PREFIX):].partition("-")
        if not (pid.isdigit() and start.isdigit()):
            continue
        me = proc_id(int(pid))
        if me is not None and me.start == int(start):
            continue  # its daemon still runs
        stale = SessionCgroup(parent / name)
        if not stale.populated() and stale.remove():
            removed += 1
    return removed
