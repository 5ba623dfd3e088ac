"""The check every door other than the daemon's socket makes before it lets a process act as the operator.

The socket judges each client by its process (principal.py). The web console sees a browser's TCP peer, and
`--host` reaches another machine's daemon, which sees only sshd; both ask this machine's daemon who the
process is (its `whois` op), so all doors decide by one function on the same facts: the live sessions'
claims, descent from the daemon, marks, and a walk that could not reach init counted as inside. With no
daemon running there are no sessions of this profile, and the same judgement is made here on what needs no
daemon (an agent of another profile's daemon is still an agent). Anything else fails closed.
"""

from __future__ import annotations

import os

from ..paths import Paths
from .client import Client, DaemonError, DaemonTimeout
from .principal import classify, offline_locators, owner_refusal, process_owner


def operator_refusal(paths: Paths, pid: int | None = None) -> str | None:
    """Why the process `pid` (None: this one) may not act as the operator, in one line, or None."""
    try:
        client = Client.connect(paths, autostart=False, name="whois")
    except DaemonTimeout as exc:  # one listens but does not answer: it may hold sessions, so no guessing
        return f"refused: the daemon could not be asked who is acting ({exc})"
    except DaemonError:  # nothing listens: no session of this profile to be inside
        return offline_refusal(pid)
    except OSError as exc:
        return f"refused: the daemon could not be asked who is acting ({exc.strerror or exc})"
    with client:
        try:
            answer = client.request("whois", **({"pid": pid} if pid is not None else {}))
        except DaemonError as exc:
            hint = "; restart it ('loopwarden stop-daemon'), it is older than this loopwarden" if "unknown op" in str(
                exc) else ""
            return f"refused: the daemon could not say who is acting ({exc}){hint}"
    if not isinstance(answer, dict):
        return "refused: the daemon's answer about who is acting was not understood"
    refusal = answer.get("refusal")
    return str(refusal) if refusal else None


def offline_refusal(pid: int | None = None) -> str | None:
    """The same judgement without a daemon: marks of live daemons and daemons among the ancestors."""
    pid = os.getpid() if pid is None else pid
    owner = process_owner(pid)
    return owner_refusal(pid, owner) or classify(pid, owner or 0, offline_locators()).refusal("operate")
