"""Gemini's private layer (`loopwarden.sessions.acp_gemini`) with the real Gemini CLI over ACP, no loopwarden
in between: without it safe commands never ask; with it every call asks, and a rejection reaches the model."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from loopwarden.sessions import acp_gemini
from tests.gemini.acp_client import AcpClient
from tests.gemini.fake_gemini import FakeGemini, call, function_responses, run, say
from tests.gemini.gemini_home import gemini_env

pytestmark = pytest.mark.timeout(90)


def launch(gemini_bin: str, home: Path, fake: FakeGemini, tmp_path: Path, *args: str) -> AcpClient:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = gemini_env(home, fake.url, GEMINI_CLI_NO_RELAUNCH="true")
    return AcpClient([gemini_bin, "--acp", *args], env, work, tmp_path / "gemini.err")


def test_the_policy_file_is_private_and_named_after_its_content(tmp_path: Path) -> None:
    text = acp_gemini.policy_text([])
    path = acp_gemini.write_policy(tmp_path / "data", text)
    assert path.parent == tmp_path / "data" / "gemini" and path.read_text() == text
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = os.stat(path).st_mtime_ns
    assert acp_gemini.write_policy(tmp_path / "data", text) == path and os.stat(path).st_mtime_ns == before
    other = acp_gemini.write_policy(tmp_path / "data", text + "# more\n")
    assert other != path and path.read_text() == text


def test_the_user_and_project_deny_rules_are_copied_above_the_asks(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini" / "policies").mkdir(parents=True)
    (work / ".gemini" / "policies").mkdir(parents=True)
    (home / ".gemini" / "policies" / "mine.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = ["rm", "git push"]\ndecision = "deny"\n'
        'priority = 10\ndenyMessage = "no \\"rm\\" here"\n'
        '[[rule]]\ntoolName = "read_file"\ndecision = "allow"\npriority = 10\n')
    (work / ".gemini" / "policies" / "project.toml").write_text(
        '[[rule]]\ntoolName = "write_file"\nargsPattern = "secret"\ndecision = "deny"\npriority = 5\n'
        'toolAnnotations = { readOnlyHint = false }\n')
    (work / ".gemini" / "policies" / "broken.toml").write_text("[[rule]\n")
    denies = acp_gemini.deny_rules(acp_gemini.policy_dirs({"HOME": str(home)}, str(work)))
    assert [r["toolName"] for r, _ in denies] == ["run_shell_command", "write_file"]
    rules = tomllib.loads(acp_gemini.policy_text(denies))["rule"]
    assert [(r["toolName"], r["decision"], r["priority"]) for r in rules] == [
        ("exit_plan_mode", "deny", 999), ("run_shell_command", "deny", 999), ("write_file", "deny", 999),
        ("run_shell_command", "ask_user", 997), ("*", "ask_user", 996)]
    assert rules[1]["commandPrefix"] == ["rm", "git push"] and rules[1]["denyMessage"] == 'no "rm" here'
    assert rules[2]["toolAnnotations"] == {"readOnlyHint": False}
    assert all(r["modes"] == ["default", "autoEdit", "yolo"] for r in rules[3:]), "plan mode is left to Gemini"


def test_the_options_keep_what_the_user_already_has(tmp_path: Path) -> None:
    policy = Path("/data/gemini/p.toml")
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text('{"adminPolicyPaths": ["/opt/own.toml"]}')
    env = {"HOME": str(home), "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "none.json")}
    assert acp_gemini.gemini_args(policy, env, system_policies=False) == [
        "--admin-policy", "/opt/own.toml", "--admin-policy", str(policy)]
    # system policies make Gemini ignore --admin-policy: the user tier, beside the user's own policies
    assert acp_gemini.gemini_args(policy, env, system_policies=True) == [
        "--policy", str(home / ".gemini" / "policies"), "--policy", str(policy)]
    args = acp_gemini.layer_args({**env, "LOOPWARDEN_HOME": str(tmp_path / "lw")})
    assert args[-2:] == ["--admin-policy", args[-1]] or acp_gemini.system_policies_present()
    policy = Path(args[-1])
    assert policy.parent == tmp_path / "lw" / "data" / "gemini" and policy.read_text() == acp_gemini.policy_text([])


def test_an_unsafe_data_directory_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "lw" / "data").mkdir(parents=True)
    (tmp_path / "lw" / "data" / "gemini").symlink_to(tmp_path)
    with pytest.raises(ValueError, match=r"cannot write Gemini's policy file under .*is not a plain directory"):
        acp_gemini.layer_args({"LOOPWARDEN_HOME": str(tmp_path / "lw"), "HOME": str(tmp_path)})


def test_without_the_layer_safe_commands_never_ask(gemini_bin: str, gemini_home: Path, fake_gemini: FakeGemini,
                                                   tmp_path: Path) -> None:
    fake_gemini.play([run("echo hi"), say("done")])
    client = launch(gemini_bin, gemini_home, fake_gemini, tmp_path)
    try:
        session = client.start_session(tmp_path / "work")
        assert client.prompt(session, "say hi")["stopReason"] == "end_turn"
    finally:
        assert client.close() == 0
    assert client.permissions == []
    [response] = function_responses(fake_gemini.requests()[1])
    assert "Output: hi" in response["response"]["output"]


def test_with_the_layer_every_call_asks_and_a_rejection_reaches_the_model(
        gemini_bin: str, gemini_home: Path, fake_gemini: FakeGemini, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("alpha\n")
    commands = ["echo hi", "ls", "cat notes.txt", "grep alpha notes.txt", "echo a && ls | grep n"]
    fake_gemini.play([*map(run, commands), call("read_file", file_path="notes.txt"),
                      call("list_directory", dir_path="."), say("done")])
    args = acp_gemini.layer_args({"HOME": str(gemini_home), "LOOPWARDEN_HOME": str(tmp_path / "lw")},
                                 str(tmp_path / "work"))
    client = launch(gemini_bin, gemini_home, fake_gemini, tmp_path, *args)
    client.answer_kind = "reject_once"
    try:
        session = client.start_session(tmp_path / "work")
        assert client.prompt(session, "look around")["stopReason"] == "end_turn"
    finally:
        assert client.close() == 0
    asked = [p["toolCall"] for p in client.permissions]
    assert [t["title"] for t in asked[:5]] == commands and len(asked) == 7
    assert {t["kind"] for t in asked[:5]} == {"execute"}
    assert "rawInput" not in asked[0]  # the thin stream: the command is only in the title
    told = [function_responses(body)[-1] for body in fake_gemini.requests()[1:]]
    assert [t["name"] for t in told] == ["run_shell_command"] * 5 + ["read_file", "list_directory"]
    assert told[0]["response"] == {"error": 'Tool "run_shell_command" was canceled by the user.'}
    assert not client.updates("tool_call"), "a rejected call left no tool_call update"


def test_with_the_layer_the_users_own_deny_still_wins(gemini_bin: str, gemini_home: Path, fake_gemini: FakeGemini,
                                                      tmp_path: Path) -> None:
    (gemini_home / ".gemini" / "policies").mkdir()
    (gemini_home / ".gemini" / "policies" / "mine.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "rm"\ndecision = "deny"\npriority = 10\n'
        'denyMessage = "DENIED-BY-USER"\n')
    fake_gemini.play([run("rm -f nothing"), run("echo hi"), say("done")])
    args = acp_gemini.layer_args({"HOME": str(gemini_home), "LOOPWARDEN_HOME": str(tmp_path / "lw")},
                                 str(tmp_path / "work"))
    client = launch(gemini_bin, gemini_home, fake_gemini, tmp_path, *args)
    try:
        session = client.start_session(tmp_path / "work")
        assert client.prompt(session, "clean up")["stopReason"] == "end_turn"
    finally:
        assert client.close() == 0
    assert [p["toolCall"]["title"] for p in client.permissions] == ["echo hi"], "the denied rm was never asked"
    [denied] = function_responses(fake_gemini.requests()[1])
    assert denied["response"] == {"error": 'Tool execution for "Shell" denied by policy.'}
