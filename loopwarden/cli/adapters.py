"""`loopwarden adapters`: every way to supervise an agent, and what each can do."""

from __future__ import annotations

import json

import click

from ..sessions.base import Capability, capability_names
from ..sessions.hooks import DEFAULT_HOOK_AGENT
from ..sessions.registry import discover
from ..supervisor.visible import visible


def _install_how(hook_agent: str) -> str:
    """How an agent's hooks are installed: `hook install`, naming the agent unless it is the default one."""
    return "hook install" + (f" --agent {hook_agent}" if hook_agent != DEFAULT_HOOK_AGENT else "")

@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line instead of a table.")
def adapters(as_json: bool) -> None:
    """List the adapters and what each can do.

    \b
    Launched adapters are chosen with `loopwarden run --adapter NAME`; attached ones come from
    `loopwarden hook install` and `loopwarden adopt`. Another package adds an adapter through the
    `loopwarden.adapters` entry-point group (see docs/adapters.md).

    \b
    Capabilities:
      veto           refuse a tool call before it runs
      hold           keep a call waiting while a gate is open
      inject         send text the model reads (nudges, guidance, authority)
      steer          add text to the turn that is running
      interrupt      end the running turn and keep the session
      rewind         drop turns from the model's history
      process_group  owns its process group: pause, resume and kill reach every process

    \b
    Examples:
      loopwarden adapters
      loopwarden adapters --json
    """
    # imported here: it pulls in the whole session runtime, a quarter of a second every CLI call would pay
    from ..runtime.adopted import AdoptedSession

    found = discover()
    # launched: loopwarden leads its process group, and SIGSTOP of the group holds any agent for a gate
    rows = [(name, "run --adapter", cls.agent, cls.declared | Capability.PROCESS_GROUP | Capability.HOLD, cls.summary)
            for name, cls in found.launched.items()]
    rows += [(name, _install_how(cls.hook_agent), cls.agent, cls.declared, cls.summary)
             for name, cls in found.hooked.items()]
    rows.append((AdoptedSession.adapter_name, "adopt PID", AdoptedSession.agent, AdoptedSession.declared,
                 AdoptedSession.summary))
    broken = found.broken
    if as_json:
        for name, how, agent, caps, summary in rows:
            click.echo(json.dumps({"name": name, "how": how, "agent": agent, "capabilities": capability_names(caps),
                                   "summary": summary}))
        for b in broken:
            click.echo(json.dumps({"name": b.name, "entry_point": b.target, "error": b.error}))
        return
    width, how_width = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    for name, how, _agent, caps, summary in rows:
        can = ", ".join(capability_names(caps)) or "watch and signal only"
        click.echo(f"{visible(name):<{width}}  {how:<{how_width}}  {can}")
        click.echo(f"{'':<{width}}  {visible(summary)}")
    for b in broken:
        click.echo(f"loopwarden: warning: adapter {visible(b.name)!r} ({visible(b.target)}) did not load: "
                   f"{visible(b.error)}", err=True)
