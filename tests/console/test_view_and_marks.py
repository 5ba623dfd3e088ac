"""The pure parts of marking, bulk plans, grouping and the saved view file, without an app."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopwarden.widgets.bulk import plan_sessions, report
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
