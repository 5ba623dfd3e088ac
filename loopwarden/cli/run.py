"""`loopwarden run`: start a command as a supervised session. Its own module: its --adapter choices come from
the adapter registry (every adapter and entry-point plugin), which no other command needs to import."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from click.core import ParameterSource

from ..paths import working_directory
from ..runtime.client import DaemonError
from ..runtime.commands import missing_program
from ..runtime.pods.placement import parse_on
from ..sessions import registry
from ..sessions.base import AUTO
from ..supervisor.tags import TagError, check_tags
from ..supervisor.visible import visible
from .common import Fail, build_config, config_env, config_options, failure, operator_connection
from .live import _follow, _say_renamed
from .projects import with_project_defaults


@click.command(context_settings={"ignore_unknown_options": True})
@config_options
@click.option("--name", help="A name to find the session by (default: the command's name); one a live session "
                             "has gets a suffix (python-2).")
@click.option("--adapter", type=click.Choice(registry.names()), default=AUTO, show_default=True,
              help="auto: chosen from the command (codex app-server, ACP agents) or from the agent's first output "
                   "line (a loopwarden event: native; Claude Code stream-json; codex exec --json), else plain; "
                   "the choice and why are printed and kept in `logs`. "
                   "native: loopwarden's JSON protocol, strictly (lines that are not end the session); "
                   "plain: any command, its output shown and stored (time, output and process limits); "
                   "claude-code: Claude Code, COMMAND being claude's arguments and the prompt (docs/claude-code.md); "
                   "codex: Codex through `codex app-server`, COMMAND being codex options (-c key=value, -m, -s, -C) "
                   "and the prompt last (docs/codex.md). "
                   "`loopwarden adapters` lists them all with what each can do.")
@click.option("--agent", "known_agent", type=click.Choice(list(registry.known_agents())),
              help="An agent an adapter starts by name alone, COMMAND being the prompt: today the ACP agents, "
                   "the same as --adapter acp with their command (gemini --acp, opencode acp, claude-agent-acp) "
                   "found on PATH or in the project's .agents folder (docs/acp.md).")
@click.option("--task", help="Task id for loop counting, when the agent does not send one.")
@click.option("--worktree/--no-worktree", default=None,
              help="Run the agent in a git worktree and branch of its own (loopwarden/ID), made from the commit "
                   "checked out here, so that your checkout is never touched; uncommitted changes here are not in "
                   "it. Review with 'loopwarden diff ID', then 'loopwarden worktree ID merge' (or discard). "
                   "Default: the setting sessions.worktree (off). docs/worktrees.md")
@click.option("--tag", "tags", multiple=True, metavar="TAG",
              help="A label to group and filter sessions by (repeatable): 1 to 32 printable characters, no spaces "
                   "or commas. 'loopwarden ls --tag TAG' lists its sessions; 'loopwarden set ID tag=-TAG' removes it.")
@click.option("--on", "on", metavar="PLACE",
              help="Where the agent runs: local (here), or kubernetes[:CONTEXT[/NAMESPACE]], a pod of its own on a "
                   "cluster your kubeconfig reaches, supervised like a local session (docs/kubernetes.md). "
                   "Default: the setting kubernetes.place (local).")
@click.option("--image", metavar="IMAGE",
              help="The pod's image with --on kubernetes: the agent's program and a python3 for loopwarden's "
                   "keeper. Default: the setting kubernetes.image.")
@click.option("--detach", "-d", is_flag=True, help="Print the session id and return at once.")
@click.option("--json", "as_json", is_flag=True, help="Stream records as JSON lines instead of text.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(config_file: str | None, preset: str | None, sets: tuple[str, ...], name: str | None, adapter: str,
        known_agent: str | None, task: str | None, worktree: bool | None, tags: tuple[str, ...], on: str | None,
        image: str | None, detach: bool, as_json: bool, command: tuple[str, ...]) -> None:
    """Start COMMAND as a supervised session and stream what it does.

    Without --adapter, loopwarden chooses from what the agent does and says
    which and why: its command (codex app-server, an ACP agent), else its
    first line on stdout (loopwarden's protocol, Claude Code stream-json,
    codex exec --json), else plain output, shown and stored. No command
    is ended for not speaking loopwarden's protocol unless --adapter native
    asks for that.

    In a directory the user config names (`[projects."~/code/api"]` in
    `loopwarden config path`), that project's adapter, worktree and limits
    apply where no flag, --config file or LOOPWARDEN_* variable says
    otherwise; one line says which.

    Ctrl-C detaches without stopping the session. The exit code is the
    session's: the agent's own when it exits, or the termination reason's
    (max_runtime 10, repetition_loop 11, validation_failure 12,
    consecutive_failures 13, max_iterations 14, budget 15, loop_gate_denied 16,
    operator 17, lost 19: the daemon died while following, daemon_stopped 20).
    A command that cannot start exits 127; loopwarden's own errors exit 2 (what
    was asked is wrong), 3 (the daemon could not be reached, stopped answering
    while followed, or cannot do it now) or 4 (refused inside a supervised session).

    \b
    Examples:
      loopwarden run --set limits.max_runtime=5s -- python -c "import time; time.sleep(60)"
      loopwarden run --name fixer -- python -m loopwarden.sessions.scripted repetition
      loopwarden run --set limits.stall_timeout=2m -- make test
      loopwarden run --adapter native -- ./my-agent
      loopwarden run --adapter claude-code -- --max-turns 30 "fix the failing test"
      loopwarden run --adapter codex -- -m gpt-5.5 "fix the failing test"
      loopwarden run --adapter acp -- opencode acp -- "fix the failing test"
      loopwarden run --agent gemini -- "fix the failing test"
      loopwarden run -d -- ./my-agent --task T1
      loopwarden run --worktree --adapter claude-code -- "fix the failing test"
      loopwarden run --tag team-a --tag flaky -d -- make test
      loopwarden run --on kubernetes:prod/agents --image ghcr.io/me/agent:1 -- python3 agent.py
    """
    try:
        tag_list = check_tags(tags)
    except TagError as exc:
        raise Fail(f"--tag: {exc}") from None
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    env = dict(os.environ)
    try:
        cwd = working_directory()
        given = click.get_current_context().get_parameter_source("adapter") != ParameterSource.DEFAULT
        chosen = with_project_defaults(cwd, registry.names(), adapter_given=given or bool(known_agent),
                                       worktree=worktree, sets=sets, config_file=config_file)
        adapter, worktree, sets = chosen.adapter or adapter, chosen.worktree, chosen.sets
        config = build_config(config_file, preset, sets)  # fail here, before anything starts
        pod = parse_on(on or config.kubernetes.place) is not None
        launch = registry.prepare_launch(adapter, cmd, env, cwd, agent=known_agent)
    except ValueError as exc:
        raise Fail(str(exc)) from None
    adapter, cmd = launch.adapter, launch.command
    env.update(launch.env)
    missing = None if pod else missing_program(cmd[0], os.environ.get("PATH"), cwd)  # a pod's image has its own
    if missing:
        click.echo(f"loopwarden: error: {missing}", err=True)
        sys.exit(127)
    spec = {"name": name, "command": cmd, "adapter": adapter, "cwd": cwd, "env": env,
            "preset": preset, "sets": list(sets), "task": task, "config_env": config_env(),
            "config_file": str(Path(config_file).resolve()) if config_file else None, "worktree": worktree,
            "tags": tag_list, "on": on, "image": image}
    with operator_connection() as client:
        try:
            started = client.request("run", spec=spec)
        except DaemonError as exc:
            raise failure(exc) from None
        sid = started["id"]
        _say_renamed(started)
        _say_worktree(sid, started.get("worktree"))
        if detach:
            click.echo(sid)
            return
        name = visible(str(started["name"]))
        click.echo(f"loopwarden: session {sid} ({name}) started; Ctrl-C detaches", err=True)
        code = _follow(client, sid, as_json)
    sys.exit(code)


def _say_worktree(sid: str, tree: object) -> None:
    """Where a session with its own worktree works, on stderr (stdout holds only the id with --detach)."""
    if not isinstance(tree, dict):
        return
    base = str(tree.get("base") or "")[:12]
    click.echo(visible(f"loopwarden: session {sid} works in its own worktree {tree.get('path')} (branch "
                       f"{tree.get('branch')}, from commit {base}); your checkout is left as it is"), err=True)
    if tree.get("checkout_dirty"):
        click.echo("loopwarden: note: the uncommitted changes in your checkout are not in the worktree (it holds "
                   "the last commit only)", err=True)
