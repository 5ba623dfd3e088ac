"""Tests for spilling oversized tool outputs to private files."""

from __future__ import annotations

import errno
import os
import tempfile
import tracemalloc
from pathlib import Path

import platformdirs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.runtime import spill as spill_mod
from loopwarden.runtime import spill_bounds
from loopwarden.runtime.spill import SpillResult, Spiller, is_spill_name, slug
from loopwarden.runtime.spill_bounds import SpillBounds, SpillLedger
from tests.store.helpers import mode

NOW = 1_700_000_000.0
DAY = 24 * 3600


def inside(path: str, directory: str | Path) -> bool:
    return os.path.dirname(os.path.realpath(path)) == os.path.realpath(directory)


def big(n: int = 300) -> str:
    return "".join(chr(ord("a") + i % 26) for i in range(n))


# --- message and result ----------------------------------------------------------------------


def test_message_wording_path_size_and_preview(tmp_path: Path) -> None:
    text = big(5000)
    r = Spiller(tmp_path / "s", preview_chars=100, session="sess").spill(text, tool="bash", seq=3, now=NOW)
    assert isinstance(r, SpillResult)
    assert r.path == str(tmp_path / "s" / "sess-0000003-bash.txt")
    assert r.size == 5000 and r.preview == text[:100] and r.warning is None
    assert r.message == (
        f"Tool response too large (5000 characters). Full output saved to: {r.path}\n\n"
        "To examine the output:\n"
        "- Use read_file tool to view the file\n"
        "- Use grep tool to search within the file\n"
        "- The file will be deleted after 24h\n\n"
        "Preview (first 100 chars):\n"
        f"{text[:100]}..."
    )
    assert "cleaned up when the session ends" not in r.message
    assert Path(r.path).read_text() == text


@pytest.mark.parametrize(
    ("seconds", "shown"), [(DAY, "24h"), (90, "1.5m"), (30, "30s"), (3600, "1h"), (7 * DAY, "7d"), (5400, "1.5h")]
)
def test_retention_in_human_units(tmp_path: Path, seconds: float, shown: str) -> None:
    r = Spiller(tmp_path, retention=seconds).spill("x" * 10, tool="t", seq=1, now=NOW)
    assert f"- The file will be deleted after {shown}\n" in r.message


def test_preview_shorter_than_preview_chars(tmp_path: Path) -> None:
    r = Spiller(tmp_path).spill("short", tool="t", seq=1, now=NOW)
    assert r.preview == "short" and "Preview (first 5 chars):\nshort..." in r.message


def test_default_directory_is_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda app: str(tmp_path / "cache" / app))
    for directory in (None, ""):
        assert Spiller(directory).directory == str(tmp_path / "cache" / "loopwarden" / "spill")


def test_file_mtime_is_now(tmp_path: Path) -> None:
    r = Spiller(tmp_path).spill("abc", tool="t", seq=1, now=NOW)
    assert os.stat(r.path).st_mtime == NOW


# --- permissions ------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o277])
def test_dir_and_parents_created_0700_and_file_0600_whatever_umask(tmp_path: Path, mask: int) -> None:
    before = mode(tmp_path)
    old = os.umask(mask)
    try:
        r = Spiller(tmp_path / "a" / "b" / "spill").spill(big(), tool="t", seq=1, now=NOW)
    finally:
        os.umask(old)
    assert r.path is not None
    for p in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "spill"):
        assert mode(p) == 0o700, p
    assert mode(r.path) == 0o600
    assert mode(tmp_path) == before  # pre-existing parents are left alone


def test_existing_dir_with_group_other_bits_is_tightened(tmp_path: Path, umask: None) -> None:
    d = tmp_path / "spill"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o777)
    Spiller(d).spill(big(), tool="t", seq=1, now=NOW)
    assert mode(d) == 0o700


def test_symlinked_dir_falls_back_and_never_writes(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    link = tmp_path / "spill"
    link.symlink_to(target)
    r = Spiller(link, truncate_chars=50).spill(big(), tool="t", seq=1, now=NOW)
    assert r.path is None and r.warning and "symlink" in r.warning
    assert list(target.iterdir()) == []


def test_dir_owned_by_someone_else_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "spill"
    d.mkdir(mode=0o700)
    monkeypatch.setattr(spill_mod, "_euid", lambda: os.geteuid() + 4242)
    r = Spiller(d, truncate_chars=50).spill(big(), tool="t", seq=1, now=NOW)
    assert r.path is None and r.warning and "owned by uid" in r.warning
    assert list(d.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_dir_really_chowned_to_other_uid_falls_back(tmp_path: Path) -> None:
    d = tmp_path / "spill"
    d.mkdir()
    os.chmod(d, 0o777)
    os.chown(d, 4242, 4242)
    r = Spiller(d).spill(big(), tool="t", seq=1, now=NOW)
    assert r.path is None and "owned by uid 4242" in (r.warning or "")
    assert list(d.iterdir()) == [] and mode(d) == 0o777


def test_spill_path_that_is_a_regular_file_falls_back(tmp_path: Path) -> None:
    f = tmp_path / "spill"
    f.write_text("not a dir")
    r = Spiller(f).spill(big(), tool="t", seq=1, now=NOW)
    assert r.path is None and "not a directory" in (r.warning or "")
    assert f.read_text() == "not a dir"


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("../../etc/passwd", "etc_passwd"),
        ("/abs/path", "abs_path"),
        ("a\x00b", "a_b"),
        ("..", "tool"),
        ("", "tool"),
        (None, "tool"),
        ("x" * 10_000, "x" * 48),
        ("mcp__fs__read file", "mcp__fs__read_file"),
        ("..hidden", "hidden"),
        ("-rf", "rf"),
    ],
)
def test_hostile_tool_names_stay_inside_dir(tmp_path: Path, tool: str | None, expected: str) -> None:
    r = Spiller(tmp_path).spill(big(), tool=tool, seq=7, now=NOW)
    assert r.path is not None and inside(r.path, tmp_path)
    assert os.path.basename(r.path) == f"session-0000007-{expected}.txt"


def test_session_name_is_slugged(tmp_path: Path) -> None:
    r = Spiller(tmp_path, session="../run 2024/01").spill(big(), tool="bash", seq=1, now=NOW)
    assert os.path.basename(r.path or "") == "run_2024_01-0000001-bash.txt"


def test_negative_seq_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Spiller(tmp_path).spill("x", tool="t", seq=-1, now=NOW)


@given(tool=st.text(), session=st.text())
def test_slug_properties(tool: str, session: str) -> None:
    for name, fallback in ((tool, "tool"), (session, "session")):
        s = slug(name, fallback)
        assert 1 <= len(s) <= 48
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in s)
        assert s[0] not in "._-"
    assert is_spill_name(f"{slug(session, 'session')}-0000001-{slug(tool, 'tool')}.txt")


_HYPO_DIR = tempfile.TemporaryDirectory(prefix="spill-hypo-")
_seq = iter(range(10**9))


@settings(max_examples=150, deadline=None)
@given(tool=st.one_of(st.none(), st.text()), session=st.text())
def test_arbitrary_names_never_escape(tool: str | None, session: str) -> None:
    d = os.path.join(_HYPO_DIR.name, "spill")
    r = Spiller(d, session=session).spill("payload", tool=tool, seq=next(_seq), now=NOW)
    assert r.path is not None, r.warning
    assert inside(r.path, d)
    assert is_spill_name(os.path.basename(r.path))
    assert Path(r.path).read_text() == "payload"


def test_collision_adds_numeric_suffix(tmp_path: Path) -> None:
    s = Spiller(tmp_path)
    paths = [s.spill(f"out{i}", tool="t", seq=1, now=NOW).path for i in range(3)]
    assert [os.path.basename(p or "") for p in paths] == [
        "session-0000001-t.txt",
        "session-0000001-t-2.txt",
        "session-0000001-t-3.txt",
    ]
    assert [Path(p or "").read_text() for p in paths] == ["out0", "out1", "out2"]


def test_existing_symlink_with_our_name_is_not_followed(tmp_path: Path) -> None:
    d = tmp_path / "spill"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (d / "session-0000001-t.txt").symlink_to(victim)
    r = Spiller(d).spill("evil", tool="t", seq=1, now=NOW)
    assert os.path.basename(r.path or "") == "session-0000001-t-2.txt"
    assert victim.read_text() == "precious"


def test_collision_tries_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill_mod, "MAX_TRIES", 3)
    s = Spiller(tmp_path, truncate_chars=10)
    for _ in range(3):
        assert s.spill("x", tool="t", seq=1, now=NOW).path
    r = s.spill(big(), tool="t", seq=1, now=NOW)
    assert r.path is None and "no free spill file name" in (r.warning or "")
    assert len(list(tmp_path.iterdir())) == 3


# --- streaming and encoding -------------------------------------------------------------------


def test_fifty_megabytes_streamed_with_small_peak_memory(tmp_path: Path) -> None:
    text = "0123456789abcdef" * (50 * (1 << 20) // 16)
    s = Spiller(tmp_path)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        r = s.spill(text, tool="cat", seq=1, now=NOW)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.path is not None and r.size == len(text)
    assert os.path.getsize(r.path) == len(text)  # ASCII: characters == bytes
    assert peak - base < 10 * (1 << 20), peak - base


def test_multibyte_text_split_across_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill_bounds, "CHUNK_CHARS", 7)
    text = "héllo wörld 😀 ∑ " * 50
    r = Spiller(tmp_path).spill(text, tool="t", seq=1, now=NOW)
    assert Path(r.path or "").read_bytes() == text.encode()
    assert r.size == len(text)


def test_lone_surrogates_are_replaced_not_fatal(tmp_path: Path) -> None:
    text = "a\ud800b\udfffc" * 100
    r = Spiller(tmp_path, preview_chars=5).spill(text, tool="t", seq=1, now=NOW)
    assert r.path is not None and r.size == len(text)
    assert Path(r.path).read_bytes() == b"a?b?c" * 100
    assert r.preview == "a?b?c"
    r.message.encode("utf-8")  # the agent's text is valid too


# --- fallback ---------------------------------------------------------------------------------


def test_fallback_when_parent_is_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    text = big(1000)
    r = Spiller(tmp_path / "file" / "spill", truncate_chars=100).spill(text, tool="bash", seq=1, now=NOW)
    assert r.path is None and r.size == 1000 and r.preview == text[:1000]
    assert r.message == text[:100] + "\n\n[TRUNCATED: Response was 1000 characters, showing first 100]"
    assert r.warning is not None and "\n" not in r.warning
    assert "bash" in r.warning and "truncated to the first 100 chars" in r.warning


def test_fallback_keeps_short_text_whole(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    r = Spiller(tmp_path / "file" / "spill", truncate_chars=100).spill("tiny", tool="t", seq=1, now=NOW)
    assert r.path is None and r.message == "tiny" and r.warning


def test_partial_file_removed_when_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill_bounds, "CHUNK_CHARS", 10)
    real = spill_bounds.write_all
    calls = []

    def failing(fd: int, data: bytes) -> None:
        calls.append(data)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(spill_bounds, "write_all", failing)
    r = Spiller(tmp_path, truncate_chars=20).spill(big(100), tool="t", seq=1, now=NOW)
    assert r.path is None and "No space left" in (r.warning or "")
    assert r.message.startswith(big(20) + "\n\n[TRUNCATED: Response was 100 characters, showing first 20]")
    assert list(tmp_path.iterdir()) == []


# --- cleanup ----------------------------------------------------------------------------------


def test_cleanup_removes_only_old_files_matching_pattern(tmp_path: Path) -> None:
    s = Spiller(tmp_path, retention=DAY)
    old = s.spill("old", tool="t", seq=1, now=NOW - DAY - 1).path
    fresh = s.spill("new", tool="t", seq=2, now=NOW - 10).path
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    os.utime(other, (0, 0))
    subdir = tmp_path / "session-0000009-t.txt"
    subdir.mkdir()
    os.utime(subdir, (0, 0))
    assert s.cleanup(NOW) == 1
    assert not os.path.exists(old or "") and os.path.exists(fresh or "")
    assert other.exists() and subdir.is_dir()


def test_cleanup_removes_other_sessions_old_files(tmp_path: Path) -> None:
    Spiller(tmp_path, session="earlier").spill("x", tool="t", seq=1, now=0)
    assert Spiller(tmp_path, session="now").cleanup(NOW) == 1
    assert list(tmp_path.iterdir()) == []


def test_cleanup_never_follows_symlinks(tmp_path: Path) -> None:
    d = tmp_path / "spill"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.utime(victim, (0, 0))
    link = d / "session-0000001-t.txt"
    link.symlink_to(victim)
    os.utime(link, (0, 0), follow_symlinks=False)
    assert Spiller(d).cleanup(NOW) == 0
    assert victim.read_text() == "precious" and link.is_symlink()


def test_cleanup_of_symlinked_dir_does_nothing(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    victim = target / "session-0000001-t.txt"
    victim.write_text("x")
    os.utime(victim, (0, 0))
    link = tmp_path / "spill"
    link.symlink_to(target)
    assert Spiller(link).cleanup(NOW) == 0
    assert victim.exists()


def test_cleanup_of_missing_dir_is_zero_and_creates_nothing(tmp_path: Path) -> None:
    assert Spiller(tmp_path / "absent").cleanup(NOW) == 0
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("when", ["before_lstat", "after_lstat"])
def test_cleanup_tolerates_vanished_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    s = Spiller(tmp_path)
    gone = s.spill("a", tool="t", seq=1, now=0).path or ""
    kept_old = s.spill("b", tool="t", seq=2, now=0).path or ""
    real = spill_mod._lstat

    def racing(name: str, dir_fd: int) -> os.stat_result:
        if name == os.path.basename(gone) and os.path.exists(gone):
            if when == "before_lstat":
                os.unlink(gone)
                return real(name, dir_fd)
            result = real(name, dir_fd)
            os.unlink(gone)
            return result
        return real(name, dir_fd)

    monkeypatch.setattr(spill_mod, "_lstat", racing)
    assert s.cleanup(NOW) == 1
    assert not os.path.exists(gone) and not os.path.exists(kept_old)


# --- bounds (spill_bounds.py) ---------------------------------------------------------------------

KIB = 1 << 10


def bounded(tmp_path: Path, session: int = 0, total: int = 0, ledger: SpillLedger | None = None,
            name: str = "s1") -> Spiller:
    return Spiller(tmp_path, session=name, bounds=SpillBounds(session, total, ledger))


def test_an_output_past_the_session_bound_is_cut_there_with_a_marker_and_counted(tmp_path: Path) -> None:
    s = bounded(tmp_path, session=100 * KIB)
    first = s.spill("a" * (60 * KIB), tool="t", seq=1, now=NOW)
    second = s.spill("é" * (30 * KIB), tool="t", seq=2, now=NOW)  # 60 KiB of UTF-8 against 40 KiB of room
    assert first.cut == 0 and first.saved and "Full output saved to" in first.message
    data = Path(second.path or "").read_bytes()
    why = "this session's spill files reached spill.max_session_bytes (100 KiB)"
    kept = data[: data.index(b"\n[... loopwarden")]
    assert kept == "é".encode() * (20 * KIB)  # 40 KiB: cut between characters, never inside one
    assert data.endswith(spill_bounds.marker(20 * KIB, why).encode()) and second.cut == 20 * KIB
    assert f"Only its first {40 * KIB:,} bytes were saved; the last {20 * KIB:,} bytes were cut: {why}." \
        in second.message
    assert s.bounds.written == sum(p.stat().st_size for p in tmp_path.iterdir()) <= 100 * KIB + 200
    assert (s.bounds.cut_bytes, s.bounds.cut_outputs) == (20 * KIB, 1)


def test_past_the_bound_outputs_get_no_file_only_one_notice_and_their_preview(tmp_path: Path) -> None:
    s = bounded(tmp_path, session=10 * KIB)
    s.spill("a" * (10 * KIB), tool="t", seq=1, now=NOW)
    cut = [s.spill(f"{i} " + "b" * 50_000, tool="t", seq=i, now=NOW) for i in range(2, 12)]
    assert len(list(tmp_path.iterdir())) == 2  # the full one and the notice, whatever comes after
    notice = cut[0].path
    assert notice and all(r.path == notice and not r.saved and r.cut == 50_002 for r in cut[:8])
    assert "spill.max_session_bytes (10 KiB)" in Path(notice).read_text()
    assert all(r.preview.startswith(f"{i} bbb") and "none of it was saved" in r.message
               for i, r in enumerate(cut, 2))
    assert s.bounds.cut_outputs == 10 and s.bounds.cut_bytes == sum(len(f"{i} ") + 50_000 for i in range(2, 12))


def test_sessions_share_the_total_with_what_was_on_disk(tmp_path: Path) -> None:
    (tmp_path / "s0-0000001-t.txt").write_bytes(b"x" * (50 * KIB))  # an earlier session's
    os.utime(tmp_path / "s0-0000001-t.txt", (NOW, NOW))
    (tmp_path / "notes.txt").write_bytes(b"x" * (500 * KIB))  # not a spill file: not counted
    ledger = SpillLedger()
    assert ledger.measure([str(tmp_path)]) == 50 * KIB
    one, two = (bounded(tmp_path, total=100 * KIB, ledger=ledger, name=n) for n in ("one", "two"))
    one.spill("a" * (30 * KIB), tool="t", seq=1, now=NOW)
    r = two.spill("b" * (30 * KIB), tool="t", seq=1, now=NOW)
    assert r.cut == 10 * KIB and "the spill files of all sessions reached spill.max_total_bytes (100 KiB)" in r.message
    assert one.spill("c" * (30 * KIB), tool="t", seq=2, now=NOW).saved is False
    on_disk = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name != "notes.txt")
    assert ledger.used == on_disk <= 100 * KIB + 2 * 512  # a marker line, and one notice
    assert (ledger.cut_bytes, ledger.cut_outputs) == (40 * KIB, 2)
    old = Spiller(tmp_path, retention=1)
    old.cleanup(NOW + 10)
    assert old.freed == on_disk  # what the daemon takes off the count


def test_a_stream_is_bounded_and_a_discarded_one_gives_its_bytes_back(tmp_path: Path) -> None:
    s = bounded(tmp_path, session=64 * KIB)
    stream = s.stream(tool="t", seq=1)
    for _ in range(10):
        stream.write("x" * (10 * KIB))
    r = stream.finish(100 * KIB, "x" * 100, "t", NOW)
    assert r.cut == 36 * KIB and Path(r.path or "").stat().st_size == s.bounds.written
    dropped = bounded(tmp_path, session=64 * KIB, name="s2")
    stream = dropped.stream(tool="t", seq=1)
    stream.write("y" * (20 * KIB))
    assert dropped.bounds.written == 20 * KIB
    stream.discard()
    assert dropped.bounds.written == 0 and not list(tmp_path.glob("s2-*"))
    whole = s.stream(tool="t", seq=2)  # no room left: no file at all, only counted
    whole.write("z" * (5 * KIB))
    r = whole.finish(5 * KIB, "z" * 10, "t", NOW)
    assert not r.saved and r.cut == 5 * KIB and len(list(tmp_path.glob("s1-*"))) == 2


def test_zero_is_no_bound(tmp_path: Path) -> None:
    ledger = SpillLedger()
    s = bounded(tmp_path, ledger=ledger)
    assert s.spill("a" * (300 * KIB), tool="t", seq=1, now=NOW).cut == 0
    assert ledger.used == 300 * KIB
