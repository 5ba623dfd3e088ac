"""Commands that talk to the daemon: run and watch sessions, and act on them."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson

from ..supervisor.client import DaemonError
from ..supervisor.config import format_duration
from ..supervisor.paths import default_paths
from ..supervisor.verdicts import final_exit_code
from .common import DaemonFail, Fail, build_config, call, config_env, config_options, connect

FINAL = ("exited", "terminated", "lost")


def _json_out(data: Any) -> None:
    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode())


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(max(0.0, seconds))


def _state(snap: dict[str, Any]) -> str:
    state = str(snap.get("state") or "?")
    if snap.get("termination"):
        return f"{state}({snap['termination']})"
    if state == "exited" and snap.get("exit_code") is not None:
        return f"exited({snap['exit_code']})"
    return state


def _mem(rss: int | None) -> str:
    if not rss:
        return "-"
    return f"{rss / (1 << 20):.0f}M"


@click.command(context_settings={"ignore_unknown_options": True})
@config_options
@click.option("--name", help="A name to find the session by (default: the command's name).")
@click.option("--adapter", type=click.Choice(["native", "plain"]), default="native", show_default=True,
              help="native: loopwarden's JSON protocol; plain: any command (time, output and process limits).")
@click.option("--task", help="Task id for loop counting, when the agent does not send one.")
@click.option("--detach", "-d", is_flag=True, help="Print the session id and return at once.")
@click.option("--json", "as_json", is_flag=True, help="Stream records as JSON lines instead of text.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(config_file: str | None, preset: str | None, sets: tuple[str, ...], name: str | None, adapter: str,
        task: str | None, detach: bool, as_json: bool, command: tuple[str, ...]) -> None:
    """Start COMMAND as a supervised session and stream what it does.

    Ctrl-C detaches without stopping the session. The exit code is the
    session's: the agent's own when it exits, or the termination reason's
    (max_runtime 10, repetition_loop 11, validation_failure 12,
    consecutive_failures 13, max_iterations 14, budget 15, loop_gate_denied 16,
    operator 17).

    \b
    Examples:
      loopwarden run --set limits.max_runtime=5s -- python -c "import time; time.sleep(60)"
      loopwarden run --name fixer -- python -m loopwarden.sessions.scripted repetition
      loopwarden run --adapter plain --set limits.stall_timeout=2m -- make test
      loopwarden run -d -- ./my-agent --task T1
    """
    build_config(config_file, preset, sets)  # fail here, before anything starts
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise Fail("no command given; put it after --, e.g. loopwarden run -- python agent.py")
    spec = {"name": name, "command": cmd, "adapter": adapter, "cwd": os.getcwd(), "env": dict(os.environ),
            "preset": preset, "sets": list(sets), "task": task, "config_env": config_env(),
            "config_file": str(Path(config_file).resolve()) if config_file else None}
    with connect() as client:
        try:
            started = client.request("run", spec=spec)
        except DaemonError as exc:
            raise DaemonFail(str(exc)) from None
        sid = started["id"]
        if detach:
            click.echo(sid)
            return
        click.echo(f"loopwarden: session {sid} ({started['name']}) started; Ctrl-C detaches", err=True)
        code = _follow(client, sid, as_json)
    sys.exit(code)


def _follow(client: Any, sid: str, as_json: bool) -> int:
    """Print a session's events and verdicts until it ends; return its exit code."""
    try:
        first, updates = client.subscribe([sid], events=True)
        for snap in first["sessions"]:
            if snap.get("state") in FINAL:
                return _final(snap)
        for message in updates:
            kind, data = message.get("kind"), message.get("data") or {}
            if as_json:
                click.echo(orjson.dumps(message, default=str).decode())
            else:
                _print_record(kind, data)
            if kind == "session" and data.get("state") in FINAL:
                if not as_json:
                    click.echo(f"loopwarden: session {sid} {_state(data)}: {data.get('termination_text') or 'done'}",
                               err=True)
                return _final(data)
    except KeyboardInterrupt:
        click.echo(f"\nloopwarden: detached; session {sid} keeps running (loopwarden logs -f {sid})", err=True)
        return 0
    except DaemonError as exc:
        raise DaemonFail(str(exc)) from None
    raise DaemonFail("the daemon went away while following the session")


def _final(snap: dict[str, Any]) -> int:
    return final_exit_code(snap)


_VERDICT_COLOUR = {"nudge": "yellow", "block": "red", "gate": "magenta", "terminate": "bright_red",
                   "escalate": "magenta", "spill": "blue"}


def _print_record(kind: str | None, data: dict[str, Any]) -> None:
    if kind == "event":
        etype = data.get("type")
        if etype == "tool_call":
            args = orjson.dumps(data.get("args"), default=str).decode()
            click.echo(f"  {data.get('seq', ''):>5} → {data.get('tool')} {args[:120]}")
        elif etype == "tool_result":
            out = str(data.get("output") or "").strip().splitlines()
            mark = click.style("✗", fg="red") if data.get("is_error") else "✓"
            click.echo(f"  {data.get('seq', ''):>5} {mark} {(out[0] if out else '')[:120]}")
        elif etype == "output":
            click.echo(f"  {data.get('seq', ''):>5} │ {str(data.get('text'))[:200]}")
        elif etype in ("assistant_message", "user_message", "error", "invalid_line", "validation_error"):
            text = data.get("text") or data.get("message") or data.get("reason") or ""
            click.echo(f"  {data.get('seq', ''):>5} {etype}: {str(text)[:160]}")
    elif kind == "verdict":
        action = str(data.get("action"))
        head = click.style(action.upper(), fg=_VERDICT_COLOUR.get(action), bold=True)
        click.echo(f"  {data.get('seq', ''):>5} {head} [{data.get('rule')}] {data.get('reason')}")
    elif kind == "session" and data.get("state") in ("gated",):
        gates = ", ".join(f"{data.get('id')}:{g}" for g in data.get("pending_gates") or [])
        click.echo(click.style(f"  waiting for a human: loopwarden approve {gates}", fg="magenta"), err=True)


@click.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@click.option("--all", "-a", "show_all", is_flag=True, help="Include ended sessions (default: the last 20).")
def ls(as_json: bool, show_all: bool) -> None:
    """List sessions: live ones and recent history.

    \b
    Example:
      loopwarden ls
    """
    sessions = call("list")
    if not show_all:
        live = [s for s in sessions if s.get("state") not in FINAL]
        ended = [s for s in sessions if s.get("state") in FINAL][-20:]
        sessions = ended + live
    if as_json:
        _json_out(sessions)
        return
    if not sessions:
        click.echo("no sessions yet; start one with: loopwarden run -- COMMAND")
        return
    click.echo(f"{'ID':<6} {'NAME':<18} {'ADAPTER':<8} {'STATE':<34} {'RUNTIME':>9} {'CALLS':>6} {'GATES':>5} {'CPU':>6} {'MEM':>6}")
    for s in sessions:
        click.echo(f"{s.get('id', ''):<6} {str(s.get('name', ''))[:18]:<18} {str(s.get('adapter', '')):<8} "
                   f"{_state(s)[:34]:<34} {_age(s.get('runtime')):>9} {s.get('tool_calls', 0) or 0:>6} "
                   f"{len(s.get('pending_gates') or []):>5} {s.get('cpu_percent', 0) or 0:>5.0f}% {_mem(s.get('rss')):>6}")


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
            click.echo(f"daemon pid {info['pid']}, up {_age(info['uptime'])}, {info['sessions']} sessions "
                       f"this run\nsocket {info['socket']}\ndatabase {info['database']}")
        return
    snap = call("status", session=session)
    if as_json:
        _json_out(snap)
        return
    click.echo(f"{snap['id']} {snap.get('name')}  {_state(snap)}  pid {snap.get('pid')}  adapter {snap.get('adapter')}"
               f"{' (handshake)' if snap.get('handshake') else ''}")
    click.echo(f"command: {' '.join(snap.get('command') or [])}")
    click.echo(f"runtime {_age(snap.get('runtime'))} of {_age(snap.get('max_runtime'))}, {snap.get('events', 0)} events, "
               f"{snap.get('tool_calls', 0)} tool calls, cpu {snap.get('cpu_percent', 0)}%, mem {_mem(snap.get('rss'))}")
    if snap.get("termination_text"):
        click.echo(f"ended: {snap['termination_text']}")
    for name, (value, limit) in (snap.get("counters") or {}).items():
        shown = f"{value}/{limit}" if limit else f"{value}"
        click.echo(f"  {name:<18} {shown}")
    if snap.get("pending_gates"):
        click.echo("gates waiting: " + ", ".join(f"{snap['id']}:{g}" for g in snap["pending_gates"]))


@click.command()
@click.argument("session")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new records until the session ends.")
@click.option("--json", "as_json", is_flag=True, help="Print records as JSON lines.")
@click.option("--limit", default=1000, show_default=True, help="How many stored events to print first.")
def logs(session: str, follow: bool, as_json: bool, limit: int) -> None:
    """Print a session's stored events and verdicts, oldest first.

    \b
    Examples:
      loopwarden logs s3
      loopwarden logs -f fixer
    """
    with connect() as client:
        try:
            result = client.request("logs", session=session, limit=limit)
        except DaemonError as exc:
            raise DaemonFail(str(exc)) from None
        sid = result["session"]
        records = [("event", e) for e in result["events"]] + [("verdict", v) for v in result["verdicts"]]
        records.sort(key=lambda r: (r[1].get("ts") or 0, 0 if r[0] == "event" else 1))
        for kind, row in records:
            data = row.get("data") if kind == "event" else row
            if as_json:
                click.echo(orjson.dumps({"kind": kind, "session": sid, "data": data}, default=str).decode())
            elif isinstance(data, dict):
                _print_record(kind, {**data, "seq": row.get("seq")})
        if follow:
            sys.exit(_follow(client, sid, as_json))


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
    for g in pending:
        click.echo(f"{g['ref']:<10} {g.get('name', ''):<16} {_age(now - g['opened_at']):>7} ago  [{g['rule']}] {g['reason']}")


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
        + f"\n\n\b\nExample:\n  loopwarden {verb} s3:g1" + (' --note "try the staging database"' if approve else "")
    )
    return command


approve = _decision(True)
deny = _decision(False)


@click.command()
@click.argument("session")
@click.option("--note", help="What the authority covers; added to the injected text and the audit log.")
def grant(session: str, note: str | None) -> None:
    """Grant the agent unblock authority (seed 001's scoped text is injected).

    \b
    Example:
      loopwarden grant s3 --note "you may stub the payment service"
    """
    result = call("grant", session=session, note=note)
    click.echo(f"{result['session']}: unblock authority granted")


@click.command()
@click.argument("session")
@click.option("--counter", help="Reset only this counter (repetition, same_error, alternation, monologue, "
                                "validation, failures, loop, attempts, iterations, blocks).")
@click.option("--note", help="Why; recorded in the audit log.")
def reset(session: str, counter: str | None, note: str | None) -> None:
    """Reset a session's loop counters (a human intervention, decision 74).

    \b
    Example:
      loopwarden reset s3 --counter loop
    """
    result = call("reset", session=session, counter=counter, note=note)
    click.echo(f"{result['session']}: reset {result['reset']}")


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


def _signal_command(op: str, help_text: str) -> Any:
    @click.command(op)
    @click.argument("session")
    @click.option("--note", help="Why; recorded in the audit log.")
    def command(session: str, note: str | None) -> None:
        result = call(op, session=session, note=note)
        click.echo(f"{result['session']}: {result['state']}")

    command.help = help_text + f"\n\n\b\nExample:\n  loopwarden {op} s3"
    return command


pause = _signal_command("pause", "Pause a session (SIGSTOP to its process group).")
resume = _signal_command("resume", "Resume a paused session (SIGCONT).")
kill = _signal_command("kill", "Stop a session: a stop line, SIGTERM to its group, SIGKILL after the grace period.")


@click.command()
@click.argument("pid", type=int)
@click.option("--name", help="A name to find the session by.")
@config_options
def adopt(pid: int, name: str | None, config_file: str | None, preset: str | None, sets: tuple[str, ...]) -> None:
    """Watch a process started elsewhere: runtime limit, resources, kill.

    \b
    Example:
      loopwarden adopt 4242 --set limits.max_runtime=2h
    """
    build_config(config_file, preset, sets)
    result = call("adopt", pid=pid, name=name, preset=preset, sets=list(sets))
    click.echo(result["id"])


@click.command()
def serve() -> None:
    """Run the daemon in the foreground (clients start it in the background when needed).

    It owns every session and the store; if it stops, the agents it started stop
    with it. Stop it with Ctrl-C, SIGTERM or 'loopwarden stop-daemon'.
    """
    from ..supervisor.daemon import run_daemon

    sys.exit(run_daemon(default_paths()))


@click.command("stop-daemon")
def stop_daemon() -> None:
    """Stop the daemon; the sessions it runs are stopped with it.

    \b
    Example:
      loopwarden stop-daemon
    """
    with connect(autostart=False) as client:
        try:
            result = client.request("shutdown")
        except DaemonError as exc:
            raise DaemonFail(str(exc)) from None
    click.echo(f"daemon stopping; {result['sessions']} live sessions stopped with it")
