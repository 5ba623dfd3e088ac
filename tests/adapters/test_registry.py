"""The adapter registry: built-ins, a third party's adapter through the entry-point group, and a broken one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopwarden.sessions import registry
from loopwarden.sessions.base import Adapter, Capability, capability_names

PLUGIN = '''
from loopwarden.sessions.base import Capability
from loopwarden.sessions.plain import PlainAdapter
from loopwarden.supervisor.events import UserMessage

class EchoAdapter(PlainAdapter):
    name = "echo-agent"
    agent = "echo"
    summary = "a test adapter from another package"
    declared = Capability.INJECT

class SaysAdapter(PlainAdapter):
    name = "says"
    summary = "a test adapter whose recordings are replayed: each line is what a person said"
    replay_format = "says-lines"

    @classmethod
    def replay_parser(cls):
        return lambda line, seq: [UserMessage(seq=seq, text=line.decode())] if line != b"-" else []

class WaitsAdapter(PlainAdapter):
    name = "waits"
    summary = "a test adapter whose agent waits for its client, known by its command line"

    @classmethod
    def waits_for_client(cls, argv, env):
        return "the command is waiting-agent" if argv[:1] == ["waiting-agent"] else None
'''


def _plugin(root: Path, points: dict[str, str]) -> Path:
    """A real installed distribution on a path: a module and its dist-info with entry_points.txt."""
    (root / "lw_plugin.py").write_text(PLUGIN)
    info = root / "lw_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lw-plugin\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    (info / "entry_points.txt").write_text(f"[{registry.GROUP}]\n{lines}")
    return root


def _adapters_cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run([sys.executable, "-m", "loopwarden", "adapters", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_builtins_declare_what_they_can_do() -> None:
    found = registry.adapters()
    assert {"native", "plain", "claude-code"} <= set(found)
    assert all(issubclass(cls, Adapter) and cls.name == name for name, cls in found.items())
    assert found["plain"].declared == Capability.NONE
    native = found["native"]()
    assert Capability.VETO not in native.capabilities  # until the agent announces the handshake
    native.handshake = True
    assert {"veto", "hold", "inject"} <= set(capability_names(native.capabilities))


def test_another_package_adds_an_adapter_through_the_entry_point(tmp_path: Path) -> None:
    path = _plugin(tmp_path, {"echo-agent": "lw_plugin:EchoAdapter", "native": "lw_plugin:EchoAdapter",
                              "codex-hook": "lw_plugin:EchoAdapter", "misnamed": "lw_plugin:EchoAdapter",
                              "broken": "lw_plugin_missing:Nothing"})
    out = _adapters_cli(path, "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    by_name = {r["name"]: r for r in rows if "how" in r}
    assert by_name["echo-agent"]["capabilities"] == ["hold", "inject", "process_group"]  # launched: SIGSTOP holds
    assert by_name["native"]["summary"].startswith("loopwarden's JSONL")  # a built-in is never replaced
    errors = {r["name"]: r["error"] for r in rows if "error" in r}
    assert "built-in" in errors["native"] and "built-in" in errors["codex-hook"]
    assert "named 'echo-agent'" in errors["misnamed"] and "ModuleNotFoundError" in errors["broken"]
    assert [r["name"] for r in rows if "how" in r].count("codex-hook") == 1
    text = _adapters_cli(path)
    assert text.returncode == 0 and "echo-agent" in text.stdout
    assert "adapter 'broken'" in text.stderr and "Traceback" not in text.stderr


def test_run_accepts_a_third_party_adapter(tmp_path: Path) -> None:
    path = _plugin(tmp_path, {"echo-agent": "lw_plugin:EchoAdapter"})
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run([sys.executable, "-m", "loopwarden", "run", "--help"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert "echo-agent" in out.stdout


def test_auto_chooses_a_third_party_adapter_by_the_command_its_agent_waits_with(tmp_path: Path) -> None:
    """`auto` asks every registered adapter whether it knows a command, another package's as loopwarden's own."""
    path = _plugin(tmp_path, {"waits": "lw_plugin:WaitsAdapter"})
    probe = ("from loopwarden.sessions.detect import AutoAdapter, by_command\n"
             "for argv in (['waiting-agent', 'serve'], ['codex', 'app-server'], ['sh', '-c', 'true']):\n"
             "    choice = by_command(argv, {})\n"
             "    print(choice.line() if choice else None)\n"
             "print(AutoAdapter.launch_command(['waiting-agent', 'serve']))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "adapter waits: the command is waiting-agent",
        "adapter codex: the command is `codex app-server`, which waits for its client to speak first",
        "None",
        "['waiting-agent', 'serve']"]


def test_a_third_party_adapters_recordings_are_replayed_by_its_own_parser(tmp_path: Path) -> None:
    """A new agent is one module: the format it declares is one `replay --format` takes, read by its parser."""
    (tmp_path / "plugin").mkdir()
    path = _plugin(tmp_path / "plugin", {"says": "lw_plugin:SaysAdapter"})
    recording = tmp_path / "said.txt"
    recording.write_text("hello\n-\nagain\n")
    env = {**os.environ, "PYTHONPATH": str(path), "LOOPWARDEN_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "loopwarden", "replay", "--format", "says-lines", "--summary-json",
                          "--no-spill", str(recording)], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stderr)
    assert (summary["format"], summary["lines"], summary["ignored"]) == ("says-lines", 3, 1)
    assert summary["by_type"] == {"user_message": 2}
    known = registry.adapters()
    assert registry.recordings() == {"native": known["native"],
                                     "claude-code": known["claude-stream"],
                                     "codex": known["codex-exec"],
                                     "codex-app-server": known["codex"], "acp": known["acp"]}


def test_stderr_colours_are_dropped_and_other_controls_kept() -> None:
    """Colour codes (Codex colours its logs into a pipe) are presentation; a title-setting sequence is kept
    so that the one sanitiser shows it escaped."""
    text = registry.adapters()["plain"]().stderr_text(b"\x1b[2m12:00\x1b[0m \x1b[31mERROR\x1b[0m \x1b]0;T\x07 \xff")
    assert text == "12:00 ERROR \x1b]0;T\x07 \ufffd"


def test_the_attached_kinds_names_are_reserved() -> None:
    from loopwarden.runtime.adopted import AdoptedSession
    from loopwarden.sessions.claude_hooks import ClaudeCodeHookAdapter
    from loopwarden.sessions.codex_hooks import CodexHookAdapter

    hooked = registry.found().hooked
    assert hooked == {"claude-code-hook": ClaudeCodeHookAdapter, "codex-hook": CodexHookAdapter}
    assert set(registry.RESERVED) == {AdoptedSession.adapter_name}
    assert set(hooked) | set(registry.RESERVED) == {ClaudeCodeHookAdapter.name, CodexHookAdapter.name,
                                                    AdoptedSession.adapter_name}


def test_hook_commands_skip_the_cli_and_third_party_adapters(tmp_path: Path) -> None:
    """Both hooks run once per tool call: no click, no Textual, no adapter from an entry point is imported."""
    path = _plugin(tmp_path, {"echo-agent": "lw_plugin:EchoAdapter"})
    probe = ("import sys\nsys.argv = ['loopwarden', 'hook', sys.argv[1]]\nfrom loopwarden import entry\n"
             "try:\n    entry.run()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('click', 'textual', 'lw_plugin') if m in sys.modules), file=sys.stderr)")
    for agent in ("claude-code", "codex"):
        env = {**os.environ, "PYTHONPATH": str(path), "LOOPWARDEN_HOME": str(tmp_path / "home")}
        out = subprocess.run([sys.executable, "-c", probe, agent], input="{}", capture_output=True, text=True,
                             env=env, timeout=60)
        assert out.stderr.strip().splitlines()[-1] == "[]", (agent, out.stderr)
        assert out.stdout.strip() in ("", "{}"), out.stdout  # no daemon: the hook allows (fails open)


def test_the_hook_fast_path_serves_exactly_the_built_in_hook_agents() -> None:
    """`loopwarden hook AGENT` skips the command line for the built-in hook adapters (entry.py); another
    package's hook agent is served by the command line, built from the registry."""
    from loopwarden import entry
    from loopwarden.cli.hook import hook

    builtin = {cls.hook_agent for cls in registry.found().hooked.values() if cls.__module__.startswith("loopwarden.")}
    assert set(entry.BUILTIN_HOOK_AGENTS) == builtin == {"claude-code", "codex"}
    assert builtin <= set(hook.commands)  # the command line has them too (with `install`, `uninstall`)


def test_built_ins_are_listed_by_meaning_before_another_packages(tmp_path: Path) -> None:
    """The default first, loopwarden's protocols, the agents' own, the watched-only; a third party's after them."""
    assert registry.names() == ["auto", "native", "plain", "claude-code", "codex", "acp", "claude-stream",
                                "codex-exec"]
    assert list(registry.hook_adapters()) == ["claude-code", "codex"]
    out = _adapters_cli(_plugin(tmp_path, {"echo-agent": "lw_plugin:EchoAdapter"}), "--json")
    listed = [json.loads(line)["name"] for line in out.stdout.splitlines()]
    assert listed == [*registry.names(), "echo-agent", "claude-code-hook", "codex-hook", "adopted"], listed
