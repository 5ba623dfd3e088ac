"""Commands that talk to the daemon: run and watch sessions, and act on them."""

from __future__ import annotations

import sys
import time
from typing import Any

import click
import orjson

from ..runtime.client import Client, DaemonError, DaemonTimeout
from ..runtime.ending import ending, exit_words, intervened, pod_words, where_words
from ..runtime.hosts import HostError
from ..runtime.principal import EXPLANATION
from ..runtime.spill_bounds import SESSION_KEY, TOTAL_KEY, size_words
from ..supervisor.cost import quota_words, show_cost, show_source
from ..supervisor.counters import RESETTABLE
from ..supervisor.verdicts import FINAL_STATES, SessionState, Termination, final_exit_code
from ..supervisor.tags import TagError, change_tags, check_tags
from ..supervisor.visible import visible, visible_tree
from ..runtime.store_filter import EVERY_RECORD, RecordFilter
from .notify import alerts_lines
from .record_filters import parse_when, record_filter
from .common import (DaemonFail, Fail, Unresponsive, build_config, call, config_options, connect, failure, ask_first,
                     listed, profile_paths, shutdown_daemon)
from .remote import host_names, route
from .spending import spending_lines, total_line

FINAL = FINAL_STATES


def _json_out(data: Any) -> None:
    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode())


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    from ..supervisor.config import format_duration  # the config module's dataclasses cost ls more than it lists

    return format_duration(max(0.0, seconds))


def _state(snap: dict[str, Any]) -> str:
    """The STATE column: terminated(max_runtime), exited 0, killed by SIGKILL, running, ..."""
    state = str(snap.get("state") or "?")
    if state == SessionState.LOST:  # lost: killed by guardian, found gone, still running?
        return ending(snap, short=True) + (", continuable" if snap.get("resumable") else "")
    if snap.get("termination") and snap["termination"] != state:
        return visible(f"{state}({snap['termination']})")
    if state == SessionState.EXITED and snap.get("exit_code") is not None:
        return exit_words(snap["exit_code"])
    if state == SessionState.EXITED and snap.get("ended_as"):  # a hook session: "exited(idle)"
        return visible(f"{state}({str(snap['ended_as']).split(':', 1)[0]})")
    return visible(state)


def keeper_line(keeper: dict[str, Any]) -> str:
    """The keeper in `status`: what it holds, and what a daemon that died cost (read again, or lost)."""
    line = (f"keeper pid {keeper.get('pid')}, holding {keeper.get('holds', 0)} agents "
            + ("(new agents are kept)" if keeper.get("keep_agents") else "(new agents are not kept)"))
    taken = keeper.get("taken_up") or 0
    if taken:
        line += (f"; took up {taken} sessions at start: {_bytes(keeper.get('resent_bytes') or 0)} read again, "
                 f"{_bytes(keeper.get('lost_bytes') or 0)} lost, {keeper.get('answers_dropped') or 0} answers "
                 "to unstored lines dropped (their lines judged again)")
    return line


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _ending(snap: dict[str, Any]) -> str:
    """How a session ended, in words (runtime/ending.py, as the console says it)."""
    return ending(snap) or visible(str(snap.get("state")))


def _end_line(sid: str, snap: dict[str, Any]) -> str:
    """'session s3 terminated(max_runtime): max runtime exceeded (2s)', 'session s3 killed by SIGKILL'."""
    words = _ending(snap)
    detail = words.split(": ", 1)[1] if ": " in words else ""
    state = "lost" if snap.get("state") == SessionState.LOST else _state(snap)  # (the detail says how)
    return f"loopwarden: session {sid} {state}" + (f": {detail}" if detail else "")


def _mem(rss: int | None) -> str:
    if not rss:
        return "-"
    return f"{rss / (1 << 20):.0f}M"


def _say_renamed(started: dict[str, Any]) -> None:
    """Names are unique among live sessions: say so when the one asked for (or the command's) was taken."""
    if started.get("renamed_from"):
        click.echo(f"loopwarden: a live session is already named {visible(str(started['renamed_from']))!r}; "
                   f"{started['id']} is named {visible(str(started['name']))!r}", err=True)


def _follow(client: Any, sid: str, as_json: bool) -> int:
    """Print a session's events and verdicts until it ends; return its exit code. When its daemon dies first, a
    kept session is followed again once the keeper's next daemon answers; otherwise, or when none does, 19
    (lost)."""
    seen: dict[tuple[Any, ...], None] = {}  # keys of the records printed last, not printed again
    kept = False
    while True:
        code, held = _follow_once(client, sid, as_json, seen)
        if code is not None:
            return code
        kept = kept or held
        again = _daemon_again() if kept else None
        if again is None:
            break
        click.echo(f"loopwarden: the daemon was replaced; following session {sid} again", err=True)
        client = again  # (closed when the command exits)
    click.echo(f"loopwarden: session {sid} lost: its daemon went away while following it "
               + ("(no daemon came back)" if kept else "(a guardian stops what the daemon started)"), err=True)
    return Termination.LOST.exit_code


def _follow_once(client: Any, sid: str, as_json: bool, seen: dict[tuple[Any, ...], None]) -> tuple[int | None, bool]:
    """Follow over one daemon's connection: (the exit code once the session ended, or None when the connection
    went first; whether the keeper holds the session's agent)."""
    try:
        first, updates = client.subscribe([sid], events=True)
    except DaemonError as exc:
        raise failure(exc) from None
    kept = any(snap.get("kept") for snap in first.get("sessions") or ())
    try:
        _print_backlog(sid, as_json, seen)
        for snap in first["sessions"]:
            if snap.get("state") in FINAL:
                if not as_json:
                    click.echo(_end_line(sid, snap), err=True)
                return _final(snap), kept
        return _print_updates(updates, sid, as_json, seen), kept
    except KeyboardInterrupt:
        click.echo(f"\nloopwarden: detached; session {sid} keeps running (loopwarden logs -f {sid})", err=True)
        return 0, kept
    except DaemonTimeout as exc:  # the daemon is there but silent (stopped, stuck): not known to be lost
        raise _detached(exc, sid) from None
    except (OSError, ValueError):  # the connection reset, or a line cut short by the daemon's death
        return None, kept


DAEMON_AGAIN = 70.0  # seconds to wait for the keeper's next daemon (it tries three times, 20 s each)


def _daemon_again() -> Any:
    """A connection to the next daemon once it answers (the keeper starts it), or None when none does in time."""
    paths = profile_paths()
    deadline = time.monotonic() + DAEMON_AGAIN
    while time.monotonic() < deadline:
        try:
            client = Client.connect(paths, autostart=False, name="cli")
            client.request("ping")
            return client
        except (DaemonError, OSError):
            time.sleep(0.2)
    return None


def _print_backlog(sid: str, as_json: bool, seen: dict[tuple[Any, ...], None]) -> None:
    """What the session wrote before the subscription began (a fast command may have ended already, or a daemon
    was replaced meanwhile) is in the store: printed first, but for what was printed already (`seen`, which the
    printed keys join, to skip in the live stream, as `logs -f` does)."""
    try:
        for _, kind, data, row in _history(sid, RUN_BACKLOG):
            key = _key(kind, data, row)
            if key in seen:
                continue
            _remember(seen, key)
            if as_json:
                click.echo(orjson.dumps({"kind": kind, "data": data}, default=str).decode())
            else:
                _print_record(kind, data)
    except (KeyError, TypeError, AttributeError):  # a reply of another shape: follow without the backlog
        pass
    except Unresponsive as exc:  # stopped or stuck: the stream would only wait as long again
        raise _detached(exc, sid) from None
    except click.ClickException:  # the daemon went away while the backlog was read: the stream says so
        pass


def _remember(seen: dict[tuple[Any, ...], None], key: tuple[Any, ...]) -> None:
    """`key` was printed; only the last 2 x RUN_BACKLOG are kept (a backlog read again holds no older ones)."""
    seen[key] = None
    if len(seen) > 2 * RUN_BACKLOG:
        del seen[next(iter(seen))]


def _print_updates(updates: Any, sid: str, as_json: bool, seen: dict[tuple[Any, ...], None]) -> int | None:
    """The live stream, until the session ends (its exit code) or the stream does (None)."""
    for message in updates:
        kind, data = message.get("kind"), message.get("data") or {}
        if kind in ("event", "verdict", "action", "log"):
            key = _key(kind, data, data)
            if key in seen:
                continue
            _remember(seen, key)
        if kind == "cut":  # this terminal fell too far behind: the session goes on, unwatched here
            raise DaemonFail(f"{message.get('reason')}; session {sid} keeps running (loopwarden logs -f {sid})")
        if kind == "skipped" and not as_json:
            click.echo(f"loopwarden: {message.get('count'):,} records not shown (this terminal fell behind; "
                       f"loopwarden logs {sid} has them)", err=True)
            continue
        if as_json:
            click.echo(orjson.dumps(message, default=str).decode())
        else:
            _print_record(kind, data)
        if kind == "session" and data.get("state") in FINAL:
            if not as_json:
                click.echo(_end_line(sid, data), err=True)
            return _final(data)
    return None


RUN_BACKLOG = 1000  # records an attached `run` reads back from the store: those before it subscribed


def _detached(exc: Exception, sid: str) -> Unresponsive:
    """A followed session whose daemon fell silent: the one line says so; the session was not touched."""
    return Unresponsive(f"{exc}; stopped following session {sid} (loopwarden logs -f {sid} follows it again)")


def _final(snap: dict[str, Any]) -> int:
    return final_exit_code(snap)


_VERDICT_COLOUR = {"nudge": "yellow", "block": "red", "gate": "magenta", "terminate": "bright_red",
                   "escalate": "magenta", "spill": "blue"}
_HINTED: set[str] = set()


def _print_record(kind: str | None, raw: dict[str, Any], when: float | None = None) -> None:
    """One record as a line for a person (`when` it happened first, if given); every string the agent
    could have written is made visible first."""
    data = visible_tree(raw)
    stamp = time.strftime("%H:%M:%S ", time.localtime(when)) if when else ""

    def echo(line: str, err: bool = False) -> None:
        click.echo(stamp + line, err=err)

    if kind == "event":
        etype = data.get("type")
        if etype == "tool_call":
            args = visible(orjson.dumps(raw.get("args"), default=str).decode())  # JSON escapes only C0 controls
            echo(f"  {data.get('seq', ''):>5} → {data.get('tool')} {args[:120]}")
        elif etype == "tool_result":
            first_line = str(raw.get("output") or "").strip().split("\n", 1)[0].rstrip("\r")
            mark = click.style("✗", fg="red") if data.get("is_error") else "✓"
            echo(f"  {data.get('seq', ''):>5} {mark} {visible(first_line)[:120]}")
        elif etype == "output":
            echo(f"  {data.get('seq', ''):>5} │ {str(data.get('text'))[:200]}")
        elif etype in ("assistant_message", "user_message", "error", "invalid_line", "validation_error"):
            text = data.get("text") or data.get("message") or data.get("reason") or ""
            echo(f"  {data.get('seq', ''):>5} {etype}: {str(text)[:160]}")
            if etype == "invalid_line" and "not valid JSON" in str(text) and "hint" not in _HINTED:
                _HINTED.add("hint")
                echo(click.style("        hint: this command does not speak loopwarden's protocol "
                                 "(docs/protocol.md); for any other command use --adapter plain", dim=True), err=True)
    elif kind == "log":
        echo(f"        {data.get('stream', 'log')}: {str(data.get('text'))[:200]}")
    elif kind == "action":
        note = f": {data['note']}" if data.get("note") else ""
        target = f" {data['target']}" if data.get("target") else ""
        echo(click.style(f"        {str(data.get('action')).upper()}{target} by {data.get('actor')} "
                         f"[{data.get('client')}] {data.get('outcome')}{note}", fg="cyan"))
    elif kind == "verdict":
        action = str(data.get("action"))
        head = click.style(action.upper(), fg=_VERDICT_COLOUR.get(action), bold=True)
        echo(f"  {data.get('seq', '') or '':>5} {head} [{data.get('rule')}] {data.get('reason')}")
        if data.get("rule") == "operator" and raw.get("message"):
            first_line = str(raw["message"]).split("\n", 1)[0]
            echo(f"        │ {visible(first_line)[:200]}")
    elif kind == "session" and data.get("state") == SessionState.GATED:
        gates = ", ".join(f"{data.get('id')}:{g}" for g in data.get("pending_gates") or [])
        echo(click.style(f"  waiting for a human: loopwarden approve {gates}", fg="magenta"), err=True)


@click.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@click.option("--all", "-a", "show_all", is_flag=True, help="Include ended sessions (default: the last 20).")
@click.option("--tag", "tags", multiple=True, metavar="TAG",
              help="Only the sessions with this tag (repeatable: with every one given).")
def ls(as_json: bool, show_all: bool, tags: tuple[str, ...]) -> None:
    """List sessions: live ones and recent history, and what loopwarden did to each (INTERVENED); TAGS are
    the labels given with 'run --tag' or 'set ID tag=NAME'.

    \b
    Examples:
      loopwarden ls
      loopwarden ls --all --tag team-a
    """
    try:
        wanted = set(check_tags(tags))
    except TagError as exc:
        raise Fail(f"--tag: {exc}") from None
    sessions = call("list")
    if show_all:
        sessions = _every(sessions)
    else:
        live = [s for s in sessions if s.get("state") not in FINAL]
        ended = [s for s in sessions if s.get("state") in FINAL][-20:]
        sessions = ended + live
    sessions = [s for s in sessions if wanted <= set(s.get("tags") or [])]
    if as_json:
        _json_out(sessions)
        return
    if not sessions:
        click.echo(f"no session has the tag{'s' if len(wanted) > 1 else ''} {', '.join(sorted(wanted))}" if wanted
                   else "no sessions yet; start one with: loopwarden run -- COMMAND")
        return
    sessions = visible_tree(sessions)
    width = max(7, *(len(str(s.get("adapter") or "")) for s in sessions))  # claude-code-hook is 16 wide
    agents = max(5, *(len(str(s.get("agent") or "")) for s in sessions))
    places = [where_words(s)[:24] for s in sessions]  # a WHERE column only when a session runs on a cluster: pod node1
    wheres = max(5, *map(len, places)) if any(places) else 0
    click.echo(f"{'ID':<6} {'NAME':<18} {'AGENT':<{agents}} {'ADAPTER':<{width}} {'STATE':<34} {'INTERVENED':<20} "
               f"{'RUNTIME':>9} {'CALLS':>6} {'COST':>9} {'GATES':>5} {'CPU':>6} {'MEM':>6} "
               + (f"{'WHERE':<{wheres}} " if wheres else "") + "TAGS")
    for s, place in zip(sessions, places, strict=True):
        click.echo(f"{s.get('id', ''):<6} {str(s.get('name', ''))[:18]:<18} {s.get('agent') or '-'!s:<{agents}} "
                   f"{s.get('adapter', '')!s:<{width}} {_state(s)[:34]:<34} {intervened(s)[:20]:<20} "
                   f"{_age(s.get('runtime')):>9} {s.get('tool_calls', 0) or 0:>6} {show_cost(s.get('cost')) or '-':>9} "
                   f"{len(s.get('pending_gates') or []):>5} {s.get('cpu_percent', 0) or 0:>5.0f}% "
                   f"{_mem(s.get('rss') if s.get('state') not in FINAL else None):>6} "  # ended: no memory
                   + (f"{place or '-':<{wheres}} " if wheres else "")
                   + f"{','.join(s.get('tags') or []) or '-'}")
    total = total_line(call("ping").get("spending"))
    if total:
        click.echo(total)


def _every(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every session the store has, a page at a time, oldest first; the daemon's own snapshots (live
    sessions, and those not stored yet) win over the store's."""
    current = {s.get("id"): s for s in sessions}
    pages: list[list[dict[str, Any]]] = []
    before: str | None = None
    with connect() as client:
        while True:
            try:
                page = client.request("list", stored=True, before=before)
            except DaemonError as exc:
                raise failure(exc) from None
            if not page:
                break
            pages.append(page)
            before = page[-1].get("id")
    stored = [current.pop(s.get("id"), s) for page in reversed(pages) for s in reversed(page)]
    return stored + list(current.values())


@click.command()
@click.argument("session", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def status(session: str | None, as_json: bool) -> None:
    """Show one session in detail (or the daemon, without SESSION).

    \b
    Examples:
      loopwarden status s3
      loopwarden status --json fixer
    """
    if session is None:
        info = call("ping")
        if as_json:
            _json_out(info)
        else:
            _daemon_status(visible_tree(info))
        return
    snap = call("status", session=session)
    if as_json:
        _json_out(snap)
        return
    snap = visible_tree(snap)
    click.echo(f"{snap['id']} {snap.get('name')}  {_state(snap)}  pid {snap.get('pid') or '-'}  "
               f"agent {snap.get('agent') or '-'}, adapter {snap.get('adapter')}"
               f"{' (handshake)' if snap.get('handshake') else ''}")
    if isinstance(snap.get("capabilities"), list):
        click.echo(f"can: {', '.join(snap['capabilities']) or 'watch and signal only'}")
    click.echo(f"command: {' '.join(snap.get('command') or [])}{_worktree_line(snap)}")
    if pod_words(snap):
        click.echo(f"pod: {pod_words(snap)}")
    if snap.get("conversation"):
        can = "; 'loopwarden continue' continues it" if snap.get("resumable") and snap.get("state") in FINAL else ""
        click.echo(f"conversation: {snap['conversation']}{can}")
    limit_text = _age(snap.get("max_runtime")) if snap.get("max_runtime") else "no limit"
    click.echo(f"runtime {_age(snap.get('runtime'))} of {limit_text}, {_plural(snap.get('events') or 0, 'event')}, "
               f"{_plural(snap.get('tool_calls') or 0, 'tool call')}, cpu {snap.get('cpu_percent') or 0}%, "
               f"mem {_mem(snap.get('rss') if snap.get('state') not in FINAL else None)}")
    for line in _detail_lines(snap):
        click.echo(line)
    click.echo("counters (value / limit):")
    for name, (value, limit) in (snap.get("counters") or {}).items():
        if name in ("runtime", "silence"):
            shown = f"{_age(value)} / {_age(limit) if limit else 'off'}"
        else:
            shown = f"{value:g} / {limit:g}" if limit else f"{value:g} / off"
        click.echo(f"  {name:<18} {shown}")
    if snap.get("pending_gates"):
        click.echo("gates waiting: " + ", ".join(f"{snap['id']}:{g}" for g in snap["pending_gates"]))


def _detail_lines(snap: dict[str, Any]) -> list[str]:
    """`status`: how it ended, what it cost, where its large outputs went."""
    out = [f"ended: {_ending(snap)}"] if snap.get("state") in FINAL else []
    out.extend(_cost_lines(snap))
    spill = _spill_line(snap.get("spill"))
    return [*out, spill] if spill else out


def _cost_lines(snap: dict[str, Any]) -> list[str]:
    """`status`: the session's cost, its tokens by kind and model, and where the dollars came from; the agent's
    subscription quota where it reports one."""
    out = []
    cost = snap.get("cost")
    if isinstance(cost, dict):
        tokens = (f"{cost.get('input_tokens') or 0:,} in ({cost.get('cache_read_tokens') or 0:,} read from cache, "
                  f"{cost.get('cache_write_tokens') or 0:,} written to it), {cost.get('output_tokens') or 0:,} out")
        models = ", ".join(cost.get("models") or []) or "model not reported"
        out.append(f"cost: {show_cost(cost)} ({show_source(cost)}); tokens {tokens}; {models}")
    for window in (snap.get("quota") or {}).get("windows") or []:
        out.append(f"quota: {quota_words(window)}")
    return out


def _worktree_line(snap: dict[str, Any]) -> str:
    """The session's own worktree, as a line of `status` (with its newline first), or "" when it has none."""
    tree = snap.get("worktree")
    if not isinstance(tree, dict):
        return ""
    return (f"\nworktree: {tree.get('path')} (branch {tree.get('branch')}, from commit {str(tree.get('base'))[:12]}; "
            f"'loopwarden diff {snap['id']}' shows what changed)")


def _daemon_status(info: dict[str, Any]) -> None:
    """`status` without a session: the daemon, its spill files, keeper, spend, and what went wrong."""
    click.echo(f"daemon pid {info['pid']}, up {_age(info['uptime'])}, {info.get('live', 0)} live "
               f"session(s)\nsocket {info['socket']}\ndatabase {info['database']}")
    spill = info.get("spill") or {}
    if spill:
        limit = spill.get("max_total_bytes") or 0
        click.echo(f"spill files {_bytes(spill.get('bytes') or 0)} of "
                   + (f"{_bytes(limit)} (spill.max_total_bytes)" if limit else "no limit"))
    keeper = info.get("keeper")
    if keeper:
        click.echo(keeper_line(keeper))
    for line in spending_lines(info.get("spending")):
        click.echo(line)
    for line in _daemon_troubles(info):
        click.echo(click.style(line, fg="yellow"))
    for line, trouble in alerts_lines(info):
        click.echo(click.style(line, fg="yellow") if trouble else line)


def _bytes(n: Any) -> str:
    return size_words(int(n))


def _spill_line(spill: Any) -> str | None:
    """`spill files: 256 MiB written, 1.2 GiB cut from 3 outputs (spill.max_session_bytes 256 MiB)`, or None."""
    if not isinstance(spill, dict) or not (spill.get("bytes") or spill.get("cut_bytes")):
        return None
    line = f"spill files: {_bytes(spill.get('bytes') or 0)} written"
    if spill.get("cut_bytes"):
        line += f", {_bytes(spill['cut_bytes'])} cut from {_plural(spill.get('cut_outputs') or 0, 'output')}"
    bounds = [f"{key} {_bytes(spill[key.split('.')[1]])}" for key in (SESSION_KEY, TOTAL_KEY)
              if spill.get(key.split(".")[1])]
    return line + (f" (bounds: {', '.join(bounds)})" if bounds else "")


def _daemon_troubles(info: dict[str, Any]) -> list[str]:
    """What the daemon could not write or deliver since it started, in words (nothing when all is well)."""
    out = []
    store = info.get("store") or {}
    if store and not store.get("open"):
        out.append(f"store: NOT OPEN, retrying ({store.get('last_error')}); sessions run, history is not kept")
    unwritten = {t: n for t, n in (store.get("unwritten") or {}).items() if n}
    if unwritten:
        out.append("store: not written since the daemon started: "
                   + ", ".join(f"{n:,} {t}" for t, n in unwritten.items())
                   + f" (last error: {store.get('last_error')})")
    if info.get("dropped_events"):
        out.append(f"events dropped (the store was too far behind): {info['dropped_events']:,}")
    spill = info.get("spill") or {}
    if spill.get("cut_bytes"):
        out.append(f"spill bounds: {_bytes(spill['cut_bytes'])} of {_plural(spill.get('cut_outputs') or 0, 'output')}"
                   " cut since the daemon started (spill.max_session_bytes, spill.max_total_bytes)")
    if info.get("log_errors"):
        out.append(f"daemon log lines that could not be written: {info['log_errors']:,}")
    if info.get("hook_sessions_refused"):
        out.append(f"hook sessions refused by hooks.max_sessions or hooks.max_per_agent: "
                   f"{info['hook_sessions_refused']:,}")
    return out


@click.command()
@click.argument("session")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new records until the session ends.")
@click.option("--json", "as_json", is_flag=True, help="Print records as JSON lines.")
@click.option("--limit", default=200, show_default=True, help="How many of the newest stored records to print first.")
@click.option("--since", metavar="WHEN",
              help="Only records at or after WHEN: 10m, 2h, 1d ago, or 2026-12-07T14:30 (local time).")
@click.option("--until", metavar="WHEN", help="Only records at or before WHEN (as --since; not with --follow).")
@click.option("--grep", metavar="TEXT", help="Only records holding TEXT (plain text, case-insensitive).")
@click.option("--rule", metavar="RULE", help="Only the verdicts of RULE (repetition, loop_gate, stall, ...).")
def logs(session: str, follow: bool, as_json: bool, limit: int, since: str | None, until: str | None,
         grep: str | None, rule: str | None) -> None:
    """Print a session's newest stored events, verdicts and operator actions, then (-f) follow it.

    --since, --until, --grep and --rule keep only the records that match, in
    the daemon's store (the newest --limit of those); with -f, the new records
    that match too. Ctrl-C stops following.

    \b
    Examples:
      loopwarden logs s3
      loopwarden logs -f fixer
      loopwarden logs s3 --since 10m --grep ERROR
      loopwarden logs s3 --since 2026-12-07T14:00 --until 2026-12-07T15:00
      loopwarden logs s3 --rule repetition
      loopwarden logs -f s3 --grep "Traceback"
      loopwarden logs --json --limit 10000 s3 > s3.jsonl
      loopwarden --host box logs -f s3
    """
    only = record_filter(since, until, grep, rule)
    if follow and until:
        raise Fail("--until ends the records and --follow waits for new ones: give one of them")
    session = route(session)  # box:s3, box a host of the hosts file: box's s3
    follower = connect() if follow else None
    try:
        updates = None
        if follower is not None:  # subscribe before reading history, so nothing falls between the two
            try:
                first, updates = follower.subscribe([session], events=True)
            except DaemonError as exc:
                raise failure(exc) from None
        seen: set[tuple[Any, ...]] = set()
        sid = first["sessions"][0].get("id", session) if updates is not None and first["sessions"] else session
        for sid, kind, data, row in _history(session, limit, only):
            seen.add(_key(kind, data, row))
            _emit(kind, sid, data, as_json, row.get("ts") if kind != "log" else data.get("ts"))
        if follower is None or updates is None:
            if not as_json:
                _ended_line(sid)
            return
        if any(s.get("state") in FINAL for s in first["sessions"]):
            sys.exit(_final(first["sessions"][0]))
        _print_followed(updates, sid, seen, only, as_json)
    except DaemonError as exc:  # the daemon fell silent (stopped, stuck) while followed
        raise failure(exc) from None
    except KeyboardInterrupt:
        return
    finally:
        if follower is not None:
            follower.close()


def _print_followed(updates: Any, sid: str, seen: set[tuple[Any, ...]], only: RecordFilter, as_json: bool) -> None:
    """`logs -f`: each new record `only` passes, until the session ends (then exit with its code)."""
    for message in updates:
        kind, data = message.get("kind"), message.get("data") or {}
        if kind in ("event", "verdict", "action", "log") and _key(kind, data, data) in seen:
            continue
        if kind == "cut":
            raise DaemonFail(f"the daemon ended the subscription: {message.get('reason')}")
        if kind != "session":
            if only.matches(kind, data, data.get("ts")):
                _emit(kind, sid, data, as_json, data.get("ts") if kind != "event" else None)
        elif data.get("state") in FINAL:
            click.echo(_end_line(visible(sid), data), err=True)
            sys.exit(_final(data))


_ORDER = ("event", "verdict", "action")


def _ended_line(ref: str) -> None:
    """The last line of `logs` for an ended session: when and how it ended (the records do not say)."""
    with connect() as client:
        try:
            snap = client.request("status", session=ref)
        except DaemonTimeout as exc:
            raise failure(exc) from None
        except DaemonError:
            return  # pruned meanwhile: the records printed are all there is
    if snap.get("state") in FINAL:
        when = snap.get("ended_at")
        stamp = time.strftime("%H:%M:%S", time.localtime(when)) if isinstance(when, (int, float)) else "--:--:--"
        click.echo(f"{stamp}  {_end_line(visible(str(snap.get('id', ref))), snap).removeprefix('loopwarden: ')}")


def _history(session: str, limit: int, only: RecordFilter = EVERY_RECORD) -> Any:
    """(session id, kind, data, row) for the newest `limit` stored events, verdicts and actions, oldest
    first, read a page at a time: memory stays at one page (the daemon bounds a page by bytes). It
    ends at what was stored when it began, however fast the session writes (-f follows the rest)."""
    with connect() as client:
        try:
            start = client.request("logs", session=session, newest=limit, **only.fields())
            cursors, end = dict(start["start"]), dict(start["end"])  # what was stored when the command began
            sid = start["session"]
            while True:
                page = client.request("logs", session=sid, limit=min(limit, 10_000), **cursors, **only.fields())
                records = ([("event", e.get("ts"), e["id"], e) for e in page["events"] if e["id"] <= end["after"]]
                           + [("verdict", v.get("ts"), v["id"], v) for v in page["verdicts"]
                              if v["id"] <= end["verdicts_after"]]
                           + [("action", a.get("ts"), a["id"], a) for a in page["actions"]
                              if a["id"] <= end["actions_after"]])
                records.sort(key=lambda r: (r[1] or 0, _ORDER.index(r[0]), r[2]))
                for kind, _, _, row in records:
                    if kind == "event":
                        data = row["data"] if isinstance(row.get("data"), dict) else {}
                        if row.get("kind") == "log":
                            yield sid, "log", data, row
                        else:
                            yield sid, kind, {**data, "seq": row.get("seq")}, row
                    else:
                        yield sid, kind, ({**row, "seq": row.get("seq")} if kind == "verdict" else row), row
                cursors = page["next"]
                if not page.get("more") or all(cursors[c] >= end[c] for c in end):  # a busy session: no chase
                    return
        except DaemonError as exc:
            raise failure(exc) from None


def _key(kind: str | None, data: dict[str, Any], row: dict[str, Any]) -> tuple[Any, ...]:
    return (kind, row.get("seq", data.get("seq")), data.get("type") or data.get("action") or data.get("stream"),
            data.get("rule"), data.get("ts") if kind in ("action", "log") else None)


def _emit(kind: str | None, sid: str, data: dict[str, Any], as_json: bool, when: Any = None) -> None:
    """One record of `logs`: a JSON line, or a line for a person that begins with the time it happened
    (stored: when the daemon saw it; followed: its own time, or when it arrived)."""
    if as_json:
        click.echo(orjson.dumps({"kind": kind, "session": sid, "data": data}, default=str).decode())
    else:
        stamp = when if isinstance(when, (int, float)) and not isinstance(when, bool) and when > 0 else time.time()
        _print_record(kind, data, stamp)


@click.command()
@click.argument("session", required=False)
@click.option("--session", "session_option", metavar="SESSION", help="Only the entries of SESSION (as the argument).")
@click.option("--actor", metavar="WHO", help="Only the entries of a user or principal holding WHO (case-insensitive).")
@click.option("--action", metavar="ACTION", help="Only one action: approve, deny, kill, restart, inject, set, ...")
@click.option("--since", metavar="WHEN",
              help="Only entries at or after WHEN: 10m, 2h, 1d ago, or 2026-12-07T14:30 (local time).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1),
              help="How many of the newest entries to print (1 or more).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def audit(session: str | None, session_option: str | None, actor: str | None, action: str | None,
          since: str | None, limit: int, as_json: bool) -> None:
    """The audit log: who did what, when, why, from which client (of one session, or all).

    Each entry names the user, the client's kind, pid and terminal, and for an
    attempt refused to a supervised agent, the session it ran inside. The
    filters are applied by the daemon's store; the newest --limit that match
    are printed.

    \b
    Examples:
      loopwarden audit
      loopwarden audit s3 --json
      loopwarden audit --session s3 --action kill
      loopwarden audit --actor alice --since 2h
      loopwarden audit --action approve --since 2026-12-07T09:00
    """
    if session and session_option and session != session_option:
        raise Fail(f"two sessions given ({session!r} and --session {session_option!r}): give one")
    fields = {"actor": actor, "action": action, "since": parse_when(since, "--since") if since else None}
    entries = call("actions", session=session or session_option, limit=limit,
                   **{k: v for k, v in fields.items() if v is not None})
    if as_json:
        _json_out(entries)
        return
    if not entries:
        click.echo("no audit entries match" if any(fields.values()) else "no operator actions recorded yet")
        return
    for a in visible_tree(entries):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(a["ts"]))
        target = f" {a['target']}" if a.get("target") else ""
        note = f"  why: {a['note']}" if a.get("note") else ""
        outcome = str(a["outcome"]).replace(f"; {EXPLANATION}", "")  # the same sentence on every refusal
        click.echo(f"{when}  {a.get('session_id') or '-':<5} {a['action']}{target}  by {_principal(a)}  "
                   f"{outcome}{note}")


def _principal(a: dict[str, Any]) -> str:
    """Who acted, in a few words: the user, then the client's kind, pid, terminal and any session it ran inside."""
    if a.get("pid") is None:  # an entry from before loopwarden recorded more than these two strings
        return f"{a['actor']} [{a['client']}]"
    facts = [f"{a.get('client_kind') or 'client'} pid {a['pid']}"]
    facts += [a["tty"]] if a.get("tty") else []
    facts += [f"inside {a['inside_session']}"] if a.get("inside_session") else []
    return f"{a.get('user') or a['actor']} [{', '.join(facts)}]"


@click.command()
@click.option("--older-than", "older_than", metavar="DURATION", default="30d", show_default=True,
              help="Delete the history of sessions that ended longer ago than this (e.g. 7d, 12h).")
@click.option("--audit-older-than", "audit_older_than", metavar="DURATION",
              help="Also delete audit entries older than this (default: keep the audit log).")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def prune(older_than: str, audit_older_than: str | None, dry_run: bool, as_json: bool) -> None:
    """Delete the stored history of sessions that ended long ago (events, verdicts, gates, spills).

    Live sessions are never touched. The daemon also prunes by itself, hourly,
    with the store.retention setting (default 30 days; 0 keeps everything) and
    store.audit_retention (default 0: the audit log is kept). Spill files have
    their own retention (spill.retention).

    \b
    Examples:
      loopwarden prune --dry-run
      loopwarden prune --older-than 7d
      loopwarden prune --older-than 90d --audit-older-than 365d
    """
    from ..supervisor.config import parse_duration

    try:
        older = parse_duration(older_than)
        audit = parse_duration(audit_older_than) if audit_older_than else None
    except ValueError as exc:
        raise Fail(f"not a duration: {exc}; use e.g. 30s, 12h or 7d") from None
    result = call("prune", older_than=older, audit_older_than=audit, dry_run=dry_run)
    if as_json:
        _json_out(result)
        return
    counts = {t: n for t, n in result["deleted"].items() if n}
    what = ", ".join(f"{n:,} {t}" for t, n in counts.items()) or "nothing"
    click.echo(f"{'would delete' if dry_run else 'deleted'}: {what}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON, with the evidence.")
def gates(as_json: bool) -> None:
    """List gates waiting for a human, oldest first, with why they opened.

    \b
    Example:
      loopwarden gates
      loopwarden approve s3:g1 --note "use the staging database instead"
    """
    pending = call("gates")
    if as_json:
        _json_out(pending)
        return
    if not pending:
        click.echo("no gates are waiting")
        return
    now = time.time()
    for g in visible_tree(pending):
        click.echo(f"{g['ref']:<10} {g.get('name', ''):<16} {_age(now - g['opened_at']):>7} ago  "
                   f"[{g['rule']}] {g['reason']}")


def _decision(approve: bool) -> Any:
    verb = "approve" if approve else "deny"

    @click.command(verb)
    @click.argument("gate")
    @click.option("--note", help="Guidance for the agent (approve) or the reason (deny); recorded in the audit log.")
    def command(gate: str, note: str | None) -> None:
        result = call(verb, gate=gate, note=note)
        click.echo(f"{result['session']}:{result['gate']} {result['status']}")

    command.help = (
        ("Approve a gate: the agent continues; a --note is injected as guidance. Resets the loop counters."
         if approve else "Deny a gate: the session is terminated (loop_gate_denied).")
        + " GATE is SESSION:GATE as 'loopwarden gates' lists it, a gate id pending in one session only, or a "
          "session with exactly one pending gate."
        + f"\n\n\b\nExamples:\n  loopwarden {verb} s3:g1" + (' --note "try the staging database"' if approve else "")
        + f"\n  loopwarden {verb} s3"
    )
    return command


approve = _decision(True)
deny = _decision(False)


@click.command()
@click.argument("session")
@click.option("--note", help="What the authority covers; added to the injected text and the audit log.")
def grant(session: str, note: str | None) -> None:
    """Grant the agent authority to work around what blocks its task (stubs, skipped dependencies, debt).

    The scoped authority text is injected into the agent and the grant is recorded.

    \b
    Example:
      loopwarden grant s3 --note "you may stub the payment service"
    """
    result = call("grant", session=session, note=note)
    click.echo(f"{result['session']}: unblock authority granted")


@click.command()
@click.argument("session")
@click.option("--counter", help=f"Reset only this counter: {', '.join(sorted(RESETTABLE))}.")
@click.option("--note", help="Why; recorded in the audit log.")
def reset(session: str, counter: str | None, note: str | None) -> None:
    """Reset a session's loop counters: a human intervention gives the agent a fresh start.

    \b
    Example:
      loopwarden reset s3 --counter loop
    """
    result = call("reset", session=session, counter=counter, note=note)
    click.echo(f"{result['session']}: reset {result['reset']}")


@click.command("set")
@click.argument("args", nargs=-1, required=True, metavar="[SESSION] KEY=VALUE...")
def set_limits(args: tuple[str, ...]) -> None:
    """Change a running session's limits, or (without SESSION) the daemon's budgets: taken at once, audited.

    A running session takes the limits (not max_line_bytes or stdin_backlog), the
    repetition, validation, failures, attempts, gates and recovery keys, loop.gate_after and
    loop.similarity, and the escalation thresholds; the others shaped how it
    started ('loopwarden config keys' lists every key). Counters so far stay.
    Raising a budget a session waits on (limits.max_cost_usd, limits.max_tokens)
    lets its held call go through. Without SESSION: budgets.day_usd,
    budgets.project_usd and budgets.projects, for every session (kept by the daemon
    across restarts until its config file changes).

    \b
    Examples:
      loopwarden set s3 limits.max_runtime=2h
      loopwarden set fixer repetition.max_identical_calls=3 gates.timeout=10m
      loopwarden set s3 limits.max_cost_usd=5
      loopwarden set budgets.day_usd=20
      loopwarden set s3 tag=review tag=-wip

    tag=NAME adds the tag NAME to a running session, tag=-NAME removes it
    (see 'loopwarden run --tag'); 'loopwarden ls --tag NAME' lists its sessions.
    """
    from ..supervisor.config import ConfigError, parse_set, show_value

    session = None if "=" in args[0] else args[0]
    values = args if session is None else args[1:]
    tags = [item.partition("=")[2] for item in values if item.partition("=")[0].strip() == "tag"]
    values = tuple(item for item in values if item.partition("=")[0].strip() != "tag")
    if tags:
        _set_tags(session, tags)
        if not values:
            return
    if not values:
        raise Fail(f"set {session}: give at least one KEY=VALUE, e.g. loopwarden set {session} limits.max_runtime=2h")
    try:
        pairs = dict(parse_set(item, "set") for item in values)
    except ConfigError as exc:
        raise Fail(str(exc)) from None
    result = call("set", session=session, values=pairs)
    sid, changed = result["session"] or "daemon", result["changed"]
    if not changed:
        click.echo(f"{sid}: nothing changed (the values were already in force)")
    for key, (old, new) in changed.items():
        click.echo(f"{sid}: {key} {show_value(key, old)} -> {show_value(key, new)}")


def _set_tags(session: str | None, changes: list[str]) -> None:
    """`set SESSION tag=NAME tag=-OLD`: checked here (one line for a bad tag), then sent as one `tag` request."""
    if session is None:
        raise Fail("set tag=...: name the session first, e.g. loopwarden set s3 tag=review")
    try:
        change_tags([], [c for c in changes if not c.startswith("-")])
        check_tags([c[1:] for c in changes if c.startswith("-")])
    except TagError as exc:
        raise Fail(f"set {session}: {exc}") from None
    result = call("tag", session=session, changes=changes)
    click.echo(f"{result['session']}: tags {','.join(result['before']) or '-'} -> {','.join(result['tags']) or '-'}")


@click.command()
@click.argument("session")
@click.argument("text")
def inject(session: str, text: str) -> None:
    """Send TEXT to the agent as an operator message.

    \b
    Example:
      loopwarden inject s3 "Stop editing config.py; the bug is in session.py"
    """
    result = call("inject", session=session, text=text)
    click.echo(f"{result['session']}: sent")


@click.command()
@click.argument("session")
@click.option("--turns", type=click.IntRange(1, 100), default=1, show_default=True,
              help="How many of the latest turns to drop (the first of them is retried).")
@click.option("--note", help="Guidance added to the loop's evidence; also recorded in the audit log.")
def rewind(session: str, turns: int, note: str | None) -> None:
    """Rewind an agent's conversation to before its loop and retry, with the loop's evidence as guidance.

    The latest turns are dropped from the model's history (files they changed stay
    changed), and the first of them is started again with its own input and a
    message that tells the model what looped. Only agents that can rewind take it
    (Codex, through thread/revert: see 'loopwarden adapters'); restart the others.
    With recovery.on_loop=rewind a loop rewinds by itself instead of ending the session.

    \b
    Example:
      loopwarden rewind s3 --note "the log grows by itself; read it once"
    """
    result = call("rewind", session=session, turns=turns, note=note)
    click.echo(f"{result['session']}: rewound {_plural(result['turns'], 'turn')}; the retry carries: "
               f"{result['guidance']}")


@click.command()
@click.argument("session")
@click.option("--note", help="Added to the summary the new run reads first; also recorded in the audit log.")
def restart(session: str, note: str | None) -> None:
    """Start a session's task again as a new session, told first what failed (how it ended, its last errors).

    A session still running is stopped first. The summary is the new run's first
    message: a native agent reads it as an inject right after its welcome, Codex
    before its prompt. Agents that cannot take a message (plain output, observed
    streams) are refused: start those again with 'loopwarden run'.

    \b
    Example:
      loopwarden restart s3 --note "the tests need the database running"
    """
    result = call("restart", session=session, note=note)
    click.echo(f"{result['restarted']}: restarted as {result['id']} ({result['name']})")
    click.echo(f"its first message: {result['summary']}")


def _signal_command(op: str, help_text: str) -> Any:
    @click.command(op)
    @click.argument("session")
    @click.option("--note", help="Why; recorded in the audit log.")
    def command(session: str, note: str | None) -> None:
        result = call(op, session=session, note=note)
        unchanged = result.get("changed") is False  # pause twice: say so rather than claim a second pause
        click.echo(f"{result['session']}: {result['state']}" + (" already" if unchanged else ""))

    command.help = help_text + f"\n\n\b\nExample:\n  loopwarden {op} s3"
    return command


pause = _signal_command("pause", "Pause a session (SIGSTOP to its process group).")
resume = _signal_command("resume", "Resume a paused session (SIGCONT).")
kill = _signal_command("kill", "Stop a session: a stop line, SIGTERM to every process it started (its group, its "
                              "cgroup, children that left them), SIGKILL after limits.kill_grace.")


@click.command()
@click.argument("pid", type=int)
@click.option("--name", help="A name to find the session by.")
@config_options
def adopt(pid: int, name: str | None, config_file: str | None, preset: str | None, sets: tuple[str, ...]) -> None:
    """Watch a process started elsewhere: runtime limit (counted from now), resources, kill.

    The process and its children are killed when its limit is reached, or by
    'loopwarden kill' and 'stop-daemon'. pid 1, the daemon and your own shell are
    refused.

    \b
    Example:
      loopwarden adopt 4242 --set limits.max_runtime=2h
    """
    build_config(config_file, preset, sets)
    result = call("adopt", pid=pid, name=name, preset=preset, sets=list(sets))
    _say_renamed(result)
    click.echo(result["id"])


@click.command()
def serve() -> None:
    """Run the daemon in the foreground (clients start it in the background when needed).

    It owns every session and the store; if it stops, the agents it started stop
    with it. Stop it with Ctrl-C, SIGTERM or 'loopwarden stop-daemon'.

    \b
    Examples:
      loopwarden serve
      LOOPWARDEN_HOME=/tmp/lw-test loopwarden serve     # a separate profile
    """
    from ..runtime.daemon import run_daemon

    sys.exit(run_daemon(profile_paths()))


@click.command("stop-daemon")
@click.option("--yes", "-y", is_flag=True, help="Do not ask, even when live sessions would stop with it.")
def stop_daemon(yes: bool) -> None:
    """Stop the daemon; the sessions it runs are stopped with it.

    With live sessions it asks first (--yes does not); without a terminal to ask
    on, it refuses unless given --yes. Those sessions end as daemon_stopped, not
    as killed by an operator. Returns once the daemon has exited (at most 10 s:
    SIGTERM to every agent, SIGKILL for those left after 7 s, whatever
    limits.kill_grace says), so a command right after it starts a new daemon.
    Exit code 3 if it is still running 15 s later.

    \b
    Examples:
      loopwarden stop-daemon
      loopwarden stop-daemon --yes
    """
    stopped = shutdown_daemon(confirm=None if yes else _confirm_stop)
    if stopped is None:
        click.echo("no daemon is running")
        return
    click.echo(f"daemon stopped; {_plural(stopped, 'live session')} stopped with it")


def _confirm_stop(live: list[dict[str, Any]]) -> None:
    """Ask before live sessions stop with the daemon; refuse (exit 2) when there is no terminal to ask on."""
    names, count = listed(live), _plural(len(live), "live session")
    ask_first(f"Stop the daemon and {count} with it: {names}?",
              f"{count} would stop with the daemon: {names}; run 'loopwarden stop-daemon --yes' to stop them")


@click.command()
@click.option("--read-only", is_flag=True, help="Watch only: no action keys; nothing can be changed from it.")
@click.option("--host", "hosts", metavar="HOST", multiple=True,
              help="Also attach to the daemon of this machine over ssh (repeatable; an ssh destination such as box, "
                   "user@box or an alias of ~/.ssh/config). The hosts file adds its own.")
@click.option("--no-local", is_flag=True, help="Leave out this machine's daemon (only the hosts).")
# set by `loopwarden web` on the console it serves: its actions are audited as the web's, and a read-only one
# is refused operator actions by the daemon too (runtime/principal.py WATCH_ONLY_KINDS)
@click.option("--web", "for_web", is_flag=True, hidden=True)
@click.pass_context
def console(ctx: click.Context, read_only: bool, hosts: tuple[str, ...], no_local: bool, for_web: bool = False) -> None:
    """Open the live console on the daemon (starting one if needed); quitting never stops a session.

    Sessions (j/k move, enter opens one, / filters, s sorts, S reverses, h hides
    the ended), the gates queue (g), and single-key actions: a approve, w approve
    with guidance, d deny, u grant unblock authority, x reset counters, i inject,
    p pause, r resume, b rewind, R restart, ctrl+k or K kill, n launch, L limits.
    Approve and deny show the gate's evidence and ask first; deny and kill take an
    optional reason. If
    the daemon goes away the console reconnects by itself. ? lists every key and
    column; ctrl+p searches every action.

    With --host (or hosts in the hosts file, one ssh destination a line: see
    'loopwarden where' on the other side), the console also shows each host's
    sessions, labelled by host (box:s3), with their gates in the same queue.
    Each host's daemon socket is forwarded through your own ssh; nothing new
    listens on the network, and no daemon is started on a host.

    \b
    Examples:
      loopwarden console
      loopwarden console --read-only
      loopwarden console --host box1 --host deploy@box2
      loopwarden console --host box1 --no-local
    """
    from ..widgets.app import ConsoleApp

    if for_web:
        from ..web.console import ServedConsole

        client, title = ("web-readonly", "web, read-only") if read_only else ("web", "web")
        ServedConsole(profile_paths(), read_only=read_only, client=client, title=title).run()
        return
    try:
        names = host_names([*ctx.meta.get("hosts", ()), *hosts])
    except HostError as exc:
        raise Fail(str(exc)) from None
    if no_local and not names:
        raise Fail("--no-local leaves nothing to show: give a --host (or list hosts in the hosts file)")
    if not names:
        ConsoleApp(profile_paths(), read_only=read_only).run()
        return
    from ..widgets.hosts_feed import HostsFeed

    paths = profile_paths()
    ConsoleApp(paths, read_only=read_only, feed=HostsFeed.attach(None if no_local else paths, names)).run()
