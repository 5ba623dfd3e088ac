"""What the ACP adapter knows of the agent programs it launches, by class (sessions/acp_agents.py knows each
one): the session command and environment, a known agent's name, ladder and shortcut, and how its conversation is
handed over to its interactive program or resumed."""

from __future__ import annotations

from collections.abc import Mapping

from . import acp_agents
from .base import Adapter, Handover


def split_words(words: list[str]) -> tuple[list[str], str | None]:
    """`AGENT COMMAND... -- PROMPT`: the agent's command and the prompt (None when there is no `--`).

    The first `--` splits them, so a prompt may itself contain `--`."""
    if "--" not in words:
        return list(words), None
    at = words.index("--")
    prompt = " ".join(words[at + 1:]).strip()
    return list(words[:at]), prompt or None


def launch_command(words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The session command: the agent's command, `--`, the prompt. Raises ValueError (one line)."""
    agent, prompt = split_words(words)
    if not agent:
        raise ValueError('no ACP agent command given; e.g. loopwarden run --adapter acp -- gemini --acp -- '
                         '"fix the tests"')
    if prompt is None:
        raise ValueError('no prompt for the ACP agent: put it after a second --, e.g. '
                         'loopwarden run --adapter acp -- gemini --acp -- "fix the tests"')
    return [*agent, "--", prompt]


class AcpPrograms(Adapter):
    """The agent-program side of AcpAdapter: nothing here speaks the protocol."""

    resuming_as: acp_agents.Resuming  # what the agent needs beyond the protocol to continue (set by the adapter)

    def ladder_of(self, command: list[str], env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """A known agent's own name and ladder (gemini climbs Gemini's models); an unknown one is "acp"'s."""
        known = acp_agents.agent_of(command, env)
        return (known.name, known.ladder) if known is not None else (self.agent, self.ladder)

    @classmethod
    def launch_command(cls, words: list[str], env: dict[str, str] | None = None) -> list[str]:
        return launch_command(words, env)

    @classmethod
    def launch_env(cls, command: list[str], env: dict[str, str], cwd: str) -> dict[str, str]:
        """A known agent's fixed variables and its private layer's (sessions/acp_agents.py)."""
        return acp_agents.launch_env(split_words(command)[0], env, cwd)

    @classmethod
    def waits_for_client(cls, argv: list[str], env: Mapping[str, str]) -> str | None:
        agent = acp_agents.in_acp_mode(split_words(argv)[0], env)
        return f"the command starts {agent}, an ACP agent, which waits for its client to speak first" if agent else None

    @classmethod
    def known_agents(cls) -> list[str]:
        return list(acp_agents.AGENTS)

    @classmethod
    def agent_words(cls, name: str, prompt: list[str], env: Mapping[str, str], cwd: str) -> list[str]:
        """The agent's command found, its private layer's arguments, `--`, the prompt (sessions/acp_agents.py)."""
        return acp_agents.shortcut_words(name, prompt, env, cwd)

    @classmethod
    def handover(cls, command: list[str], conversation: str, cwd: str, env: Mapping[str, str]) -> Handover:
        agent = split_words(command)[0]
        known = acp_agents.agent_of(agent, {})
        how = known.resuming if known is not None else acp_agents.Resuming()
        if how.program_resume is None:
            raise ValueError(f"loopwarden knows no interactive program of {agent[0]!r} to take its conversation "
                             "over in; continue it instead ('loopwarden continue')")
        return Handover([agent[0], how.program_resume, conversation], how.env(env) if how.env else {})

    def resume_not_before(self, ended_at: float) -> float:
        """An agent that names a session's file by its minute: the minute after the run's."""
        return (ended_at // 60 + 1) * 60 + 1 if self.resuming_as.minute_named else 0.0

    def resume_env(self, env: Mapping[str, str]) -> dict[str, str]:
        how = self.resuming_as
        return how.env(env) if how.env else {}
