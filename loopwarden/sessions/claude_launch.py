"""Launching Claude Code: finding the `claude` binary, and splitting the prompt from its options."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

ENV_BINARY = "LOOPWARDEN_CLAUDE"
# Always added by loopwarden: print mode, stream-json both ways, and an echo of each user line
# (how the adapter knows an injected line was read). The user's copies of these are dropped.
FIXED_ARGS = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
              "--replay-user-messages")
_DROPPED = {"-p": 0, "--print": 0, "--verbose": 0, "--replay-user-messages": 0,
            "--input-format": 1, "--output-format": 1}

# Options of claude 2.1.330 that take a value (read from its option table); any other option is a flag.
_ONE = frozenset({
    "--advisor", "--agent", "--agent-color", "--agent-id", "--agent-name", "--agent-type", "--agents",
    "--append-subagent-system-prompt", "--append-subagent-system-prompt-file", "--append-system-prompt",
    "--append-system-prompt-file", "--autocompact", "--client-data-url", "--debug-file", "--effort",
    "--environment", "--fallback-model", "--fast-mode", "--inherit-permission-mode", "--input-format",
    "--json-schema", "--managed-settings", "--max-budget-usd", "--max-thinking-tokens", "--max-turns",
    "--messaging-socket-path", "--model", "--name", "-n", "--output-format", "--parent-session-id",
    "--permission-mode", "--permission-prompt-tool", "--permission-prompts", "--plan-mode-instructions",
    "--plugin-dir", "--plugin-dir-no-mcp", "--plugin-url", "--prefill", "--prefill-b64",
    "--proactivity", "--project-config-root", "--remote-control-session-name-prefix",
    "--resume-drops-turn", "--resume-session-at", "--rewind-files", "--runner-declares", "--sdk-url",
    "--session-id", "--setting-sources", "--settings", "--system-prompt", "--system-prompt-file",
    "--system-prompt-snapshot", "--task-budget", "--team-name", "--teammate-mode", "--thinking",
    "--thinking-display", "--watch-artifact", "--watch-artifact-no-autoreact", "--workload",
})
_MANY = frozenset({
    "--add-dir", "--allowed-tools", "--allowedTools", "--betas", "--channels", "--disallowed-tools",
    "--disallowedTools", "--file", "--mcp-config", "--tools",
})
_TOOL_LISTS = frozenset({  # the list options whose values are tool names and permission rules, never paths
    "--allowed-tools", "--allowedTools", "--disallowed-tools", "--disallowedTools", "--tools",
})
_RULE = re.compile(r"(?<![\w.-])[\w.-]++\([^()]*+\)")  # a permission rule such as Bash(git commit:*)
_TOOL = re.compile(r"(?:[A-Z][\w-]*|mcp__[\w-]+|[\w-]+:[\w-]+)\Z")  # Bash, WebFetch, mcp__github__x, plugin:tool
_OPTIONAL = frozenset({
    "--cloud", "--debug", "-d", "--from-pr", "--prompt-suggestions", "--remote-control", "--resume",
    "-r", "--worktree", "-w",
})


@dataclass(frozen=True)
class ClaudeArgs:
    """The user's claude arguments, split: options (kept in order) and the prompt (None if absent)."""

    options: list[str]
    prompt: str | None


def _sentence(value: str) -> bool:
    """Whether a tool list's value reads as a prompt: words with spaces, not tool names and permission rules
    (`Bash(git log:*) Read`, `Edit Write`: claude takes such a value as tools)."""
    words = _RULE.sub(" ", value).replace(",", " ").split()
    return len(value.split()) > 1 and not all(_TOOL.match(word) for word in words)


def split_args(args: list[str]) -> ClaudeArgs:
    """Find the prompt the way claude's own parser (commander) would: the argument that is neither an
    option nor an option's value. A list option (`--allowedTools A B`) takes every following argument
    that does not start with `-`, as in claude itself; but when that leaves no prompt and a tool list's last
    value is a sentence (`--allowedTools "Bash,Read" "fix the test"`), that value is the prompt the user
    meant (it goes to claude as the first user line, not as a tool). Options loopwarden sets are dropped."""
    options: list[str] = []
    prompts: list[str] = []
    listed_last = False  # the options end with a list option's values
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            prompts.extend(args[i + 1:])
            break
        if not arg.startswith("-") or arg == "-":
            prompts.append(arg)
            i += 1
            continue
        name = arg.split("=", 1)[0]
        taken = [arg]
        if "=" not in arg:
            if name in _ONE and i + 1 < len(args):
                taken.append(args[i + 1])
            elif name in _MANY or name in _OPTIONAL:
                j = i + 1
                while j < len(args) and not args[j].startswith("-") and (name in _MANY or j == i + 1):
                    taken.append(args[j])
                    j += 1
        i += len(taken)
        if name in _DROPPED:
            continue
        options.extend(taken)
        listed_last = name in _TOOL_LISTS and "=" not in arg and len(taken) > 2  # (a path may hold spaces)
    if not prompts and listed_last and _sentence(options[-1]):
        prompts.append(options.pop())
    return ClaudeArgs(options, " ".join(prompts) if prompts else None)


_CONVERSATION = frozenset({"--session-id", "--resume", "-r", "--continue", "-c", "--fork-session"})


def without_conversation(options: list[str]) -> list[str]:
    """`options` (split_args's) without those choosing a conversation (a new run says which it continues)."""
    out: list[str] = []
    skip = False
    for i, word in enumerate(options):
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in _CONVERSATION:
            nxt = options[i + 1] if i + 1 < len(options) else None
            skip = "=" not in word and name in ("--session-id", "--resume", "-r") and nxt is not None \
                and not nxt.startswith("-")
            continue
        out.append(word)
    return out


def is_claude(arg: str) -> bool:
    """Whether a command's first word names the claude binary rather than being an argument."""
    if os.path.basename(arg) == "claude":
        return True
    return os.sep in arg and os.path.isfile(arg) and os.access(arg, os.X_OK)


def bundled_binary() -> str | None:
    """The CLI bundled in the claude-agent-sdk wheel (`claude_agent_sdk/_bundled/claude`), if installed."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "_bundled", "claude")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def find_binary(env: dict[str, str] | None = None) -> str | None:
    """$LOOPWARDEN_CLAUDE, else `claude` on PATH, else the one bundled with claude-agent-sdk."""
    env = dict(os.environ) if env is None else env
    chosen = env.get(ENV_BINARY)
    if chosen:
        return chosen
    return shutil.which("claude", path=env.get("PATH")) or bundled_binary()


def launch_command(words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The session command for `claude-code`: the binary first, then the user's claude arguments.

    Raises ValueError (one line) when no binary is found or no prompt is given.
    """
    words = list(words)
    if words and is_claude(words[0]):
        binary, args = words[0], words[1:]
    else:
        found = find_binary(env)
        if not found:
            raise ValueError(f"cannot find Claude Code: no `claude` on PATH; install it or set {ENV_BINARY}")
        binary, args = found, words
    if split_args(args).prompt is None:
        raise ValueError("no prompt for Claude Code: give it as the last argument, "
                         'e.g. -- --max-turns 20 "fix the tests"')
    return [binary, *args]
