"""`loopwarden explain SESSION`: which rules fired and why, in words, from the stored verdicts and the
settings the session ran with (which rules were off or retuned, and what `loopwarden set` changed)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
import textwrap
from typing import Any

import click
import orjson

from ..runtime.client import DaemonError
from ..supervisor.config import RULES, format_duration
from ..supervisor.messages import clip
from ..supervisor.visible import visible_tree
from .common import call, connect, failure

# verdicts no rule gives: people and the supervisor acting
_ACTORS = {
    "operator": "an operator acted (kill, grant, guidance on a gate)",
    "gate": "a gate was decided: denied by a person, or expired",
    "daemon": "the daemon stopped (stop-daemon, or a signal to it)",
    "supervisor": "the supervisor itself: an agent that stopped reading its input",
}
_PAGE = 10_000
_WIDTH = 100
_REASON_SHOWN = 160  # characters of a reason (--json has them whole)
MAX_VERDICTS = 1_000_000  # read at most this many (counted, not kept: memory stays one page)


def summarise(snapshot: dict[str, Any], verdicts: Iterable[dict[str, Any]],
              changes: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """The explanation as data: per rule its count by action and its first and last verdict, oldest
    rule first; the settings that differ from the defaults; the changes made while it ran."""
    rules: dict[str, dict[str, Any]] = {}
    total = 0
    for v in verdicts:
        total += 1
        rule = str(v.get("rule") or "?")
        entry = rules.get(rule)
        brief = {"seq": v.get("seq"), "action": v.get("action"), "reason": v.get("reason")}
        if entry is None:
            entry = rules[rule] = {"rule": rule, "why": RULES.get(rule) or _ACTORS.get(rule, "?"), "count": 0,
                                   "actions": {}, "first": brief}
        entry["count"] += 1
        action = str(v.get("action"))
        entry["actions"][action] = entry["actions"].get(action, 0) + 1
        entry["last"] = brief
    stored = snapshot.get("settings")
    settings: dict[str, Any] = stored if isinstance(stored, dict) else {}
    disabled = [r for r in str(settings.get("rules.disabled", "")).split(",") if r and r != "(none)"]
    return {
        "session": snapshot.get("id"), "name": snapshot.get("name"), "state": snapshot.get("state"),
        "termination": snapshot.get("termination"), "termination_text": snapshot.get("termination_text"),
        "runtime": snapshot.get("runtime"), "events": snapshot.get("events"), "preset": snapshot.get("preset"),
        "settings": settings, "disabled": disabled, "settings_known": "settings" in snapshot,
        "changes": [{"ts": c.get("ts"), "note": c.get("note"), "by": c.get("user") or c.get("actor")}
                    for c in changes if c.get("action") == "set" and c.get("outcome") == "done"],
        "verdicts": total, "rules": list(rules.values()),
        "quiet": [r for r in RULES if r not in rules and r not in disabled],
    }


def render(e: dict[str, Any]) -> str:
    """The explanation for a person: one screen, agent text made visible."""
    e = visible_tree(e)
    state = str(e.get("state") or "?")
    if e.get("termination"):
        state += f" ({e['termination']})"
    runtime = e.get("runtime")
    lines = [f"{e['session']} {e.get('name') or ''}: {state}"
             + (f" after {format_duration(runtime)}" if isinstance(runtime, (int, float)) else "")
             + f", {e.get('events') or 0:,} events, {e['verdicts']:,} verdicts"]
    if e.get("termination_text"):
        lines.append(f"  ended: {e['termination_text']}")
    lines.append(_settings_line(e))
    for c in e["changes"]:
        lines.append(f"  changed while running by {c.get('by') or '?'}: {c.get('note')}")
    if not e["rules"]:
        lines.append("no rule fired.")
    else:
        lines.append("rules that fired, in the order they first did:")
    for r in e["rules"]:
        actions = ", ".join(f"{a} {n}" for a, n in r["actions"].items())
        lines.append(f"  {r['rule']}  {r['count']}x ({actions}): {r['why']}")
        for which in ("first", "last") if r["count"] > 1 else ("first",):
            v = r[which]
            lines.append(f"    {which}, at line {v['seq']}: {v['action']}: {clip(str(v['reason']), _REASON_SHOWN)}")
    if e["quiet"]:
        lines += textwrap.wrap("rules that never fired: " + ", ".join(e["quiet"]), _WIDTH, subsequent_indent="  ")
    return "\n".join(lines) + "\n"


def _settings_line(e: dict[str, Any]) -> str:
    if not e["settings_known"]:
        return f"settings: preset {e.get('preset') or '?'} (this session predates recorded settings)"
    off = ", ".join(e["disabled"]) or "none"
    retuned = [f"{k}={v}" for k, v in e["settings"].items() if k != "rules.disabled"]
    return (f"settings: preset {e.get('preset') or 'recommended'}; rules switched off: {off}; retuned: "
            + (", ".join(retuned) if retuned else "none (every other key at its default)"))


def stored_verdicts(session: str) -> Iterator[dict[str, Any]]:
    """Every stored verdict of a session, oldest first, a page at a time."""
    with connect() as client:
        try:
            cursor, read = 0, 0
            while read < MAX_VERDICTS:
                page = client.request("logs", session=session, tables=["verdicts"], limit=_PAGE,
                                      verdicts_after=cursor)
                yield from page["verdicts"]
                read += len(page["verdicts"])
                cursor = page["next"]["verdicts_after"]
                if not page.get("more") or not page["verdicts"]:
                    return
        except DaemonError as exc:
            raise failure(exc) from None


@click.command()
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as one JSON object.")
def explain(session: str, as_json: bool) -> None:
    """Which rules fired on a session and why, in words, with the settings it ran with.

    For each rule that fired: what it watches, how often it fired by action, and
    its first and last verdict (the input line and the reason). Then which rules
    were switched off or retuned (rules.disabled, tools.exempt, any key away
    from its default) and what `loopwarden set` changed while it ran. Works on
    running and ended sessions (while their history is kept).

    \b
    Examples:
      loopwarden explain s3
      loopwarden explain --json fixer | jq '.rules[] | {rule, count}'
    """
    snapshot = call("status", session=session)
    sid = str(snapshot.get("id", session))
    changes = call("actions", session=sid, limit=1000)
    result = summarise(snapshot, stored_verdicts(sid), changes)
    if as_json:
        click.echo(orjson.dumps(result).decode())
    else:
        click.echo(render(result), nl=False)

