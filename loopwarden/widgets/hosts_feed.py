"""Several daemons in one console: a feed per host (this machine's, and others' over ssh), merged.

Each remote host's feed reaches its daemon through a forwarded socket (runtime/hosts.py) and, like
the local one, reconnects by itself. Sessions and gates of a remote host are keyed `box:s3` and
`box:s3:g1` (local ones keep `s3`), so keys stay unique across hosts; a request is routed by that
prefix to the host it names, with the prefix taken off. The console sees the same interface as a
single Feed, so it needs no second code path.
"""

from __future__ import annotations

import time
from typing import Any

from textual.notifications import SeverityLevel

from ..paths import Paths, default_paths
from ..runtime.client import Client, DaemonError
from ..runtime.doors import operator_refusal
from ..runtime.hosts import LOCAL, Tunnel, split_ref
from ..runtime.principal import operator_op
from ..supervisor.visible import visible
from .feed import Feed

GONE = "host gone — reconnecting"


class RemoteFeed(Feed):
    """The feed of one remote host: the forward is (re)started before each subscription."""

    def __init__(self, tunnel: Tunnel, **options: Any) -> None:
        super().__init__(tunnel.paths, autostart=False, **options)
        self.tunnel = tunnel

    def _connect(self, autostart: bool) -> Client:
        return Client.connect(self.tunnel.ensure(), autostart=False, name=self.client, host=self.tunnel.host)

    def close(self) -> None:
        super().close()
        self.tunnel.close()


def key_of(host: str, sid: str) -> str:
    """The console's key of a session: its id on this machine, `host:id` on another."""
    return sid if host == LOCAL else f"{host}:{sid}"


class HostsFeed:
    """One Feed per host behind the interface of one: sessions keyed per host, requests routed by key."""

    def __init__(self, feeds: dict[str, Feed]) -> None:
        self.feeds = feeds
        self.hosts = tuple(feeds)
        self.remotes = frozenset(h for h in feeds if h != LOCAL)
        self._current: dict[str, dict[str, dict[str, Any]]] = {host: {} for host in feeds}
        self._up: dict[str, bool | None] = dict.fromkeys(feeds)
        self._lost_at: dict[str, float] = {}  # when each host not connected now went (wall clock)
        self._notices: list[tuple[str, SeverityLevel]] = []

    @classmethod
    def attach(cls, local: Paths | None, hosts: list[str], *, autostart: bool = True) -> HostsFeed:
        """This machine's daemon (unless `local` is None) and each host's, over ssh."""
        feeds: dict[str, Feed] = {LOCAL: Feed(local, autostart=autostart)} if local is not None else {}
        for host in hosts:
            feeds[host] = RemoteFeed(Tunnel(host))
        return cls(feeds)

    # ---- the Feed interface the console reads --------------------------------------------
    def start(self) -> None:
        for feed in self.feeds.values():
            feed.start()

    def close(self) -> None:
        for feed in self.feeds.values():
            feed.close()

    def wait_ready(self, timeout: float = 15.0) -> bool:
        return all(feed.wait_ready(timeout) for feed in self.feeds.values())

    @property
    def ready(self) -> bool:
        """Any host has answered (or failed): the console draws what it has, the others join later."""
        return any(feed.ready for feed in self.feeds.values())

    @property
    def connected(self) -> bool:
        """Some host is connected; a request to one that is not is refused by `request`."""
        return any(feed.connected for feed in self.feeds.values())

    @property
    def error(self) -> str | None:
        """The whole status line's trouble: only when no host is connected (else see `host_trouble`)."""
        if self.connected or not self.ready:
            return None
        return "  ·  ".join(f"{host}: {feed.error}" for host, feed in self.feeds.items() if feed.error) or None

    @property
    def host_trouble(self) -> list[str]:
        """A few words for each host not connected now, for the status line."""
        return [visible(f"{host}: {self.gone_text(host)}") for host, feed in self.feeds.items()
                if feed.ready and not feed.connected]

    def gone_text(self, host: str) -> str:
        feed = self.feeds[host]
        why = feed.error or ""
        if not feed.generation:  # never reached: why, in ssh's or the daemon's words (the host is named already)
            return why.removeprefix(f"host {host}: ")
        return f"{GONE} (attempt {feed.attempt})"

    @property
    def daemon(self) -> dict[str, Any]:
        """The health of the first host whose daemon reports trouble (else of the first host)."""
        healths = [feed.daemon for feed in self.feeds.values()]
        troubled = [h for h in healths if (h.get("store") or {}).get("open") is False
                    or any((h.get("store") or {}).get("unwritten", {}).values()) or h.get("dropped_events")]
        return (troubled or healths or [{}])[0]

    @property
    def reconnected_at(self) -> float | None:
        times = [feed.reconnected_at for feed in self.feeds.values() if feed.reconnected_at is not None]
        return max(times) if times else None

    def take_sessions(self) -> list[dict[str, Any]] | None:
        """Every host's sessions when any host subscribed anew or came or went (its rows marked), else None."""
        changed = False
        for host, feed in self.feeds.items():
            fresh = feed.take_sessions()
            if fresh is not None:
                labelled = (self._label(host, snap) for snap in fresh)
                self._current[host] = {snap["id"]: snap for snap in labelled if snap.get("id")}
                changed = True
            up = feed.connected
            if up != self._up[host]:
                if host in self.remotes and self._up[host] and not up:
                    self._notices.append((f"host {host}: {GONE}", "error"))
                    self._lost_at[host] = time.time()
                elif host in self.remotes and up and feed.generation > 1:
                    back = f"host {host} reconnected: its sessions and gates are current"
                    self._notices.append((back, "information"))
                self._up[host] = up
                changed = True
        if not changed:
            return None
        merged = []
        for host, snaps in self._current.items():
            gone = self._gone_since(host)
            merged += [{**snap, "host_gone": gone} if gone else snap for snap in snaps.values()]
        return merged

    def _gone_since(self, host: str) -> float | None:
        """When `host` went, while it is not connected (its rows then show their last state, stale); else None."""
        if self._up[host]:
            self._lost_at.pop(host, None)
            return None
        return self._lost_at.setdefault(host, time.time())

    def take_notices(self) -> list[tuple[str, SeverityLevel]]:
        """(words, severity) for each host that went or came back since the last call, once."""
        notices, self._notices = self._notices, []
        return notices

    def drain(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for host, feed in self.feeds.items():
            for message in feed.drain():
                data = message.get("data")
                if message.get("kind") == "session" and isinstance(data, dict) and data.get("id"):
                    data = self._label(host, data)
                    self._current[host][data["id"]] = data
                    if not self._up[host]:  # sent just before the host went: its row stays marked
                        data = {**data, "host_gone": self._gone_since(host)}
                    message = {**message, "data": data}
                out.append(message)
        return out

    def _label(self, host: str, snap: dict[str, Any]) -> dict[str, Any]:
        sid = str(snap.get("id") or "")
        return {**snap, "id": key_of(host, sid), "sid": sid, "host": host}

    # ---- requests ---------------------------------------------------------------------------
    def route(self, key: str) -> tuple[str, str]:
        """(host, the host's own reference) of a session or gate key."""
        host, rest = split_ref(key, self.remotes)
        if host == LOCAL and LOCAL not in self.feeds:
            raise DaemonError(f"no host attached is named by {key!r}", "request")
        return host, rest

    def where(self, key: str) -> tuple[Paths, str]:
        """The profile to reach a session's daemon through, and the session's id there (the detail view)."""
        host, sid = self.route(key)
        return self.feeds[host].paths, sid

    def request(self, op: str, **fields: Any) -> Any:
        """One request, to the host its session or gate names (`gates`: every connected host's, merged)."""
        if op == "gates":
            return self._gates()
        host = next(iter(self.feeds))
        for name in ("session", "gate"):
            if isinstance(fields.get(name), str):
                host, fields[name] = self.route(fields[name])
        if op == "run" and LOCAL not in self.feeds:
            raise DaemonError("a new session starts on this machine only; open the console without --no-local")
        feed = self.feeds[host]
        if host != LOCAL and operator_op(op):  # that daemon sees only sshd: this machine's judges this console
            local = self.feeds[LOCAL].paths if LOCAL in self.feeds else default_paths()
            refusal = operator_refusal(local)
            if refusal:
                raise DaemonError(refusal, "refused")
        if not feed.connected:
            raise DaemonError(f"host {host} is not connected now ({visible(self.gone_text(host))})")
        result = feed.request(op, **fields)
        if op == "run" and isinstance(result, dict) and result.get("id"):
            result = {**result, "id": key_of(host, str(result["id"]))}
        return result

    def _gates(self) -> list[dict[str, Any]]:
        """Every connected host's pending gates in one queue, oldest first, keyed as the sessions are."""
        gates: list[dict[str, Any]] = []
        for host, feed in self.feeds.items():
            if not feed.connected:
                continue
            try:
                pending = feed.request("gates")
            except (DaemonError, OSError):
                continue  # gone meanwhile: its feed says so
            for gate in pending or []:
                if host != LOCAL:
                    gate = {**gate, "ref": key_of(host, str(gate.get("ref"))),
                            "session": key_of(host, str(gate.get("session")))}
                gates.append({**gate, "host": host})
        gates.sort(key=lambda g: g.get("opened_at") or 0)
        return gates
