"""One assistant message that repeats the same passage over and over (Gemini CLI's content chanting check).

Gemini CLI cuts streamed text into 50-character sliding chunks; a loop is one chunk occurring 10
times with an average spacing of at most 5 chunk lengths, and at most 5 distinct texts between the
occurrences (so a list of items sharing a long prefix is not a loop). Code fences, tables, list
items, headings, blockquotes and dividers repeat by nature and are left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import pairwise
from operator import contains, itemgetter
from typing import Any, Final

from .. import messages
from ..config import Config
from ..events import AssistantMessage, Event
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Guard

_MAX_TEXT: Final = 20_000  # the end of a longer message is judged (a chanting model repeats until it is cut off)
_FENCE: Final = "```"
_STRUCTURE: Final = re.compile(r"\s*(?:\|.*\||[|+-]{3,}|[*+-]\s|\d+\.\s|#+\s|>\s)")
_DIVIDER: Final = re.compile(r"[\s+\-_=*\u2500-\u257F]+")


def prose(text: str) -> list[str]:
    """The runs of plain lines of a message: code fences and markdown structure cut them apart."""
    runs: list[str] = []
    lines: list[str] = []
    in_code = False
    for line in text.splitlines(keepends=True):
        if _FENCE in line:
            in_code ^= line.count(_FENCE) % 2 == 1
        elif not in_code and not _STRUCTURE.match(line) and not _DIVIDER.fullmatch(line):
            lines.append(line)
            continue
        if lines:
            runs.append("".join(lines))
            lines = []
    if lines:
        runs.append("".join(lines))
    return runs


def maybe_chanting(text: str, chunk: int, repeats: int) -> bool:
    """A cheap pre-check (C-speed `find`/`count` on sampled pieces): could some chunk recur `repeats` times?

    Sound: of `repeats` occurrences with an average spacing of at most 5 chunks, two are at most 5
    chunks apart; the occurrence before that smallest gap holds a sampled piece (stride 4/5 of a
    chunk, length chunk - stride + 1) which recurs within the gap. Either the gap is shorter than the piece,
    or no two occurrences of the chunk are closer than the piece, and the piece occurs `repeats` times
    around it. The occurrences also fit in the text, so the smallest gap is at most (len(text) - chunk) /
    (repeats - 1): a short message (most are) is searched over that much, not 5 chunks. Its pieces are first
    cut and searched all at once, which answers as `maybe_chanting_by_loop` (the loop over them) would.
    """
    stride, piece, reach = _sampling(len(text), chunk, repeats)
    count = len(range(0, len(text) - piece, stride))
    if 2 <= count <= _AT_ONCE:  # every piece and the window it must recur in, cut and searched in C (no loop)
        pieces, windows = _samplers(count, stride, piece, -(-reach // _WINDOW_STEP) * _WINDOW_STEP)
        if not any(map(contains, windows(text), pieces(text))):
            return False  # no piece recurs within its reach: the loop would find none
    return _a_piece_recurs(text, chunk, repeats, stride, piece, reach)


def maybe_chanting_by_loop(text: str, chunk: int, repeats: int) -> bool:
    """maybe_chanting's answer by the loop over the sampled pieces alone, none searched at once."""
    stride, piece, reach = _sampling(len(text), chunk, repeats)
    return _a_piece_recurs(text, chunk, repeats, stride, piece, reach)


def _sampling(length: int, chunk: int, repeats: int) -> tuple[int, int, int]:
    """The sampled pieces' stride and length, and how far past its start a piece's next occurrence must end."""
    stride = max(1, chunk * 4 // 5)  # any stride below a chunk is sound; a longer one is fewer `find`s
    piece = chunk - stride + 1
    return stride, piece, min(5 * chunk, (length - chunk) // (repeats - 1)) + piece


def _a_piece_recurs(text: str, chunk: int, repeats: int, stride: int, piece: int, reach: int) -> bool:
    """Whether a sampled piece recurs within its reach, and `repeats` times around it unless closer than a piece."""
    span = 5 * chunk * (repeats - 1) + chunk
    find = text.find
    # the sampled piece of an occurrence may start up to stride - 1 past it, and an occurrence follows it: the
    # last piece worth a search starts piece + 1 before the end (stopping a chunk before would miss a short chant
    # after a few other characters)
    for i in range(0, len(text) - piece, stride):
        sub = text[i:i + piece]
        j = find(sub, i + 1, i + reach)
        if j >= 0 and (j - i < piece or text.count(sub, max(0, i - span), i + span + piece) >= repeats):
            return True
    return False


_AT_ONCE: Final = 32  # sampled pieces taken at once, at most (a message of ~1,300 characters at the default chunk)
_WINDOW_STEP: Final = 32  # windows are rounded up to this (a longer window is as sound): few shapes to keep


@lru_cache(maxsize=64)
def _samplers(count: int, stride: int, piece: int, reach: int) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """Getters of a message's `count` sampled pieces, and of the window each must recur in for `maybe_chanting`
    (from one character past the piece's start to `reach` past it)."""
    starts = range(0, count * stride, stride)
    return (itemgetter(*[slice(i, i + piece) for i in starts]), itemgetter(*[slice(i + 1, i + reach) for i in starts]))


def find_chant(text: str, chunk: int, repeats: int) -> tuple[str, int] | None:
    """Gemini CLI's check over one run of text: (the repeated chunk, its occurrences) or None."""
    seen: dict[str, list[int]] = {}
    limit = 5 * chunk
    for i in range(len(text) - chunk + 1):
        piece = text[i:i + chunk]
        where = seen.get(piece)
        if where is None:
            seen[piece] = [i]
            continue
        where.append(i)
        if len(where) < repeats:
            continue
        recent = where[-repeats:]
        if (recent[-1] - recent[0]) / (repeats - 1) > limit:
            continue
        periods = {text[a:b] for a, b in pairwise(recent)}
        if len(periods) <= repeats // 2:
            return piece, len(where)
    return None


class ChantingGuard(Guard):
    """Nudges the first chanting message (Gemini CLI's first strike); a second one opens a gate."""

    name = "chanting"
    handles = (AssistantMessage,)

    def __init__(self, config: Config) -> None:
        self.strikes = 0
        self.configure(config)

    def configure(self, config: Config) -> None:
        self.repeats = config.chanting.repeats
        self.chunk = max(1, config.chanting.chunk_chars)

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        repeats, chunk = self.repeats, self.chunk
        text: str = event.text  # type: ignore[attr-defined]
        if repeats < 2 or len(text) < chunk + repeats - 1:
            return NO_VERDICTS
        text = text[-_MAX_TEXT:]
        if not maybe_chanting(text, chunk, repeats):
            return NO_VERDICTS
        found = None
        for run in prose(text):
            found = find_chant(run, chunk, repeats)
            if found:
                break
        if found is None:
            return NO_VERDICTS
        passage, count = found
        self.strikes += 1
        evidence = {"passage": passage, "count": count, "chars": len(event.text), "strike": self.strikes}  # type: ignore[attr-defined]
        reason = f"one message repeats a passage {count}x"
        if self.strikes == 1:
            return (Verdict(Action.NUDGE, self.name, reason, message=messages.chanting_nudge(passage, count),
                            evidence=evidence),)
        return (Verdict(Action.GATE, self.name, reason + ", after a nudge",
                        message=messages.chanting_gate(passage, count), evidence=evidence),)

    def human_turn(self) -> None:
        self.strikes = 0

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "chanting"):
            self.strikes = 0

    def counters(self) -> list[Counter]:
        return [Counter("chanting", self.strikes, 2 if self.repeats else 0)]
