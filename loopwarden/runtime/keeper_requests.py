"""What the keeper answers on its control connection (keeper_wire.py has the protocol): one method per request."""

from __future__ import annotations

import os
import selectors
import subprocess
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from . import keeper_wire as wire
from .kept import KeptAgent

if TYPE_CHECKING:
    from .keeper import Keeper


class Requests:
    """The daemon's requests, each carried out on the keeper's state and answered with a dict."""

    def __init__(self, keeper: Keeper) -> None:
        self.keeper = keeper

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (an error for an unknown or failed one, never an exception)."""
        op = message.get("op")
        handler = _HANDLERS.get(str(op))
        try:
            return handler(self, message) if handler else {"error": f"unknown request {op!r}"}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return {"error": f"{op}: {exc}"}

    def hello(self, message: dict[str, Any]) -> dict[str, Any]:
        self.keeper.revival.hello(message.get("daemon"))
        sessions = [agent.describe() for agent in self.keeper.agents.values()]
        return {"pid": os.getpid(), "generation": self.keeper.generation, "sessions": sessions,
                "output": self.keeper.offers_output}

    def bye(self, message: dict[str, Any]) -> dict[str, Any]:
        self.keeper.revival.left(planned=True)
        return {}

    def shutdown(self, message: dict[str, Any]) -> dict[str, Any]:
        """The daemon stops for good (stop-daemon): it is not started again, and what it left running is stopped."""
        self.keeper.revival.never_again()
        self.keeper.stop_all("the daemon stopped")
        for agent in list(self.keeper.agents.values()):
            if agent.code is not None:
                self.keeper.drop(agent)
        return {}

    def spawn(self, message: dict[str, Any]) -> dict[str, Any]:
        sid = str(message["sid"])
        if sid in self.keeper.agents:
            raise ValueError(f"session {sid} is kept already")
        user = message.get("user")
        agent = spawn(sid, [str(a) for a in message["argv"]], {str(k): str(v) for k, v in message["env"].items()},
                      message.get("cwd") or None, max_runtime=message.get("max_runtime"),
                      grace=float(message.get("grace") or 5.0), user=int(user) if user is not None else None)
        self.keeper.agents[sid] = agent
        self.keeper.by_pid[agent.pid] = agent
        for stream in agent.streams.values():
            assert stream.fd is not None
            self.keeper.fds.want(stream.fd, selectors.EVENT_READ, partial(self.keeper.on_output, agent, stream))
        return {"pid": agent.pid}

    def signal(self, message: dict[str, Any]) -> dict[str, Any]:
        agent = self.keeper.agents[str(message["sid"])]
        agent.signal(int(message["sig"]), bool(message.get("group", True)))
        return {}

    def stored(self, message: dict[str, Any]) -> dict[str, Any]:
        """What the daemon has stored: its output up to `out` [offset, line] and `err` (forgotten here), its stdout
        lines up to `seq` (the stdin frames answering them go to the agent)."""
        agent = self.keeper.agents.get(str(message.get("sid")))
        if agent is None:
            return {}
        out = message.get("out")
        if isinstance(out, list) and len(out) == 2:
            agent.streams["out"].stored(wire.count(out[0]))
            agent.stdin.stored(wire.count(out[1]))
        if "err" in message:
            agent.streams["err"].stored(wire.count(message.get("err")))
        if "seq" in message:
            agent.stdin.stored(wire.count(message.get("seq")))
        self.keeper.pump(agent)
        return {}

    def consumed(self, message: dict[str, Any]) -> dict[str, Any]:
        """The daemon read an unfinished stdout line from `line` up to `upto`: when everything before the line is
        stored (and forgotten here), what it read of the line is forgotten too, so a line longer than the keeper
        keeps goes on; a daemon that dies in it loses that part (counted at take-up)."""
        agent = self.keeper.agents.get(str(message.get("sid")))
        if agent is not None:
            agent.streams["out"].read_of_line(wire.count(message.get("line")), wire.count(message.get("upto")))
            self.keeper.pump(agent)
        return {}

    def limit(self, message: dict[str, Any]) -> dict[str, Any]:
        """The operator changed a session's max_runtime: the keeper's own deadline follows."""
        agent = self.keeper.agents.get(str(message.get("sid")))
        if agent is not None:
            agent.limit(message.get("max_runtime"))
        return {}

    def take(self, message: dict[str, Any]) -> dict[str, Any]:
        """A new daemon takes a session up, having stored its stdout up to line `seq`: stdin frames an earlier
        daemon queued for later lines are dropped (it reads and judges those lines again, and answers them)."""
        agent = self.keeper.agents[str(message["sid"])]
        agent.stdin.taken(wire.count(message.get("seq")))
        agent.reported = False
        self.keeper.pump(agent)
        self.keeper.report_exits()
        return agent.describe()

    def release(self, message: dict[str, Any]) -> dict[str, Any]:
        agent = self.keeper.agents.get(str(message.get("sid")))
        if agent is not None:
            self.keeper.drop(agent)
        return {}


_HANDLERS: dict[str, Callable[[Requests, dict[str, Any]], dict[str, Any]]] = {
    "hello": Requests.hello, "bye": Requests.bye, "shutdown": Requests.shutdown, "spawn": Requests.spawn,
    "signal": Requests.signal, "stored": Requests.stored, "take": Requests.take, "release": Requests.release,
    "consumed": Requests.consumed, "limit": Requests.limit,
}


def spawn(sid: str, argv: list[str], env: dict[str, str], cwd: str | None, *, max_runtime: float | None,
          grace: float, user: int | None = None) -> KeptAgent:
    """Start an agent in a session and group of its own, its three pipes ours; raises OSError when it cannot.
    `user`: the uid and gid it runs as (a pod's keeper runs its agent as another user than its own, so that the
    agent can neither signal, trace nor replace it), with no supplementary groups."""
    as_user: dict[str, Any] = {} if user is None else {"user": user, "group": user, "extra_groups": []}
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=in_r, stdout=out_w, stderr=err_w,
                                start_new_session=True, close_fds=True, **as_user)
    except BaseException:
        for fd in (out_r, err_r, in_w):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w, in_r):
            os.close(fd)
    proc.returncode = 0  # the keeper reaps its children itself (waitpid(-1)): Popen must never wait for it
    for fd in (out_r, err_r, in_w):
        os.set_blocking(fd, False)
    return KeptAgent(sid, proc.pid, out_r, err_r, in_w, max_runtime=float(max_runtime) if max_runtime else None,
                     grace=grace)


