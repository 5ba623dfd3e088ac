"""Spill files are bounded per session and in total (issue 29, item 6): an agent that spills far past its
bound leaves the bound plus a marker on disk, every byte it was refused is counted, and each of its calls
still gets its answer with a path and a preview. Sessions share the total with the files earlier sessions
left, measured when the daemon starts and kept as files are written and removed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

FLOOD = str(AGENTS / "spill_flood.py")
MIB = 1 << 20
MARKER_AT_MOST = 512  # bytes a cut output's marker line, or a session's notice, adds past the bound
SIZES = "600000,1500000"  # whole lines (spilled at once), lines past 1 MiB (streamed to their file as they come)


def flood(lw: Harness, count: int, record: Path, *sets: str, name: str) -> str:
    sets = ("spill.threshold_chars=100000", "limits.max_line_bytes=4MiB", *sets)
    return lw.launch(PY, FLOOD, str(count), SIZES, str(record), sets=sets, name=name)


def files_of(lw: Harness, sid: str) -> list[Path]:
    return sorted(lw.paths.spill.glob(f"{sid}-*.txt"))


def content(path: Path) -> int:
    """The bytes of the output a spill file holds (its marker line or notice not counted)."""
    data = path.read_bytes()
    if data.startswith(b"[loopwarden writes no more"):
        return 0
    cut = data.rfind(b"\n[... loopwarden cut this output here: ")
    return cut if cut >= 0 else len(data)


def answers(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def outputs(count: int) -> int:
    sizes = [int(s) for s in SIZES.split(",")]
    return sum(sizes[i % len(sizes)] for i in range(count))


def test_a_session_spilling_far_past_its_bound_leaves_the_bound_plus_a_marker_and_counts_the_cut(
        lw: Harness, tmp_path: Path) -> None:
    record = tmp_path / "answers.jsonl"
    count = 40  # 42 MB of outputs against 8 MiB
    sid = flood(lw, count, record, "spill.max_session_bytes=8MiB", name="flood")
    snap = lw.wait_state(sid, "exited", timeout=60)
    assert snap["exit_code"] == 0, "a call was left unanswered"  # exit 3: stdin closed before an answer
    got = answers(record)
    assert len(got) == count and all(a["path"] and "Preview (first " in a["message"] for a in got)
    files = files_of(lw, sid)
    on_disk = sum(p.stat().st_size for p in files)
    assert 8 * MIB - 4096 <= on_disk <= 8 * MIB + MARKER_AT_MOST, on_disk
    cut_files = [p for p in files if p.read_bytes().endswith(b" (8 MiB)]\n")]
    assert len(cut_files) == 1  # the output that met the bound: cut there, with the marker line
    [notice] = [p for p in files if content(p) == 0]
    assert "spill.max_session_bytes (8 MiB)" in notice.read_text()
    spill = snap["spill"]
    kept = sum(content(p) for p in files)
    assert kept + spill["cut_bytes"] == outputs(count)  # every byte of every output: on disk or counted as cut
    assert spill["bytes"] == on_disk and spill["cut_outputs"] == count - (len(files) - 2)
    cut_whole = [a for a in got if a["path"] == str(notice)]
    assert cut_whole and all("none of it was saved" in a["message"] for a in cut_whole)
    [cut_part] = [a for a in got if a["path"] == str(cut_files[0])]
    assert "bytes were cut: this session's spill files reached spill.max_session_bytes" in cut_part["message"]
    text = lw.cli("status", sid).stdout
    assert f"cut from {spill['cut_outputs']} outputs" in text and "spill.max_session_bytes 8 MiB" in text
    health = lw.request("ping")["spill"]
    assert health["cut_bytes"] == spill["cut_bytes"] and health["bytes"] == on_disk
    assert "cut since the daemon started" in lw.cli("status").stdout


def test_two_sessions_and_the_files_of_earlier_ones_share_the_total_bound(lw: Harness, tmp_path: Path) -> None:
    spill_dir = lw.paths.spill
    spill_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    kept = spill_dir / "s90-0000001-cat.txt"  # an earlier session's file, within its retention: it counts
    kept.write_bytes(b"k" * (2 * MIB))
    expired = spill_dir / "s91-0000001-cat.txt"  # one past it: the cleaner removes it, and it stops counting
    expired.write_bytes(b"e" * (3 * MIB))
    os.utime(expired, (time.time() - 3 * 86400, time.time() - 3 * 86400))
    lw.stop()
    lw.start()  # measures what is on disk at its start
    wait_for(lambda: not expired.exists(), timeout=10, what="the cleaner to remove the expired file")
    wait_for(lambda: lw.request("ping")["spill"]["bytes"] == 2 * MIB, timeout=10, what="the count to drop it")
    count = 20  # 21 MB each, against 8 MiB in all
    sets = ("spill.max_total_bytes=8MiB", "spill.max_session_bytes=0")
    sids = [flood(lw, count, tmp_path / f"{n}.jsonl", *sets, name=n) for n in ("one", "two")]
    snaps = [lw.wait_state(sid, "exited", timeout=90) for sid in sids]
    assert [s["exit_code"] for s in snaps] == [0, 0]
    assert all(len(answers(tmp_path / f"{n}.jsonl")) == count for n in ("one", "two"))
    on_disk = sum(p.stat().st_size for p in spill_dir.iterdir())
    assert 8 * MIB - 4096 <= on_disk <= 8 * MIB + 2 * MARKER_AT_MOST, on_disk
    assert kept.exists() and sum(content(p) for sid in sids for p in files_of(lw, sid)) <= 6 * MIB
    written = sum(s["spill"]["bytes"] for s in snaps)
    assert written == on_disk - 2 * MIB and all(s["spill"]["cut_bytes"] for s in snaps)
    health = lw.request("ping")["spill"]
    assert health["bytes"] == on_disk and health["cut_bytes"] == sum(s["spill"]["cut_bytes"] for s in snaps)
    reason = "the spill files of all sessions reached spill.max_total_bytes (8 MiB)"
    assert any(reason in p.read_text(errors="replace")[-300:] for sid in sids for p in files_of(lw, sid))

