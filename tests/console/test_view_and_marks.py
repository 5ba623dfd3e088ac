"""The pure parts of marking, bulk plans, grouping and the saved view file, without an app."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from loopwarden.widgets.bulk import SHOWN, BulkActions, plan_sessions, report
from loopwarden.widgets.grouping import GROUPS, group_of, next_group, project_of
from loopwarden.widgets.saved_view import View, load, save
from loopwarden.widgets.selection import Selection


def test_a_range_runs_from_the_last_toggled_row_to_the_cursor_either_way() -> None:
    marks = Selection()
    order = ["s1", "s2", "s3", "s4", "s5"]
    marks.toggle("s4")
    assert marks.extend(order, "s2") == ["s2", "s3", "s4"]
    assert marks.ordered(order) == ["s2", "s3", "s4"]
    assert marks.toggle("s3") is False and marks.ordered(order) == ["s2", "s4"]
    assert marks.keep_only(["s4", "s5"]) == {"s2"} and marks.clear() == {"s4"} and not marks


def test_a_plan_skips_what_cannot_apply_and_the_report_names_each() -> None:
    snaps = [{"id": "s1", "state": "gated", "pending_gates": ["g1", "g2"]},
             {"id": "s2", "state": "running", "pending_gates": []},
             {"id": "s3", "state": "exited", "pending_gates": ["g1"]}]
    plan = plan_sessions("approve", snaps, lambda snap, action: None)
    assert [s.target for s in plan.steps] == ["s1:g1", "s1:g2"]
    assert plan.skipped == [("s2", "no gate to approve"), ("s3", "it has ended")]
    said = report(plan, ["s1:g1"], [("s1:g2", "gate s1:g2 was already approved by bob")])
    assert said == ("approve on 1 of 4 · done: s1:g1 · refused s1:g2: gate s1:g2 was already approved by bob · "
                    "skipped s2: no gate to approve · skipped s3: it has ended")
    assert [s.target for s in plan_sessions("resume", snaps[:2], lambda snap, action: None).steps] == []


def test_groups_cycle_and_name_what_a_person_reads() -> None:
    seen = [next_group(None)]
    while seen[-1] is not None:
        seen.append(next_group(seen[-1]))
    assert seen == [*GROUPS, None]
    assert project_of(os.path.expanduser("~/work/api")) == "~/work/api"
    assert group_of({"tags": ["b", "a"]}, "tag") == "a,b" and group_of({}, "tag") == "(untagged)"
    assert group_of({"cwd": "/srv/\x1b[31mx"}, "project") == "/srv/\\x1b[31mx"  # sanitised, never an escape


@pytest.mark.parametrize("text", ['[1, 2]', '{"sort_by": "planet"}', '{"hide_ended": "yes"}',
                                  '{"group_by": "moon"}', '{"filter_text": "a\\u001b[2J"}', "not json"])
def test_a_view_file_that_makes_no_sense_gives_the_defaults_and_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "console-view.json"
    path.write_text(text)
    view, problem = load(path)
    assert view == View() and problem is not None and "\n" not in problem and "using the defaults" in problem


def test_a_view_is_saved_owner_only_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "state" / "console-view.json"
    view = View("tag", "runtime", True, "api !", True)
    assert save(path, view) is None
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert load(path) == (view, None)
    path.write_bytes(b"\xff\xfe")
    assert load(path)[0] == View()


def test_a_hostile_view_file_gives_the_defaults_promptly(tmp_path: Path) -> None:
    """Nested a million deep, larger than any view, or not a regular file: never a crash or a hang."""
    path = tmp_path / "console-view.json"
    path.write_text("[" * 1_000_000 + "]" * 1_000_000)
    assert load(path)[0] == View() and "using the defaults" in str(load(path)[1])
    path.write_text(" " * 2_000_000 + '{"sort_by": "runtime"}')
    assert load(path)[0] == View()
    path.unlink()
    os.mkfifo(path)  # a read would wait for a writer forever
    outcome: list[tuple[View, str | None]] = []
    reader = threading.Thread(target=lambda: outcome.append(load(path)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # let it go before failing
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome and outcome[0][0] == View() and "not a regular file" in str(outcome[0][1])


def test_a_view_file_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"sort_by": "runtime"}')
    path = tmp_path / "console-view.json"
    path.symlink_to(elsewhere)
    view, problem = load(path)
    assert view == View() and problem is not None and "using the defaults" in problem
    assert save(path, View("tag")) is None and not path.is_symlink()  # replaced, the target untouched
    assert elsewhere.read_text() == '{"sort_by": "runtime"}'


def test_a_stale_row_of_a_lost_host_is_skipped_not_planned() -> None:
    snaps = [{"id": "far/s1", "state": "running", "host_gone": 1.0}, {"id": "s2", "state": "running"}]
    plan = plan_sessions("kill", snaps, lambda snap, action: None)
    assert [s.target for s in plan.steps] == ["s2"]
    assert plan.skipped == [("far/s1", "its host is not connected: its state is stale")]


class _Feed:
    def __init__(self) -> None:
        self.connected = False
        self.sent: list[tuple[str, dict[str, object]]] = []

    def request(self, op: str, **fields: object) -> None:
        self.sent.append((op, fields))


class _App:
    """What BulkActions sends through: a feed, notifications, the marks it clears afterwards."""

    def __init__(self) -> None:
        self.feed = _Feed()
        self.notices: list[str] = []
        self.screen = None
        self.screen_stack: list[object] = []
        self.table = self

    def call_from_thread(self, call: Callable[..., object], *args: object, **kwargs: object) -> None:
        call(*args, **kwargs)

    def notify(self, text: str, **_: object) -> None:
        self.notices.append(text)

    def clear_marks(self) -> bool:
        return True


def test_a_confirmed_bulk_action_is_not_sent_once_the_link_is_lost() -> None:
    """As for one session: a daemon reached after the link was lost may not be the one the rows came from."""
    app = _App()
    plan = plan_sessions("kill", [{"id": "s1", "state": "running"}, {"id": "s2", "state": "running"}],
                         lambda snap, action: None)
    BulkActions(app)._send(plan, {"note": "x"})  # type: ignore[arg-type]
    assert app.feed.sent == []
    [said] = app.notices
    assert said.startswith("kill on 0 of 2") and "refused s1: not sent, the console is not connected" in said


def test_a_view_is_saved_through_a_temporary_file_of_its_own(tmp_path: Path) -> None:
    """Two consoles saving at once each write their own temporary file; one left in the way stops neither."""
    path = tmp_path / "state" / "console-view.json"
    (tmp_path / "state").mkdir(mode=0o700)
    path.with_suffix(".tmp").mkdir()  # what a fixed temporary name would trip on
    assert save(path, View("host")) is None
    assert load(path) == (View("host"), None)
    assert sorted(p.name for p in path.parent.iterdir()) == ["console-view.json", "console-view.tmp"]


def test_the_confirmation_and_the_report_stay_short_for_hundreds_of_rows() -> None:
    """Five hundred marked sessions that ended: a dozen named in the dialog and in the one-line report."""
    snaps = [{"id": f"s{n}", "state": "exited"} for n in range(500)]
    plan = plan_sessions("kill", snaps, lambda snap, action: None)
    assert len(plan.skipped) == 500
    detail = plan.detail().plain
    assert len(detail.splitlines()) <= SHOWN + 1 and "and 488 more skipped" in detail
    said = report(plan, [], [(f"s{n}", "x" * 5000) for n in range(500)])
    assert said.count(" · refused ") == SHOWN and said.count(" · skipped ") == SHOWN
    assert said.endswith(" · and 488 more refused · " + " · ".join(f"skipped s{n}: it has ended" for n in range(12))
                         + " · and 488 more skipped")
    assert len(said) < 2500


def test_the_help_says_what_the_filter_matches_and_the_keys_for_many() -> None:
    from loopwarden.widgets.help import FILTER_HELP

    assert all(word in FILTER_HELP for word in ("tags", "working directory", "G groups", "space marks"))
