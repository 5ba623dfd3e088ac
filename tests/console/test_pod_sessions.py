"""A session on a cluster in the console: where it runs (its node and pod) in the table and the detail, its host
lost; and the launch dialog's where and image, sent to the daemon as the run's `on` and `image`.

No cluster here: the shown session's stored row is the one a pod session whose pod was deleted leaves
(tests/support/pod_rows.py), read back by a real daemon; the launch dialog's fields are proved to reach the daemon
by its own refusals of them.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Input, Label

from loopwarden.runtime.ending import pod_words, where_cell
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.dialogs import Launch
from loopwarden.widgets.health import HealthPanel
from tests.console.helpers import RecordingConsole, cell, key_of, until
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.pod_rows import stored_as_lost_pod

pytestmark = pytest.mark.anyio

SIZES = [(160, 48), (80, 24)]


def test_where_a_pod_session_runs_in_words_from_creation_to_its_node() -> None:
    pod = {"on": "kubernetes", "context": None, "namespace": None, "pod": None, "node": None, "image": "py:1"}
    assert (pod_words({"pod": pod}), where_cell({"pod": pod})) == ("being created (kubernetes), image py:1",
                                                                   "kubernetes")
    pod.update(context="prod", namespace="agents", pod="lw-s3-ab12cd")
    assert pod_words({"pod": pod}) == "lw-s3-ab12cd in agents, not on a node yet (kubernetes:prod/agents), image py:1"
    assert where_cell({"pod": pod}) == "?/lw-s3-ab12cd"
    pod["node"] = "node1"
    assert pod_words({"pod": pod}) == "lw-s3-ab12cd in agents on node node1 (kubernetes:prod/agents), image py:1"
    assert where_cell({"pod": pod}) == "node1/lw-s3-ab12cd"
    assert pod_words({}) == where_cell({}) == ""  # a session here


def _ended(lw: Harness, name: str) -> str:
    sid = lw.launch(PY, "-c", "pass", adapter="plain", name=name)
    lw.wait_state(sid, "exited")
    return sid


def _panel_text(detail: SessionDetail) -> str:
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(detail.query_one(HealthPanel).content)
    return out.getvalue()


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
async def test_a_pod_sessions_node_and_pod_are_shown_in_the_table_and_its_detail(lw: Harness,
                                                                                 size: tuple[int, int]) -> None:
    on_pod, here = _ended(lw, "on-pod"), _ended(lw, "here")
    stored_as_lost_pod(lw, on_pod)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: cell(app, on_pod, "where") == "node1/lw-s1-ab12cd", what="its WHERE cell")
        await until(pilot, lambda: cell(app, here, "where") == "-", what="the local session's")
        assert "WHERE" in app.table.render_line(0).text or size[0] < 160  # on screen at 160 columns
        assert cell(app, on_pod, "state") == "lost" and cell(app, on_pod, "reason") == "host lost"
        app.table.filter_text = "node1"  # its node is among what the filter reads
        app.table.rebuild(app.snapshots)
        assert set(app.table.rows) == {on_pod}
        app.table.filter_text = ""
        app.table.rebuild(app.snapshots)
        app.table.move_cursor(row=app.table.get_row_index(on_pod))
        await pilot.press("enter")
        detail = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                             what="its detail")
        await until(pilot, lambda: "lw-s1-ab12cd" in _panel_text(detail), what="its pod in the detail")
        rows = [line.split(None, 1) for line in _panel_text(detail).splitlines() if line.strip()]
        assert ["pod", "lw-s1-ab12cd in agents on node node1 (kubernetes:prod/agents), image local/py3:1"] in \
            [[label, rest.strip()] for label, rest in (r for r in rows if len(r) == 2)]
        assert ["state", "lost (host lost)"] in [[r[0], r[1].strip()] for r in rows if len(r) == 2]


async def test_a_table_without_pod_sessions_has_no_where_column(lw: Harness) -> None:
    here = _ended(lw, "here")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(200, 24)) as pilot:
        await until(pilot, lambda: cell(app, here, "state") == "exited", what="the row")
        await pilot.pause()
        assert "WHERE" not in app.table.render_line(0).text and "TAGS" in app.table.render_line(0).text


async def test_names_from_the_cluster_are_shown_escaped_in_the_console(lw: Harness) -> None:
    sid = _ended(lw, "hostile")
    stored_as_lost_pod(lw, sid, node="node\x1b]0;owned\x07", pod="lw-s1-\u202eab")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: cell(app, sid, "where") != "", what="its WHERE cell")
        assert cell(app, sid, "where") == r"node\x1b]0;owned\x07/lw-s1-\u202eab"


async def test_a_long_node_name_is_cut_and_the_pods_name_kept(lw: Harness) -> None:
    sid = _ended(lw, "cloud")
    stored_as_lost_pod(lw, sid, node="gke-agents-default-pool-1a2b3c4d-xyz1")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: cell(app, sid, "where") != "", what="its WHERE cell")
        assert cell(app, sid, "where") == "gke-agents-default-pool…/lw-s1-ab12cd"


async def _launch_dialog(pilot: Any, app: RecordingConsole) -> Launch:
    await until(pilot, lambda: app.feed.connected, what="the feed")
    await pilot.press(key_of(app, "launch"))
    return await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")


async def _refusal(pilot: Any, dialog: Launch) -> str:
    error = dialog.query_one("#error", Label)
    await until(pilot, lambda: "launch failed" in str(error.render()), what="the daemon's refusal")
    return str(error.render())


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
async def test_the_launch_dialogs_where_and_image_reach_the_daemon(lw: Harness, monkeypatch: pytest.MonkeyPatch,
                                                                   size: tuple[int, int]) -> None:
    monkeypatch.setenv("LOOPWARDEN_KUBERNETES_PLACE", "kubernetes:prod/agents")  # the settings prefill the fields
    monkeypatch.setenv("LOOPWARDEN_KUBERNETES_IMAGE", "local/py3:1")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        dialog = await _launch_dialog(pilot, app)
        where, image = dialog.query_one("#where", Input), dialog.query_one("#image", Input)
        assert (where.value, image.value) == ("kubernetes:prod/agents", "local/py3:1")
        box = dialog.query_one(".dialog")
        assert box.region.contains_region(dialog.query_one(".keys").region)  # all of it on screen, at 80x24 too
        dialog.query_one("#command", Input).value = f"{sys.executable} -c 'import time; time.sleep(60)'"
        where.value = "mars"
        await pilot.press("enter")
        said = await _refusal(pilot, dialog)
        assert "--on 'mars': not a place; it accepts local or kubernetes[:CONTEXT[/NAMESPACE]]" in said
        assert "\n" not in said and app.screen is dialog and where.value == "mars"  # kept, to be fixed
        where.value = "local"
        await pilot.press("enter")  # an image with no cluster: refused by the daemon, in its words
        said = await _refusal(pilot, dialog)
        assert "--image places a session's pod: give --on kubernetes too (or set kubernetes.place)" in said
        image.value = ""
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, Launch), what="the dialog to close")
        snap = await until(pilot, lambda: next(iter(app.snapshots.values()), None), what="the session")
    started = lw.status(snap["id"])
    assert "pod" not in started and started["command"][0] == sys.executable  # here, as asked
    lw.request("kill", session=snap["id"])


async def test_the_launch_dialog_is_empty_where_the_settings_say_local(lw: Harness,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOPWARDEN_KUBERNETES_PLACE", raising=False)
    monkeypatch.delenv("LOOPWARDEN_KUBERNETES_IMAGE", raising=False)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        dialog = await _launch_dialog(pilot, app)
        where = dialog.query_one("#where", Input)
        assert where.value == "" and "local or kubernetes" in str(where.placeholder)
        assert dialog.query_one("#image", Input).value == ""
