"""Known ACP agents: `loopwarden run --agent NAME -- PROMPT` is `--adapter acp` with the agent's command.

| name | command | binary: $override, else PATH, else the project's `.agents/node_modules/.bin` |
|---|---|---|
| gemini | `gemini --acp`, env GEMINI_CLI_NO_RELAUNCH=true (no wrapper that ignores SIGTERM) | $LOOPWARDEN_GEMINI |
| opencode | `opencode acp` | $LOOPWARDEN_OPENCODE |
| claude-acp | `claude-agent-acp` (npm @zed-industries/claude-agent-acp) | $LOOPWARDEN_CLAUDE_ACP |

Each agent has a *layer*: the agent's private configuration that makes it ask permission for every
call (left alone, both Gemini and Claude run `echo`, `ls`, `cat` without asking, and loopwarden
cannot veto what is never asked about). A layer returns extra environment variables and arguments;
the environment is added whenever the adapter sees the agent's command (`Adapter.launch_env`), the
arguments only by the `--agent` shortcut (a command typed in full runs as typed). A layer may be
called more than once for one launch: it must give the same answer each time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..supervisor import ladders
from . import acp_gemini

PROJECT_AGENTS = Path(__file__).resolve().parents[2] / ".agents"  # npm --prefix folder, git-ignored
ENV_AGENTS_DIR = "LOOPWARDEN_AGENTS_DIR"  # another npm prefix folder to look in


@dataclass(frozen=True)
class Layer:
    """What an agent's private configuration adds to its launch."""

    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)


def gemini_layer(env: Mapping[str, str], cwd: str) -> Layer:
    """Gemini CLI's private configuration that makes it ask for every call: a policy file in loopwarden's
    data directory, given with `--admin-policy` (sessions/acp_gemini.py, docs/gemini.md)."""
    return Layer(args=acp_gemini.layer_args(env, cwd))


def claude_acp_layer(env: Mapping[str, str], cwd: str) -> Layer:
    """claude-agent-acp's private configuration. Every Bash call asks through a settings layer the acp
    adapter sends in `session/new` (sessions/acp_claude.py: no file, no argument); here only IS_SANDBOX
    is emptied, which as root makes the adapter pass a flag Claude Code refuses."""
    from .acp_claude import layer_env

    return Layer(env=layer_env(env))


def opencode_layer(env: Mapping[str, str], cwd: str) -> Layer:
    """OpenCode asks by its own permission settings; nothing is added yet."""
    return Layer()


@dataclass(frozen=True)
class Resuming:
    """What a known agent needs beyond the protocol to continue a conversation, and to be taken over in."""

    minute_named: bool = False  # a session's file is named by its minute: a load waits for the next one
    replays_after_load: bool = False  # session/load answers first, then replays, then sends its commands
    env: Callable[[Mapping[str, str]], dict[str, str]] | None = None  # what a resumed run adds to its environment
    program_resume: str | None = None  # its interactive program's option that opens a conversation by id


# Gemini CLI 0.61: a session's file is named by the minute it was made, and a load in that same minute writes a
# file of that name over the history; its load answers before it replays; and its default session cleanup
# deletes a loaded session at the next start (acp_gemini.layer_env switches it off for the run).
GEMINI_RESUMING = Resuming(minute_named=True, replays_after_load=True, env=acp_gemini.layer_env,
                           program_resume="--resume")


@dataclass(frozen=True)
class AcpAgent:
    """One known ACP agent: how to find and start it."""

    name: str
    binary: str  # the program's name on PATH and in node_modules/.bin
    args: tuple[str, ...]  # after the binary, before the layer's arguments
    override: str  # environment variable naming the binary to run instead
    env: dict[str, str]  # always set for it
    layer: Callable[[Mapping[str, str], str], Layer]
    package: str | None = None  # npm package, for the error that says how to install it
    resuming: Resuming = Resuming()
    ladder: tuple[str, ...] = ()  # its models to escalate through, cheapest first (none: the default ladder)

    def find(self, env: Mapping[str, str]) -> str | None:
        """$override, else the binary on PATH, else in the project's (or $LOOPWARDEN_AGENTS_DIR's) npm folder."""
        chosen = env.get(self.override)
        if chosen:
            return chosen
        found = shutil.which(self.binary, path=env.get("PATH"))
        if found:
            return found
        for prefix in (env.get(ENV_AGENTS_DIR), str(PROJECT_AGENTS)):
            if prefix:
                local = Path(prefix) / "node_modules" / ".bin" / self.binary
                if os.access(local, os.X_OK):
                    return str(local)
        return None


AGENTS: dict[str, AcpAgent] = {a.name: a for a in (
    AcpAgent("gemini", "gemini", ("--acp",), "LOOPWARDEN_GEMINI", {"GEMINI_CLI_NO_RELAUNCH": "true"},
             gemini_layer, "@google/gemini-cli", GEMINI_RESUMING, ladders.GEMINI),
    AcpAgent("opencode", "opencode", ("acp",), "LOOPWARDEN_OPENCODE", {}, opencode_layer, "opencode-ai"),
    AcpAgent("claude-acp", "claude-agent-acp", (), "LOOPWARDEN_CLAUDE_ACP", {}, claude_acp_layer,
             "@zed-industries/claude-agent-acp", ladder=ladders.ANTHROPIC),
)}


def shortcut_words(name: str, prompt: list[str], env: Mapping[str, str], cwd: str) -> list[str]:
    """The `--adapter acp` words for `--agent NAME -- PROMPT`: the agent's command, `--`, the prompt.
    Raises ValueError (one line) for an unknown agent or one that cannot be found."""
    agent = AGENTS.get(name)
    if agent is None:
        raise ValueError(f"unknown ACP agent {name!r}; known: {', '.join(AGENTS)}")
    binary = agent.find(env)
    if binary is None:
        how = f"npm install -g {agent.package}" if agent.package else f"install {agent.binary}"
        raise ValueError(f"cannot find {agent.binary}: not on PATH nor in {PROJECT_AGENTS}/node_modules/.bin; "
                         f"{how}, or set {agent.override}")
    if prompt and prompt[0] == "--":
        prompt = prompt[1:]
    return [binary, *agent.args, *agent.layer(env, cwd).args, "--", *prompt]


def agent_of(command: list[str], env: Mapping[str, str]) -> AcpAgent | None:
    """The known agent a command starts: by its program's name, its override, or a script path naming it."""
    head = command[:2]
    for agent in AGENTS.values():
        override = env.get(agent.override)
        for word in head:
            if os.path.basename(word) == agent.binary or (override and word == override):
                return agent
            if agent.package and agent.package.split("/")[-1] in word.split(os.sep):
                return agent  # node .../claude-agent-acp/dist/index.js
    return None


ACP_FLAGS = {"gemini": ("--acp", "--experimental-acp"), "opencode": ("acp",)}  # without one, not in ACP mode
ACP_ALIASES = {"claude-code-acp": "claude-acp"}  # the adapter's older npm name


def in_acp_mode(words: list[str], env: Mapping[str, str]) -> str | None:
    """The name of the known agent `words` start in ACP mode, or None (`gemini -p ...`: the same program, not
    speaking ACP)."""
    known = agent_of(words, env)
    name = known.name if known is not None else next(
        (ACP_ALIASES[base] for w in words[:2] if (base := os.path.basename(w)) in ACP_ALIASES), None)
    if name is None:
        return None
    flags = ACP_FLAGS.get(name)
    if flags and not any(flag in words for flag in flags):
        return None
    return name


def launch_env(command: list[str], env: Mapping[str, str], cwd: str) -> dict[str, str]:
    """Extra environment for a command that starts a known agent (its fixed variables and its layer's)."""
    agent = agent_of(command, env)
    if agent is None:
        return {}
    return {**agent.env, **agent.layer(env, cwd).env}
