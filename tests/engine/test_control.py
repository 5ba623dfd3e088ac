"""Control: a rule switched off (`rules.disabled`), tools exempt (`tools.exempt`), waiting commands
(`tools.waiting`: `sleep 60`, `gh run watch`) exempt by default from the repetition rules and the stall.

Spec: issue 14 item 4; OpenHands, Gemini CLI and opencode reports of agents killed while sleep-waiting.
"""

from __future__ import annotations

import pytest

from loopwarden.supervisor.config import RULES, ConfigError, change
from loopwarden.supervisor.control import REPEAT_RULES, ToolControl, command_words
from loopwarden.supervisor.health import SessionHealth
from tests.engine.helpers import Session, call, config, msg, ok, run, summary


def repeats(n, tool="Bash", args=None, output="same"):
    args = {"command": "ls -la"} if args is None else args
    out = []
    for _ in range(n):
        out += [call(tool, dict(args)), ok(tool, output)]
    return out


# ---- rules.disabled ----------------------------------------------------------
def test_a_disabled_rule_gives_no_verdict_and_the_others_still_do():
    events = repeats(8) + [msg("a"), msg("b"), msg("c")]
    on = summary(run(events))
    assert ("nudge", "repetition", 4) in on and ("nudge", "monologue", 19) in on
    off = summary(run(events, config("rules.disabled=repetition")))
    assert [v for v in off if v[1] == "repetition"] == []
    assert ("nudge", "monologue", 19) in off  # near miss: the rule left on still fires


@pytest.mark.parametrize("rule", sorted(set(RULES) - {"runtime", "stall", "validation"}))
def test_every_guard_is_taken_out_of_the_dispatch_when_its_rule_is_off(rule):
    health = SessionHealth(config(f"rules.disabled={rule}"))
    seen = {g.name for guards in health.roster.dispatch.values() for g in guards}
    assert rule not in seen
    assert {g.name for g in health.guards} - {rule} <= seen | {"runtime", "validation"}


def test_stall_and_runtime_off_drop_their_verdicts_but_activity_is_still_tracked():
    s = Session(config("rules.disabled=stall,max_runtime", "limits.max_runtime=10s"), start=0.0)
    s.feed(call("Read", {"path": "a"}))
    assert s.tick(100.0) == []
    assert s.health.state == "running"
    on = Session(config("limits.max_runtime=10s"), start=0.0)
    on.feed(call("Read", {"path": "a"}))
    assert [v.rule for v in on.tick(100.0)] == ["runtime"]  # near miss: with the rules on, it ends


def test_a_rule_switched_off_on_a_running_session_stops_at_once_and_on_again_resumes():
    s = Session()
    s.feed(*repeats(2))
    assert [v.rule for v in s.verdicts] == ["repetition"]  # the nudge at 2
    s.health.reconfigure(change(s.health.config, {"rules.disabled": "repetition"}))
    assert s.feed(*repeats(6)) == []
    s.health.reconfigure(change(s.health.config, {"rules.disabled": ""}))
    assert any(v.action == "block" for v in s.feed(*repeats(6)))


def test_unknown_rule_names_are_one_line_errors_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"rules.disabled: unknown rule 'alterantion' \(did you mean alternation\?\)"):
        config("rules.disabled=alterantion")
    assert config("rules.disabled=max_runtime").rules.disabled == ["runtime"]  # the rule table names it so
    assert config("rules.disabled=").rules.disabled == []


# ---- tools.exempt ------------------------------------------------------------
def test_an_exempt_tool_is_never_nudged_or_blocked_for_repeats_and_other_tools_still_are():
    cfg = config("tools.exempt=TodoWrite")
    assert run(repeats(9, "TodoWrite", {"todos": [1]}), cfg) == []
    assert any(v.action == "block" for v in run(repeats(9, "Read", {"path": "x"}), cfg))  # near miss


def test_tool_colon_rule_exempts_only_that_rule():
    cfg = config("tools.exempt=Read:repetition")
    assert run(repeats(9, "Read", {"path": "x"}), cfg) == []
    failing = []
    for n in range(4):
        failing += [call("Read", {"path": f"f{n}"}), ok("Read", "x")]
        failing[-1].is_error, failing[-1].output = True, "error: no such file"
    # same_error still judges Read (its 4th call); reads of four different files are no loop of the loop counter's
    assert [v.rule for v in run(failing, cfg)] == ["same_error"]


def test_an_mcp_tool_name_with_colons_is_a_tool_name():
    control = ToolControl(config("tools.exempt=srv:tool,srv:tool2:repetition"))
    assert control.by_tool == {"srv:tool": REPEAT_RULES, "srv:tool2": frozenset({"repetition"})}


# ---- waiting commands ----------------------------------------------------------
@pytest.mark.parametrize("command", ["sleep 60", "  sleep 5m ", "wait", "tail -f build.log", "gh run watch 123",
                                     "kubectl rollout status deploy/web", "watch -n 5 kubectl get pods",
                                     "bash -lc 'sleep 30'"])
def test_waiting_commands_repeated_are_never_a_loop(command):
    assert run(repeats(12, "Bash", {"command": command}, output="")) == []


@pytest.mark.parametrize("command", ["sleep 60; rm -rf build", "sleep 1 && make deploy", "sleep $(cat n)",
                                     "sleep 1 | tee x", "sleepy 3", "tail build.log", "gh run view 123",
                                     "sleep 'a;b'", "sleep 1\nmake", "echo sleep 60"])
def test_anything_more_than_waiting_is_judged_as_usual(command):
    verdicts = run(repeats(12, "Bash", {"command": command}, output=""))
    assert any(v.action == "block" for v in verdicts), command


def test_a_codex_command_list_and_a_tool_named_wait_count_as_waiting():
    assert command_words({"command": ["bash", "-lc", "sleep 30"]}) == ["sleep", "30"]
    assert run(repeats(12, "shell", {"command": ["bash", "-lc", "sleep 30"]}, output="")) == []
    assert run(repeats(12, "wait", {"seconds": 30}, output="")) == []
    assert run(repeats(12, "BashOutput", {"bash_id": "bash_1"}, output="")) == []  # polling a background shell


def test_a_poll_between_sleeps_is_judged_as_if_the_sleeps_were_not_there():
    events = []
    for _ in range(7):
        events += [call("Bash", {"command": "gh run view 42"}), ok("Bash", "in_progress"),
                   call("Bash", {"command": "sleep 30"}), ok("Bash", "")]
    assert any(v.action == "block" and v.rule == "repetition" for v in run(events))
    changing = []
    for n in range(7):
        changing += [call("Bash", {"command": "gh run view 42"}), ok("Bash", f"step {n} of 9"),
                     call("Bash", {"command": "sleep 30"}), ok("Bash", "")]
    assert not any(v.action == "block" for v in run(changing))  # a changing status is progress


def test_silence_while_a_waiting_command_runs_is_not_a_stall_and_after_it_is():
    s = Session(config("limits.stall_timeout=30s"))
    s.at(0.0, call("Bash", {"command": "sleep 300"}))
    assert s.tick(299.0) == []
    s.at(300.0, ok("Bash", ""))
    assert [v.rule for v in s.tick(331.0)] == ["stall"]  # after the sleep, silence is silence again
    busy = Session(config("limits.stall_timeout=30s"))
    busy.at(0.0, call("Bash", {"command": "make"}))
    assert [v.rule for v in busy.tick(31.0)] == ["stall"]  # near miss: any other command stalls


def test_waiting_can_be_emptied_so_sleep_is_judged_like_any_call():
    assert any(v.action == "block" for v in run(repeats(12, "Bash", {"command": "sleep 60"}, output=""),
                                                config("tools.waiting=")))


def test_every_guard_and_every_rule_it_names_can_be_switched_off():
    health = SessionHealth(config())
    assert {g.name for g in health.guards} <= set(RULES)  # a new guard adds its name to config.RULES


def test_rules_and_tools_come_from_a_toml_file_the_environment_and_set(tmp_path):
    from loopwarden.supervisor.config import load_config

    path = tmp_path / "lw.toml"
    path.write_text('[rules]\ndisabled = ["monologue"]\n[tools]\nexempt = ["Read:repetition"]\nwaiting = []\n')
    cfg = load_config(file=path, env={"LOOPWARDEN_RULES_DISABLED": "alternation,monologue"})
    assert cfg.rules.disabled == ["alternation", "monologue"]  # the environment over the file
    assert cfg.tools.exempt == ["Read:repetition"] and cfg.tools.waiting == []
    assert load_config(file=path, env={}).rules.disabled == ["monologue"]
    live = change(cfg, {"tools.waiting": "sleep,gh run watch", "rules.disabled": ""})  # a running session takes them
    assert live.tools.waiting == ["sleep", "gh run watch"] and live.rules.disabled == []
    with pytest.raises(ConfigError, match=r"rules\.disabled: 7 is not valid"):
        change(cfg, {"rules.disabled": 7})


# ---- tools.limits --------------------------------------------------------------
def test_a_tool_with_its_own_threshold_is_judged_by_it_and_other_tools_by_the_sessions():
    cfg = config("tools.limits=WebFetch:repetition.max_identical_calls=10,WebFetch:repetition.nudge_after=4")
    web = summary(run(repeats(11, "WebFetch", {"url": "https://x"}), cfg))
    assert web == [("nudge", "repetition", 8), ("block", "repetition", 21)]  # nudge at 4, the 11th blocked
    read = summary(run(repeats(6, "Read", {"path": "x"}), cfg))
    assert read == [("nudge", "repetition", 4), ("block", "repetition", 11)]  # near miss: the defaults, 2 and 6th


def test_a_tools_own_same_error_threshold_is_read_when_its_result_comes():
    cfg = config("tools.limits=Bash:repetition.max_same_error=5", "loop.gate_after=0")  # the loop counter aside
    events = []
    for n in range(5):  # a Read between keeps consecutive_failures out of it
        events += [call("Bash", {"command": f"make t{n}"}), ok("Bash", "x"), call("Read", {"p": n}), ok("Read")]
        events[-3].is_error, events[-3].output = True, "error: no rule to make target"
    assert run([*events[:12], call("Bash", {"command": "make z"})], cfg) == []  # 3 the same: under its 5
    assert [v.rule for v in run([*events[:12], call("Bash", {"command": "make z"})])] == ["same_error"]  # default 3
    assert [v.rule for v in run([*events, call("Bash", {"command": "make z"})], cfg)] == ["same_error"]


def test_a_tool_may_poll_longer_before_the_polling_ceiling_while_others_keep_the_sessions():
    cfg = config("tools.limits=gh_run_view:repetition.progress_nudge_after=40")

    def polls(tool: str, n: int) -> list:
        return [e for i in range(n) for e in (call(tool, {"run": 7}), ok(tool, f"in progress, {i} jobs left"))]

    assert [v.rule for v in run(polls("gh_run_view", 30), cfg)] == []  # its own ceiling: 40
    assert [v.rule for v in run(polls("Bash", 10), cfg)] == ["polling"]  # near miss: the session's 10


def test_bad_per_tool_limits_are_one_line_errors():
    with pytest.raises(ConfigError, match=r"cannot be set per tool; it accepts repetition\.nudge_after"):
        config("tools.limits=Bash:limits.max_runtime=1h")
    with pytest.raises(ConfigError, match="is not TOOL:KEY=VALUE"):
        config("tools.limits=Bash=3")
    with pytest.raises(ConfigError, match="a whole number"):
        config("tools.limits=Bash:repetition.nudge_after=-1")


def test_a_result_without_an_id_answers_the_latest_call_of_its_tool_not_an_older_waiting_one():
    s = Session()
    s.feed(call("Bash", {"command": "sleep 60"}))  # its result never comes
    for n in range(3):  # three failures of make: every one counts, the first too
        s.feed(call("Bash", {"command": f"make t{n}"}), ok("Bash", "x", is_error=True))
    assert [v.rule for v in s.feed(call("Bash", {"command": "make t4"}))] == ["same_error"]
