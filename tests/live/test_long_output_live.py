"""A very long accepted tool output, live: decoded and spilled as it arrives, the daemon's memory bounded (issue 16)."""

from __future__ import annotations

import hashlib
import io
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from loopwarden.replay import Replayer
from loopwarden.runtime.spill import Spiller, slug
from loopwarden.supervisor import protocol
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.events import Event
from loopwarden.supervisor.lines import LineSplitter, LongLine, Oversized, oversized_line, read_lines
from loopwarden.supervisor.longline import line_event, streamed_event
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY, ROOT
from tests.support.waiting import wait_for

BENCH = ROOT / "bench" / "big_output_live.py"
RAISED = ("limits.max_line_bytes=1GiB",)


# ---- the splitter streams exactly the lines replay streams, into the same events ----------------------------

def _record(event: Event) -> dict[str, Any]:
    return {**event.to_dict(), "seq": event.seq, "digest": getattr(event, "digest", None)}


def _replayed(data: bytes, max_bytes: int, stream_from: int) -> tuple[list[dict[str, Any]], dict[int, str]]:
    texts: dict[int, list[str]] = {}
    out = []
    for seq, line in read_lines(io.BufferedReader(io.BytesIO(data)), max_bytes, stream_from):
        if type(line) is LongLine:
            out.append(_record(streamed_event(seq, line, texts.setdefault(seq, []).append)))
        elif type(line) is Oversized:
            out.append(_record(oversized_line(seq, line, max_bytes)))
        else:
            out.append(_record(protocol.parse_line(line, seq)))  # type: ignore[arg-type]
    return out, {seq: "".join(t) for seq, t in texts.items()}


def _split_live(data: bytes, max_bytes: int, stream_from: int, rng: random.Random
                ) -> tuple[list[dict[str, Any]], dict[int, str]]:
    texts: dict[int, list[str]] = {}
    splitter = LineSplitter(max_bytes, lambda seq: texts.setdefault(seq, []).append, stream_from)
    out, pos = [], 0
    items: list[bytes | Oversized | LongLine] = []
    while pos < len(data):
        step = rng.choice((1, 7, 64, 300, 5000))
        items += splitter.feed(data[pos:pos + step])
        pos += step
    items += splitter.finish()
    for seq, line in enumerate(items, 1):
        if type(line) is LongLine:
            assert line.text is not None
            out.append(_record(line_event(seq, line, line.text)))
        elif type(line) is Oversized:
            out.append(_record(oversized_line(seq, line, max_bytes)))
        elif line:
            out.append(_record(protocol.parse_line(line, seq)))  # type: ignore[arg-type]
    return out, {seq: "".join(t) for seq, t in texts.items()}


def test_the_live_splitter_streams_the_lines_replay_streams_into_the_same_events_and_texts() -> None:
    rng = random.Random(16)
    alphabet = ["a", "\n", '"', "\\", "é", "😀", "\t", "x" * 40, "\u2028"]
    stream_from, max_bytes = 200, 3000
    for _ in range(400):
        lines = []
        for _ in range(rng.randint(1, 6)):
            text = "".join(rng.choice(alphabet) for _ in range(rng.choice((3, 40, 150, 400))))
            kind = rng.random()
            if kind < 0.5:  # a tool_result whose output may run past stream_from (or past max_bytes)
                line = orjson.dumps({"type": "tool_result", "tool": "t", "output": text, "exit_code": 1})
            elif kind < 0.6:  # the output nested, not at the top level: never streamed
                line = orjson.dumps({"type": "tool_result", "tool": "t", "args": {"output": text}, "output": "k"})
            elif kind < 0.7:  # a bad escape inside the long string
                line = orjson.dumps({"type": "tool_result", "output": text})[:-2] + b"\\q" + b"y" * 300 + b'"}'
            elif kind < 0.8:  # the output closes between stream_from and the end of the line
                line = orjson.dumps({"type": "tool_result", "output": "o" * 190, "tool": text})
            else:
                line = orjson.dumps({"type": "assistant_message", "text": text})
            lines.append(line + rng.choice((b"\n", b"\r\n", b"\n\n")))
        data = b"".join(lines)
        if rng.random() < 0.3:
            data = data.rstrip(b"\n")  # the last line has no newline
        live, live_texts = _split_live(data, max_bytes, stream_from, rng)
        replayed, texts = _replayed(data, max_bytes, stream_from)
        assert live == replayed
        assert live_texts.keys() == texts.keys()  # the same lines streamed; the text of those read whole:
        for event in live:
            if event["seq"] in texts and event["type"] == "tool_result":
                assert live_texts[event["seq"]] == texts[event["seq"]]  # (a bad one's is dropped, however cut)


def test_without_open_long_or_when_it_declines_a_long_line_is_read_whole_as_before() -> None:
    line = orjson.dumps({"type": "tool_result", "tool": "t", "output": "z" * 5000}) + b"\n"
    asked: list[int] = []
    declining = LineSplitter(10_000, lambda seq: asked.append(seq), 100)  # type: ignore[func-returns-value]
    assert declining.feed(b"\n" + line) == [b"", line[:-1]] and asked == [2]  # numbered as the caller counts
    assert LineSplitter(10_000).feed(line) == [line[:-1]]
    over = LineSplitter(1000, lambda seq: [].append, 100).feed(line)  # streamed, then past max_bytes: skipped
    assert type(over[0]) is LongLine and over[0].over and over[0].length == len(line) - 1


# ---- live, with a real daemon and a real agent ---------------------------------------------------------------

def _status_kb(pid: int, key: str) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(key + ":"):
            return int(row.split()[1]) * 1024
    raise KeyError(key)


def _expected_text(mb: int) -> tuple[int, int, bytes]:
    """The bench's stream of `mb` MB: (its big line's length, its output's UTF-8 length, that output's digest)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from big_output import _PIECE, write_to

    with open("/dev/null", "wb") as null:
        line, size = write_to(null, mb * 1_000_000)
    block = "".join(_PIECE.format(i=i) for i in range(2000)).encode()
    digest = hashlib.blake2b()
    for _ in range(size // len(block)):
        digest.update(block)
    return line, size, digest.digest()


def _file_digest(path: Path) -> bytes:
    digest = hashlib.blake2b()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.digest()


def _replay(tmp: Path, mb: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "bench"))
    from big_output import write_to

    stream = tmp / "stream.jsonl"
    with open(stream, "wb") as f:
        write_to(f, mb * 1_000_000)
    verdicts: list[dict[str, Any]] = []
    config = load_config(env={}, sets=list(RAISED))
    with open(stream, "rb") as f:
        Replayer(config, spiller=Spiller(tmp / "replay-spill", session="replay")).run(
            f, "native", lambda v: verdicts.append(v.to_dict()))
    stream.unlink()
    return verdicts


def test_a_40_mb_accepted_output_is_spilled_whole_as_it_arrives_and_the_daemon_stays_bounded(
        lw: Harness, tmp_path: Path) -> None:
    mb = 40
    line, size, digest = _expected_text(mb)
    assert lw.daemon is not None
    pid = lw.daemon.pid
    warm = lw.launch(PY, str(BENCH), "--_agent", "2", sets=RAISED, name="warm")  # imports, store, spill dir
    lw.wait_state(warm, "exited", timeout=60)
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status_kb(pid, "VmRSS")
    sid = lw.launch(PY, str(BENCH), "--_agent", str(mb), sets=RAISED, name="big")
    lw.wait_state(sid, "exited", timeout=180)
    logs = wait_for(lambda: (got := lw.request("logs", session=sid)) and got["verdicts"] and got, 30,
                    "the verdicts of the big session")
    growth = _status_kb(pid, "VmHWM") - before
    assert growth < line // 4, f"the daemon grew {growth:,} bytes for a {line:,}-byte line"

    spill = next(v for v in logs["verdicts"] if v["action"] == "spill")
    path = Path(spill["evidence"]["path"])
    assert path.parent == lw.paths.spill and path.stat().st_mode & 0o777 == 0o600
    assert path.name == f"{slug(sid, 'session')}-0000002-tool.txt"  # no name from the agent
    assert path.stat().st_size == size and _file_digest(path) == digest  # the whole output, byte for byte
    assert len(list(lw.paths.spill.iterdir())) == 2  # the warm-up's and this one's: nothing half written left

    replayed = _replay(tmp_path, mb)
    live = logs["verdicts"]
    assert [(v["action"], v["rule"], v["seq"]) for v in live] == [(v["action"], v["rule"], v["seq"]) for v in replayed]
    twin = next(v for v in replayed if v["action"] == "spill")
    assert spill["message"] == twin["message"].replace(twin["evidence"]["path"], str(path))
    assert spill["evidence"]["size"] == twin["evidence"]["size"]
    result = next(e["data"] for e in logs["events"] if e["kind"] == "tool_result")
    assert result["seq"] == 2 and result["size"] == twin["evidence"]["size"] and result["output"] == spill["message"]
    assert result["exit_code"] == 0 and result["tool"] == "cat" and result["call_id"] == "c1"


def test_a_handshake_agent_gets_the_spill_path_of_its_long_output_and_under_the_default_limit_a_refusal(
        lw: Harness) -> None:
    size = 3_000_000
    accepted = lw.launch(PY, str(AGENTS / "oversized_result.py"), str(size), sets=RAISED, name="accepted")
    refused = lw.launch(PY, str(AGENTS / "oversized_result.py"), str(size), name="refused")
    lw.wait_state(accepted, "exited", timeout=60)
    lw.wait_state(refused, "exited", timeout=60)

    said = [e["data"]["text"] for e in lw.events(accepted) if e["kind"] == "assistant_message"]
    assert said and said[0].startswith(f"got spill for c1: Tool response too large ({size} characters). Full ")
    spill = next(v for v in lw.request("logs", session=accepted)["verdicts"] if v["action"] == "spill")
    assert Path(spill["evidence"]["path"]).read_bytes() == b"x" * size

    logs = lw.request("logs", session=refused)
    said = [e["data"]["text"] for e in logs["events"] if e["kind"] == "assistant_message"]
    assert said and said[0].startswith("got spill for c1: Tool response too large (3,000,0")
    assert any(e["kind"] == "invalid_line" and "line longer than 1,048,576 bytes" in e["data"]["reason"]
               for e in logs["events"])
    assert not any(v["action"] == "spill" for v in logs["verdicts"])


def test_a_spill_volume_full_in_the_middle_of_a_long_output_leaves_no_partial_file_and_the_agent_goes_on(
        lw: Harness, tmp_path: Path) -> None:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a 1 MiB tmpfs needs root on Linux")
    volume = tmp_path / "spill"
    volume.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(volume)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        size = 3_000_000  # the file fills the volume after a third of it
        sid = lw.launch(PY, str(AGENTS / "oversized_result.py"), str(size), sets=(*RAISED, f"spill.dir={volume}"),
                        name="full")
        snap = lw.wait_state(sid, "exited", timeout=60)
        assert snap["spill_failures"] == 1 and list(volume.iterdir()) == []  # the partial file was removed
        events = lw.events(sid)
        said = [e["data"]["text"] for e in events if e["kind"] == "assistant_message"]
        assert said and said[0].startswith("got spill for c1: " + "x" * 40)  # the first part, inline
        assert any(e["kind"] == "log" and f"spill of read_logs output ({size} chars) to {volume} failed"
                   in e["data"]["text"] for e in events)
    finally:
        subprocess.run(["umount", "-l", str(volume)], capture_output=True, check=False)
