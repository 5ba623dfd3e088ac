"""One convention in every dialog: enter (and y where nothing is typed) confirms, escape (and n) cancels, and
each dialog's last line says so; and `x` resets only the counter chosen, on a real daemon."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Select

from loopwarden.sessions.base import AUTO
from loopwarden.supervisor.user_config import ProjectDefaults
from loopwarden.widgets.app import ConsoleApp
from loopwarden.widgets.counters import ChooseCounter
from loopwarden.widgets.dialogs import AskText, Confirm, ConfirmWithReason, Launch, SetLimits
from tests.console.helpers import RecordingConsole, until
from tests.console.test_actions import console_actions, select
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for

pytestmark = pytest.mark.anyio

SIZES = [(160, 48), (80, 24)]
COMMAND = f"{sys.executable} -c pass"


def _typed(widget_id: str, text: str) -> Callable[[ModalScreen[Any]], None]:
    def fill(dialog: ModalScreen[Any]) -> None:
        dialog.query_one(f"#{widget_id}", Input).value = text
    return fill


# each dialog; what is typed before it is confirmed; what confirming returns; whether y and n are its keys too
DIALOGS: dict[str, tuple[Callable[[], ModalScreen[Any]], Callable[[ModalScreen[Any]], None] | None, Any, bool]] = {
    "confirm": (lambda: Confirm("Kill it?"), None, True, True),
    "confirm with reason": (lambda: ConfirmWithReason("Deny it?", "why"), _typed("reason", "no"), "no", False),
    "ask text": (lambda: AskText("Guidance:"), _typed("text", "go on"), "go on", False),
    "launch": (lambda: Launch(lambda spec: {"id": "s9", "argv": spec["command"]}), _typed("command", COMMAND),
               {"id": "s9", "argv": [sys.executable, "-c", "pass"]}, False),
    "limits": (lambda: SetLimits("Limits", "now"), _typed("values", "limits.max_runtime=2h"),
               {"limits.max_runtime": "2h"}, False),
    "reset which counter": (lambda: ChooseCounter("Reset?", [("loop", 2.0, 3.0)]), None, "all", True),
}
CANCELLED = {"confirm": False}  # a yes/no question answers no; the others have no answer


class Host(App[None]):
    """An empty app, styled as the console, holding one dialog and what it answered."""

    CSS_PATH = ConsoleApp.CSS_PATH

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[Any] = []


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("confirm", [True, False], ids=["confirm", "cancel"])
@pytest.mark.parametrize("name", list(DIALOGS))
async def test_every_dialog_confirms_on_enter_and_cancels_on_escape_and_says_so(
        name: str, confirm: bool, size: tuple[int, int]) -> None:
    make, fill, result, letters = DIALOGS[name]
    keys = (["enter", "y"] if confirm else ["escape", "n"]) if letters else ["enter" if confirm else "escape"]
    for key in keys:
        hint, answers = await answer(make, fill, key, size)
        assert hint.startswith(f"enter{' or y' if letters else ''} ")
        assert f"· escape{' or n' if letters else ''} cancels" in hint
        assert answers == [result if confirm else CANCELLED.get(name)], key


async def answer(make: Callable[[], ModalScreen[Any]], fill: Callable[[ModalScreen[Any]], None] | None, key: str,
                 size: tuple[int, int]) -> tuple[str, list[Any]]:
    """The dialog's last line and what it answered when `key` was pressed (after `fill`)."""
    app = Host()
    async with app.run_test(size=size) as pilot:
        dialog = make()
        app.push_screen(dialog, app.answers.append)
        await until(pilot, lambda: app.screen is dialog and dialog.is_mounted, what="the dialog")
        hint = dialog.query_one(".keys", Label)
        box = dialog.query_one(".dialog")
        assert box.region.bottom <= size[1] and box.region.contains_region(hint.region)  # shown, at 80x24 too
        if fill is not None:
            fill(dialog)
        await pilot.press(key)
        await until(pilot, lambda: app.answers, what=f"the dialog to close on {key}")
        return str(hint.render()), app.answers


def scenario_file(tmp_path: Path) -> Path:
    """A native agent with two counters above zero that then waits: same_error 2, monologue 2."""
    error = {"output": "E   ConnectionRefusedError: [Errno 111]", "is_error": True, "exit_code": 1}
    lines = [{"scenario": "two_counters", "description": "two counters up, then waits", "handshake": True,
              "config": []},
             {"call": {"tool": "run_tests", "args": {"target": "a"}}, "result": error},
             {"call": {"tool": "run_tests", "args": {"target": "b"}}, "result": error},
             {"emit": {"type": "assistant_message", "text": "Thinking."}},
             {"emit": {"type": "assistant_message", "text": "Still thinking."}},
             {"sleep": 120}]
    path = tmp_path / "two_counters.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


@pytest.mark.parametrize("size", SIZES)
async def test_x_lists_each_counter_with_its_value_and_resets_only_the_chosen_one(
        lw: Harness, tmp_path: Path, size: tuple[int, int]) -> None:
    sid = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", str(scenario_file(tmp_path)))
    counters = await_counters(lw, sid)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await select(pilot, app, sid)
        await until(pilot, lambda: app.snapshots[sid].get("counters", {}).get("monologue", [0])[0] == 2,
                    what="the counters in the console")
        await pilot.press("x")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ChooseCounter) else None,
                             what="the reset dialog")
        options = dialog.query_one("#counters", OptionList)
        shown = {str(o.id): str(o.prompt) for o in (options.get_option_at_index(i)
                                                    for i in range(options.option_count))}
        assert shown["monologue"].split() == ["monologue", "2", "of", "3"]
        assert shown["same_error"].split() == ["same_error", "2", "of", "3"] and shown["all"].startswith("all")
        names = list(shown)
        await pilot.press(*["down"] * names.index("monologue"), "enter")
        await until(pilot, lambda: lw.status(sid)["counters"]["monologue"][0] == 0, what="monologue reset")
    after = lw.status(sid)["counters"]
    assert after["same_error"] == counters["same_error"] and after["same_error"][0] == 2
    assert [(a["action"], a["target"]) for a in console_actions(lw, sid)] == [("reset", "monologue")]
    lw.request("kill", session=sid)


def await_counters(lw: Harness, sid: str) -> dict[str, Any]:
    return wait_for(lambda: (c := lw.status(sid)["counters"])["monologue"][0] == 2 and c, what="two counters up")


async def test_reset_by_name_from_the_command_line_and_an_unknown_name_is_one_line(lw: Harness,
                                                                                   tmp_path: Path) -> None:
    sid = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", str(scenario_file(tmp_path)))
    await_counters(lw, sid)
    done = lw.cli("reset", sid, "--counter", "same_error")
    assert done.returncode == 0 and done.stdout == f"{sid}: reset same_error\n"
    after = lw.status(sid)["counters"]
    assert after["same_error"][0] == 0 and after["monologue"][0] == 2
    wrong = lw.cli("reset", sid, "--counter", "bogus")
    assert wrong.returncode == 2 and len(wrong.stderr.splitlines()) == 1
    assert "bogus" in wrong.stderr and "monologue" in wrong.stderr and "same_error" in wrong.stderr
    lw.request("kill", session=sid)


TEXT_DIALOGS = {name: (make, fill) for name, (make, fill, _, letters) in DIALOGS.items() if not letters}


@pytest.mark.parametrize("name", list(TEXT_DIALOGS))
async def test_y_and_n_in_a_dialog_with_text_are_typed_not_answers(name: str) -> None:
    make, fill = TEXT_DIALOGS[name]
    app = Host()
    async with app.run_test(size=SIZES[1]) as pilot:
        dialog = make()
        app.push_screen(dialog, app.answers.append)
        await until(pilot, lambda: app.screen is dialog and dialog.is_mounted, what="the dialog")
        assert fill is not None
        fill(dialog)
        field = next(i for i in dialog.query(Input) if i.has_focus)
        field.cursor_position = len(field.value)
        await pilot.press("y", "n", "Y", "N")
        await until(pilot, lambda: field.value.endswith("ynYN"), what="y and n typed")
        assert app.screen is dialog and app.answers == []


async def test_a_projects_adapter_the_dialog_does_not_offer_is_said_not_shown_as_applied(tmp_path: Path) -> None:
    project = ProjectDefaults(str(tmp_path), tmp_path, adapter="nope", limits={"limits.max_runtime": "2h"})
    app = Host()
    async with app.run_test(size=SIZES[1]) as pilot:
        dialog = Launch(lambda spec: spec, project)
        app.push_screen(dialog, app.answers.append)
        await until(pilot, lambda: app.screen is dialog and dialog.is_mounted, what="the dialog")
        assert dialog.query_one("#adapter", Select).value == AUTO
        said = str(dialog.query_one("#project", Label).render())
        assert said == (f"project defaults from {tmp_path}: limits.max_runtime=2h (its adapter 'nope' is not one "
                        "offered: auto)")
