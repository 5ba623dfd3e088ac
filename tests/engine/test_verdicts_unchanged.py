"""The engine's verdicts on every recording stay byte-identical while the engine is made faster (issue 16).

Each case replays a recording the way `loopwarden replay` does (format told from its first lines, spill
files written) and compares, with a golden file recorded by the engine before issue 16: every verdict
line, the summary, and a digest of every spill file. A generated stream (bench/gen_stream.py, fixed seed)
is compared by a digest of its verdict lines and its counts.

A change that means to alter verdicts rewrites the goldens on purpose:
    LOOPWARDEN_WRITE_GOLDENS=1 .venv/bin/python -m pytest tests/engine/test_verdicts_unchanged.py
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from loopwarden.replay import Replayer, choose_format, open_recording
from loopwarden.runtime.spill import Spiller
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import Verdict
from tests.support.paths import ROOT, recording

GOLDENS = Path(__file__).resolve().parent / "verdict_goldens"
WRITE = os.environ.get("LOOPWARDEN_WRITE_GOLDENS") == "1"

# Recordings, found in the repository first (tests/*/data, the bundled example), then in the shared folder.
RECORDINGS = [
    "loopwarden/examples/demo.jsonl",
    "tests/acp/data/acp_looping.jsonl",
    "tests/codex/data/app_server_looping.jsonl",
    "tests/data/claude_stream-json__claude-clean__simple.jsonl",
    "tests/data/claude_turns_array__claude-code-action__sample-turns.json",
    "tests/data/codex_exec_json__agentcmd__stream-output-2.jsonl",
    "tests/data/codex_exec_json__agentcmd__stream-output-3.jsonl",
    "tests/data/codex_exec_json__agentcmd__stream-output-4.jsonl",
    "tests/data/codex_exec_json__agentcmd__stream-output-5.jsonl",
    "tests/data/codex_exec_json__openai-codex-docs__exec-md-sample.jsonl",
    "claude_stream-json__ccagent__claude_response1.jsonl",  # shared only (373 kB)
    "claude_stream-json__ccagent__claude-session-with-image.jsonl",  # shared only (1.2 MB, a 1.1 MB line)
]
# The default thresholds, and the tightest preset: more rules fire on the real recordings under it.
PRESETS = ["recommended", "aggressive"]
# The generated stream: a small, seeded one, judged to its end (as bench/replay_throughput.py does) and as is.
GENERATED_EVENTS, GENERATED_SEED = 30_000, 7
BENCH_SETS = ["limits.max_iterations=0", "limits.max_runtime=0"]
GENERATED = [("recommended", []), ("recommended", BENCH_SETS), ("aggressive", BENCH_SETS)]


def replay(path: Path, preset: str, sets: list[str], spill_dir: Path) -> list[bytes]:
    """The verdict lines `loopwarden replay` prints, its summary, and a digest of each spill file written."""
    config = load_config(env={}, preset=preset, sets=[*sets, f"spill.dir={spill_dir}"])
    spiller = Spiller(spill_dir, preview_chars=config.spill.preview_chars,
                      truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                      session="replay")
    out: list[bytes] = []

    def emit(verdict: Verdict) -> None:
        out.append(orjson.dumps(verdict.to_dict()).replace(str(spill_dir).encode(), b"<spill>"))

    with open(path, "rb") as f:
        guess, stream = open_recording(f)
        fmt = choose_format(None, guess, path.name)
        summary = Replayer(config, spiller=spiller).run(stream, fmt, emit, array=guess.array, detected=True)
    out.append(orjson.dumps({"summary": summary.to_dict()}, option=orjson.OPT_SORT_KEYS))
    for spilled in sorted(spill_dir.iterdir()) if spill_dir.exists() else []:
        digest = hashlib.sha256(spilled.read_bytes()).hexdigest()
        out.append(orjson.dumps({"spill_file": spilled.name, "sha256": digest}))
    return out


def golden_name(name: str, preset: str) -> str:
    return f"{Path(name).stem}.{preset}.jsonl"


def compare(golden: Path, lines: list[bytes]) -> None:
    text = b"".join(line + b"\n" for line in lines)
    if WRITE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_bytes(text)
        return
    expected = golden.read_bytes().splitlines()
    assert len(lines) == len(expected), f"{len(lines)} lines, the golden has {len(expected)}"
    for i, (got, want) in enumerate(zip(lines, expected, strict=True), 1):
        assert got == want, f"line {i} of {golden.name} differs"


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", RECORDINGS)
def test_the_verdicts_on_each_recording_are_unchanged(name: str, preset: str, tmp_path: Path) -> None:
    lines = replay(recording(name), preset, [], tmp_path / "spill")
    compare(GOLDENS / golden_name(name, preset), lines)


def test_a_recording_that_spills_is_compared_with_its_spill_file(tmp_path: Path) -> None:
    """Near-miss guard for the comparison itself: the demo's golden holds a spill verdict and its file's digest."""
    golden = (GOLDENS / golden_name("loopwarden/examples/demo.jsonl", "recommended")).read_bytes()
    assert b'"action":"spill"' in golden and b'"spill_file"' in golden and b"<spill>" in golden


@pytest.fixture(scope="module")
def generated_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("gen_stream", ROOT / "bench" / "gen_stream.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    path = tmp_path_factory.mktemp("generated") / "stream.jsonl"
    gen.generate(GENERATED_EVENTS, GENERATED_SEED, path)
    return path


def _digest(lines: Iterator[bytes] | list[bytes]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line + b"\n")
    return h.hexdigest()


@pytest.mark.parametrize(("preset", "sets"), GENERATED, ids=["default", "to-the-end", "aggressive-to-the-end"])
def test_the_verdicts_on_a_generated_stream_are_unchanged(generated_stream: Path, preset: str, sets: list[str],
                                                           tmp_path: Path) -> None:
    lines = replay(generated_stream, preset, sets, tmp_path / "spill")
    verdicts = [line for line in lines if line.startswith(b'{"seq"')]
    summary = json.loads(lines[len(verdicts)])["summary"]
    record = {"events": GENERATED_EVENTS, "seed": GENERATED_SEED, "preset": preset, "sets": sets,
              "verdicts": len(verdicts), "digest": _digest(verdicts), "summary_digest": _digest(lines[len(verdicts):]),
              "by_rule": summary["by_rule"], "by_action": summary["by_action"], "state": summary["state"],
              "stopped_at": summary["stopped_at"]}
    golden = GOLDENS / f"generated-{GENERATED_SEED}-{GENERATED_EVENTS}.{preset}{'.to-the-end' if sets else ''}.json"
    if WRITE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        return
    assert record == json.loads(golden.read_text())


def _tool_results(path: Path) -> Iterator[tuple[str, str]]:
    """(tool, output) of every tool_result in a recording, in order."""
    from loopwarden.replay import iter_events
    from loopwarden.supervisor.events import ToolResult

    with open(path, "rb") as f:
        guess, stream = open_recording(f)
        fmt = choose_format(None, guess, path.name)
        for event in iter_events(stream, fmt, 64 << 20, array=guess.array):
            if type(event) is ToolResult:
                yield event.tool or "", event.output


def test_the_error_fingerprints_and_output_shapes_are_unchanged(generated_stream: Path) -> None:
    """What same_error and polling compare: the fingerprint and shape of every output, failed or not."""
    from loopwarden.supervisor.signature import error_fingerprint, output_shape

    paths = [generated_stream] + [recording(name) for name in RECORDINGS if (ROOT / name).exists()]
    h = hashlib.sha256()
    count = 0
    for path in paths:
        for tool, output in _tool_results(path):
            h.update(error_fingerprint(tool, output).encode("utf-8", "surrogatepass") + b"\0")
            h.update(output_shape(output) + b"\n")
            count += 1
    record = {"outputs": count, "digest": h.hexdigest()}
    golden = GOLDENS / "fingerprints.json"
    if WRITE:
        golden.write_text(json.dumps(record, sort_keys=True) + "\n")
        return
    assert record == json.loads(golden.read_text())
