"""A session in words, from its snapshot: why it ended (what `ls`, `status` and the console's ENDED column say)
what loopwarden did to it (their INTERVENED column), and where it runs (a pod session's pod and node)."""

from __future__ import annotations

import signal
from typing import Any

from ..supervisor.verdicts import FINAL_STATES, SessionState, Termination
from ..supervisor.visible import visible

# a few words per reason, for a table cell; the full sentence is the session's termination_text
SHORT: dict[Termination, str] = {
    Termination.MAX_RUNTIME: "max runtime",
    Termination.REPETITION_LOOP: "repeated calls",
    Termination.VALIDATION_FAILURE: "invalid output",
    Termination.CONSECUTIVE_FAILURES: "failures in a row",
    Termination.MAX_ITERATIONS: "max iterations",
    Termination.BUDGET: "over budget",
    Termination.LOOP_GATE_DENIED: "gate denied",
    Termination.OPERATOR: "killed by operator",
    Termination.CRASHED: "supervisor failed",
    Termination.LOST: "daemon restarted",
    Termination.DAEMON_STOPPED: "daemon stopped",
}
# how a lost session ended (lost.py), in a few words
LOST_WORDS: dict[str, str] = {"guardian": "killed by guardian", "gone": "found gone", "running": "still running?",
                               "host": "host lost", "pod": "daemon died"}
# what loopwarden did to the agent, a word per verdict action, in the order they are shown
INTERVENTION_WORDS: dict[str, str] = {
    "nudge": "nudged", "block": "blocked", "gate": "gated", "escalate": "escalated", "force_next": "moved on",
    "unblock_authority": "granted", "spill": "spilled"}
_PREFIX = "session terminated: "
_KNOWN = frozenset(str(t) for t in Termination)  # a store written by a newer loopwarden may hold others


def signal_name(number: int) -> str:
    """`SIGKILL` for 9; `signal 77` for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_words(code: int | None) -> str:
    """`exited 0`, `exited 3`, or `killed by SIGKILL` for a process a signal ended (a negative code)."""
    if code is None:
        return "exited"
    return f"killed by {signal_name(-code)}" if code < 0 else f"exited {code}"


def ending(snap: dict[str, Any], *, short: bool = False) -> str:
    """Why the session ended (empty while it runs); `short` gives a few words instead of the full sentence.

    A termination by loopwarden wins over the exit code: the process dying of the SIGTERM that ended it
    is not the story. Agent text in the reason goes through `visible`.
    """
    state = str(snap.get("state") or "")
    if state not in FINAL_STATES:
        return ""
    raw = str(snap.get("termination") or "")
    if not raw or raw == Termination.EXITED:
        if snap.get("ended_as"):  # a session with no process of ours: "idle: no hook event for 1h"
            said = str(snap["ended_as"])
            return visible(said.split(":", 1)[0] if short else said)
        words = exit_words(snap.get("exit_code"))
        failure = snap.get("failure")
        return visible(f"{words}: {failure}") if failure and not short else words
    head = "lost" if state == SessionState.LOST or raw == Termination.LOST else "terminated"
    text = str(snap.get("termination_text") or "")
    lost = snap.get("lost")
    if short and head == "lost" and isinstance(lost, dict) and lost.get("how") in LOST_WORDS:
        return f"lost: {LOST_WORDS[lost['how']]}"
    if head == "lost" and isinstance(lost, dict) and lost.get("how") == "host" and text and not short:
        return visible(text)  # "host lost: pod lw-s3-... was deleted"
    if short or not text:
        return visible(f"{head}: {SHORT.get(Termination(raw), raw) if raw in _KNOWN else raw}")
    return visible(f"{head}: {text.removeprefix(_PREFIX)}")


def interventions(snap: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(action, its word, how many times) for each kind of intervention the session had, in display order."""
    counts = snap.get("interventions") or {}
    return [(action, words, int(counts[action])) for action, words in INTERVENTION_WORDS.items()
            if counts.get(action)]


def intervened(snap: dict[str, Any]) -> str:
    """`nudged 2 blocked 1`, or `-` for a session left alone."""
    return " ".join(f"{words} {count}" for _, words, count in interventions(snap)) or "-"


def _pod(snap: dict[str, Any]) -> dict[str, Any] | None:
    pod = snap.get("pod")
    return pod if isinstance(pod, dict) else None


def pod_words(snap: dict[str, Any]) -> str:
    """Where a pod session's agent runs, for `status` and the console's detail: `lw-s3-ab12cd in agents on node
    node1 (kubernetes:prod/agents), image local/py3:1`; "" for a session on this machine. The names are the
    cluster's, so they go through `visible`."""
    pod = _pod(snap)
    if pod is None:
        return ""
    context, namespace = pod.get("context"), pod.get("namespace")
    place = f"kubernetes:{context}/{namespace}" if context and namespace else str(pod.get("on") or "kubernetes")
    if not pod.get("pod"):
        return visible(f"being created ({place}), image {pod.get('image') or '?'}")
    words = str(pod["pod"]) + (f" in {namespace}" if namespace else "") \
        + (f" on node {pod['node']}" if pod.get("node") else ", not on a node yet") \
        + f" ({place}), image {pod.get('image') or '?'}"
    return visible(words)


def where_cell(snap: dict[str, Any]) -> str:
    """Where the agent runs, for the console's WHERE cell: `node1/lw-s3-ab12cd` for a pod session (`?/...` before
    the pod has a node, its place before it has a name); "" for a session on this machine. A long node name is
    cut (a cloud's run to 40 characters and more), the pod's name never."""
    pod = _pod(snap)
    if pod is None:
        return ""
    if not pod.get("pod"):
        return visible(str(pod.get("on") or "kubernetes")[:40])
    node = str(pod.get("node") or "?")
    return visible(f"{node if len(node) <= 24 else node[:23] + '…'}/{pod['pod']}")


def where_words(snap: dict[str, Any]) -> str:
    """Where the agent runs, for `ls`'s WHERE column: `pod node1` (`pod` before it has a node), "" here."""
    pod = _pod(snap)
    if pod is None:
        return ""
    return visible(f"pod {pod['node']}" if pod.get("node") else "pod")
