"""The engine's shortcuts (issue 16, replay at half of raw json.loads) give what the plain code they skip
would: each is compared with that plain code over many generated inputs, the ones it must not miss included."""

from __future__ import annotations

import posixpath
import random

from loopwarden.supervisor import events as ev
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.guards import chanting
from loopwarden.supervisor.guards.chanting import find_chant, maybe_chanting, maybe_chanting_by_loop, prose
from loopwarden.supervisor.guards.rereads import normal_path
from loopwarden.supervisor.health import SessionHealth


def test_a_path_is_normalised_as_normpath_would() -> None:
    r = random.Random(16)
    parts = ["src", "a.py", ".", "..", "", ".git", "x..y", "..z", "dir.d", "~", "-"]
    paths = ["/", "//", "///", ".", "..", "a", "a/", "/a//b", "./a", "../a", "a/.", "a/..", "a/./b", ".hidden",
             "/tmp/x.py", "src/app/models/user_service.py"]
    paths += [("/" if r.random() < 0.5 else "") + "/".join(r.choice(parts) for _ in range(r.randint(1, 5)))
              for _ in range(5000)]
    for path in paths:
        if path:
            assert normal_path(path) == posixpath.normpath(path), path


def test_a_check_command_is_told_as_the_word_by_word_test_would() -> None:
    from loopwarden.supervisor.checks import CheckCommands
    from loopwarden.supervisor.config import load_config

    checks = CheckCommands(load_config(env={}).reflections.commands)

    def plain(command: str) -> bool:  # every simple command looked at, no pre-check
        return checks.runs_check(command)

    r = random.Random(16)
    words = ["pytest", "-q", "tests/x.py", "./node_modules/.bin/jest", "/usr/bin/make", "test", "ls", "cargo", "go",
             "vet", "npm", "run", "lint", "echo", "mypy", "src", "&&", "|", "grep", "x/pytest", "pytestx", "-k",
             "bash -lc 'pytest", "'ruff", "\"go", "-q'"]
    commands = [" ".join(r.choice(words) for _ in range(r.randint(1, 6))) for _ in range(5000)]
    assert sum(map(plain, commands)) > 500  # check commands, and near misses beside them
    for command in commands:
        assert checks.matches(command) == plain(command), command


def _chants(text: str, chunk: int, repeats: int) -> bool:
    """The chanting rule's own check over the message's prose, with no pre-check."""
    return any(find_chant(run, chunk, repeats) for run in prose(text))


def test_the_chanting_pre_check_passes_every_message_that_chants() -> None:
    """maybe_chanting searches a short message only as far as its smallest gap can reach: the chants that
    fill their message to the last character (the tightest case) must all still pass it."""
    rng = random.Random(16)
    letters = "abcdefgh ijk"
    fired = 0
    for _ in range(3000):
        chunk = rng.choice((50, 50, 20, 7))
        repeats = rng.choice((10, 10, 3, 2))
        if rng.random() < 0.5:  # a passage of period g repeated: exactly `repeats` occurrences of its first chunk
            g = rng.randint(1, 5 * chunk)
            base = "".join(rng.choice(letters) for _ in range(g))
            body = (base * (chunk // g + repeats + 1))[:chunk + (repeats - 1) * g]
        else:  # one chunk, with fillers of up to three kinds between its occurrences
            passage = "".join(rng.choice(letters) for _ in range(chunk))
            fillers = ["".join(rng.choice(letters) for _ in range(rng.randint(0, 4 * chunk))) for _ in range(3)]
            body = passage + "".join(rng.choice(fillers) + passage for _ in range(repeats - 1))
        text = "".join(rng.choice(letters) for _ in range(rng.randint(0, 30))) + body \
            + "".join(rng.choice(letters) for _ in range(rng.randint(0, 30)))
        if _chants(text, chunk, repeats):
            fired += 1
            assert maybe_chanting(text, chunk, repeats), (chunk, repeats, text)
    assert fired > 1000  # the cases above mostly chant


def test_the_chanting_pre_check_turns_away_plain_prose() -> None:
    """The near miss: messages with no passage repeated are mostly turned away before the rule's own check."""
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9))) for _ in range(300)]
    passed = sum(maybe_chanting(" ".join(rng.choice(words) for _ in range(rng.randint(20, 400))) + ".", 50, 10)
                 for _ in range(200))
    assert passed < 20


def test_the_pieces_searched_at_once_answer_as_the_loop_over_them() -> None:
    """maybe_chanting cuts and searches the sampled pieces of a short message all at once; its answer is the loop's,
    over messages of every length it does so for, repeats found within the windows and just past them included.
    The loop is called by its own function: compiled, the engine holds its constants as C values a test cannot
    change."""
    rng = random.Random(16)
    texts = []
    for _ in range(3000):
        letters = rng.choice(("abcdefgh ijk", "ab c", "abcdefghijklmnopqrstuvwxyz ., "))
        text = "".join(rng.choice(letters) for _ in range(rng.randint(0, 1400)))
        if text and rng.random() < 0.5:  # a passage repeated a few times, at spacings around the window's end
            at = rng.randrange(len(text))
            passage = text[at:at + rng.randint(5, 60)]
            text = text[:at] + "".join(passage + "".join(rng.choice(letters) for _ in range(rng.randint(0, 120)))
                                       for _ in range(rng.randint(2, 11))) + text[at:]
        texts.append((text, rng.choice((50, 50, 20, 7)), rng.choice((10, 10, 3, 2))))
    chanting._samplers.cache_clear()
    at_once = [maybe_chanting(*case) for case in texts]
    searched = chanting._samplers.cache_info()
    assert searched.hits + searched.misses > 1000  # the pieces of that many messages were searched at once
    assert at_once == [maybe_chanting_by_loop(*case) for case in texts]
    assert 300 < sum(at_once) < 2700


def test_calls_and_results_keep_validation_and_runtime_as_their_own_hooks_would() -> None:
    """SessionHealth does validation's and runtime's bookkeeping of a call or result itself; a tool with its own
    thresholds (`tools.limits`, here the defaults again) takes the guards' own hooks: both end the same."""
    rng = random.Random(5)
    lax = ["validation.max_consecutive=0", "failures.max_consecutive=0", "repetition.max_identical_calls=0",
           "limits.max_runtime=0"]
    fused = SessionHealth(load_config(env={}, sets=lax))
    hooked = SessionHealth(load_config(env={}, sets=[*lax, "tools.limits=Bash:repetition.nudge_after=2"]))
    assert not fused.control.tuned and "Bash" in hooked.control.tuned
    now = 0.0
    for seq in range(1, 1500):
        now += rng.choice((0.5, 2.0, 31.0))  # 31 s: past the stall timeout now and then
        kind = rng.choices(("call", "result", "invalid", "message", "verr"), (8, 8, 1, 2, 1))[0]
        if kind == "call":
            event: ev.Event = ev.ToolCall(seq=seq, tool="Bash", args={"command": rng.choice(("ls", "make", "ls -l"))})
        elif kind == "result":
            event = ev.ToolResult(seq=seq, tool=rng.choice(("Bash", None)), output=rng.choice(("a", "b")),
                                  is_error=rng.random() < 0.3)
        elif kind == "invalid":
            event = ev.InvalidLine(seq=seq, reason="not JSON")
        elif kind == "verr":
            event = ev.ValidationError(seq=seq, message="bad output")
        else:
            event = ev.AssistantMessage(seq=seq, text="thinking")
        got = [(v.rule, v.action, v.reason) for v in fused.observe(event, now)]
        assert got == [(v.rule, v.action, v.reason) for v in hooked.observe(event, now)], seq
        for a, b in ((fused._validation, hooked._validation), (fused.runtime, hooked.runtime)):
            assert _state(a) == _state(b)
    assert fused.state != "terminated" and fused.validation_total > 100


def _state(guard: object) -> dict[str, object]:
    """A guard's attributes but its config, whether it is a Python object or compiled (no __dict__ then: mypyc
    lists a native class's attributes in __mypyc_attrs__)."""
    names = getattr(type(guard), "__mypyc_attrs__", None) or vars(guard)
    assert names, f"{type(guard).__name__} has no attributes to compare"
    return {name: getattr(guard, name) for name in names if name != "cfg"}

