"""What `status` and `ls` say of a session on a cluster: its pod, node, namespace and image, and its host lost.

No cluster here: the session's stored row is the one a pod session whose pod was deleted leaves
(tests/support/pod_rows.py), read back by a real daemon and shown by the real CLI.
"""

from __future__ import annotations

import json

from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.pod_rows import stored_as_lost_pod


def _ended(lw: Harness, name: str) -> str:
    sid = lw.launch(PY, "-c", "pass", adapter="plain", name=name)
    lw.wait_state(sid, "exited")
    return sid


def _rows(lw: Harness) -> tuple[str, dict[str, str]]:
    header, *lines = lw.cli("ls").stdout.splitlines()
    return header, {line.split()[0]: line for line in lines if line[:1] == "s"}


def test_status_and_ls_say_where_a_pod_session_ran_and_that_its_host_was_lost(lw: Harness) -> None:
    on_pod, here = _ended(lw, "on-pod"), _ended(lw, "here")
    header, _ = _rows(lw)
    assert "WHERE" not in header  # no session on a cluster: no column for it
    pod = stored_as_lost_pod(lw, on_pod)
    status = lw.cli("status", on_pod).stdout.splitlines()
    assert "pod: lw-s1-ab12cd in agents on node node1 (kubernetes:prod/agents), image local/py3:1" in status
    assert "ended: host lost: pod lw-s1-ab12cd on node node1 was deleted" in status
    assert not any(line.startswith("pod:") for line in lw.cli("status", here).stdout.splitlines())
    header, rows = _rows(lw)
    column = header.index("WHERE")
    assert rows[on_pod][column:].startswith("pod node1 ")
    assert rows[here][column:].startswith("- ")
    assert "lost: host lost" in rows[on_pod]
    listed = {s["id"]: s for s in json.loads(lw.cli("ls", "--json").stdout)}
    assert listed[on_pod]["pod"] == pod and listed[on_pod]["lost"]["how"] == "host"  # the snapshot, whole
    assert "pod" not in listed[here]


def test_a_pods_names_from_the_cluster_are_shown_escaped(lw: Harness) -> None:
    sid = _ended(lw, "hostile")
    stored_as_lost_pod(lw, sid, node="node\x1b]0;owned\x07", image="img\x9b2J", pod="lw-s1-\u202eab")
    status = lw.cli("status", sid).stdout
    assert "\x1b" not in status and "\x07" not in status and "\x9b" not in status and "\u202e" not in status
    assert r"pod: lw-s1-\u202eab in agents on node node\x1b]0;owned\x07 (kubernetes:prod/agents), image img\x9b2J" \
        in status.splitlines()
    header, rows = _rows(lw)
    assert "\x1b" not in rows[sid] and rows[sid][header.index("WHERE"):].startswith(r"pod node\x1b]0;owned\x07")
