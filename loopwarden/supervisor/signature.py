"""Canonical signatures: when two tool calls, outputs or errors are 'the same'."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import orjson

from .bounds import MAX_DEPTH, TOO_DEEP

MAX_ARGS_DEPTH: Final = MAX_DEPTH - 1  # arguments sit one level inside the line (or hook event) that carried them
_FINGERPRINT_LIMIT: Final = 200


class ArgsTooDeep(ValueError):
    """Arguments nested deeper than MAX_ARGS_DEPTH."""


def _canon(value: Any, depth: int) -> Any:
    t = type(value)
    if t is str:
        return value.strip()
    if t is dict:
        if depth >= MAX_ARGS_DEPTH:
            raise ArgsTooDeep(TOO_DEEP)
        return {k: _canon(v, depth + 1) for k, v in value.items()}
    if t is list:
        if depth >= MAX_ARGS_DEPTH:
            raise ArgsTooDeep(TOO_DEEP)
        return [_canon(v, depth + 1) for v in value]
    if t is float and value.is_integer() and -(2**63) <= value < 2**63:
        return int(value)  # 1.0 == 1; larger floats stay floats (JSON cannot hold such integers)
    return value


def canonical_args(args: dict[str, Any]) -> bytes:
    """Arguments as canonical JSON: sorted keys, 1.0 == 1, surrounding whitespace of strings ignored."""
    padded = False
    for value in args.values():  # flat arguments (the common case) are written as they are, strings stripped
        kind = type(value)
        if kind is str:
            if value and (value[0].isspace() or value[-1].isspace()):
                padded = True  # (code sent to an edit often ends with a newline)
        elif kind is not int and kind is not bool and value is not None:
            break
    else:
        if padded:  # what the walk gives for flat arguments, with no call per value
            args = {k: v.strip() if type(v) is str else v for k, v in args.items()}
        return orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
    return orjson.dumps(_canon(args, 0), option=orjson.OPT_SORT_KEYS)


def call_signature(tool: str, args: dict[str, Any]) -> int:
    """A 64-bit fingerprint of tool name + canonical arguments; call ids never count.

    Signatures are only compared with each other inside one process (never stored or shown), so Python's
    keyed hash serves: two different calls look the same with odds of 2**-64, and it costs a tenth of a
    blake2b digest (which took about 1.3 us per call)."""
    return hash((tool, canonical_args(args)))


def result_digest(result: Any) -> bytes:
    """A tool result's digest, computed once per result and cached on it."""
    digest: bytes | None = result.digest
    if digest is None:
        digest = result.digest = output_digest(result.output, result.failed)
    return digest


_LAZY_DIGEST_CHARS: Final = 64 * 1024  # a longer output is digested at once rather than held until it is compared


OutputKey = str | tuple[str] | bytes


def output_key(result: Any) -> OutputKey:
    """What stands for a tool result's digest (`result_digest`) in a rule that may compare it later: its output
    when it succeeded, its output in a 1-tuple when it failed, or (a long output, or a result whose digest came
    with it) the digest itself. Most results are never compared (the next call differs), so most are never
    digested; no object is made for one (a `LazyDigest` cost ~1.5k instructions per result).

    The output string is held, not the result: what the shell does to the event afterwards (a spill) does not
    change it. Two keys stand for equal digests exactly when `same_output` says so.
    """
    digest: bytes | None = result.digest
    if digest is not None:
        return digest
    output: str = result.output
    if len(output) > _LAZY_DIGEST_CHARS:
        return result_digest(result)
    exit_code = result.exit_code
    if result.is_error or (exit_code is not None and exit_code != 0):  # result.failed, written out (see ToolResult)
        return (output,)
    return output


def same_output(a: OutputKey, b: OutputKey) -> bool:
    """Whether two `output_key`s stand for equal digests: keys of one type compare as they are (equal outputs
    and flags give equal digests; different ones give different digests, blake2b's collisions aside), keys of two
    types by digest."""
    if type(a) is type(b):
        return a == b
    return _key_digest(a) == _key_digest(b)


def _key_digest(key: OutputKey) -> bytes:
    if type(key) is bytes:
        return key
    if type(key) is tuple:
        return output_digest(key[0], True)
    return output_digest(key, False)  # type: ignore[arg-type]


def output_digest(output: str, failed: bool) -> bytes:
    """A digest of a tool result (its text and whether it failed)."""
    h = hashlib.blake2b(output.encode("utf-8", "surrogatepass"), digest_size=16)
    h.update(b"E" if failed else b"O")
    return h.digest()


_ERROR_LINE: Final = re.compile(
    r"\b(error|exception|fail(?:ed|ure|s)?|fatal|panic(?:ked)?|denied|refused|not found|no such"
    r"|cannot|can't|unable|timed? ?out|segmentation fault|abort(?:ed)?|invalid)\b",
    re.IGNORECASE,
)
_SKIP_LINE: Final = re.compile(r"^\s*Traceback \(most recent call last\)", re.IGNORECASE)
_DIGIT: Final = "digit"
# (pattern, replacement, what the text must hold for the pattern to match: a digit, one of some substrings, or
# anything). The checks are cheap `in` tests or one search; replacements never add a digit or those substrings,
# so a check made before an earlier replacement stays sound.
_VOLATILE: Final[list[tuple[re.Pattern[str], str, str | tuple[str, ...] | None]]] = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>", _DIGIT),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>", _DIGIT),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<uuid>", ("-",)),
    (re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE), "<addr>", _DIGIT),
    (re.compile(r"(?:/private)?/(?:tmp|var/tmp|var/folders)/[^\s'\":]*"), "<tmp>", ("/tmp/", "/var/folders/")),
    # a path's folders one at a time, each taken whole, at most 64 of them: a line of `C:\C:\...` is no slow search
    (re.compile(r"\b[A-Za-z]:\\(?:[^\s'\"\\]{0,255}+\\){0,64}?(?:Temp|tmp)\\[^\s'\":]*", re.IGNORECASE), "<tmp>",
     (":\\",)),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|ns|s|sec|secs|seconds?|minutes?)\b"), "<dur>", _DIGIT),
    (re.compile(r"\b((?:\d{1,3}\.){3}\d{1,3}|localhost|\[[0-9a-fA-F:]+\]):\d+\b"), r"\1:<port>", _DIGIT),
    (re.compile(r"\b(pid|port|thread|tid|id)([ =:#]+)\d+\b", re.IGNORECASE), r"\1\2<num>", _DIGIT),
    (re.compile(r"\b\d{8,}\b"), "<num>", _DIGIT),
    (re.compile(r"\b[0-9a-f]{12,}\b", re.IGNORECASE), "<hex>", None),
]
_ANY_DIGIT: Final = re.compile(r"\d")


def _hide_volatile(text: str) -> str:
    """`text` with every _VOLATILE pattern replaced in turn, skipping those the text cannot hold."""
    digits = _ANY_DIGIT.search(text) is not None
    for pattern, repl, needs in _VOLATILE:
        if needs is _DIGIT:
            if not digits:
                continue
        elif needs is not None and not any(part in text for part in needs):
            continue
        text = pattern.sub(repl, text)
    return text


def error_line(output: str) -> str:
    """The first line that carries an error, else the first non-empty line."""
    first = ""
    for line in output.splitlines()[:400]:
        if not line.strip():
            continue
        if not first:
            first = line
        if _SKIP_LINE.match(line):
            continue
        if _ERROR_LINE.search(line):
            return line
    return first


def normalise_error(line: str) -> str:
    """Hide volatile parts (times, durations, temp paths, addresses, long numbers) of an error line.

    Line numbers, error codes (E0308, 404, ORA-00942, SQLSTATE 23505) and test
    ids stay, so a different failing test or error code is a different fingerprint.
    """
    return " ".join(_hide_volatile(line).split())[:_FINGERPRINT_LIMIT]


# a `path:line` starts where a path's characters start (the lookbehind) and takes them all at once (possessive):
# no start inside a long run of them, no giving back, so the search is linear in the output
_LOCATION: Final = re.compile(r'File "([^"\n]+)", line (\d+)|(?<![\w./\\-])([\w./\\-]++):(\d+)')
_EXTENSION: Final = re.compile(r"\.\w+\Z")
_FAILURE_HEAD: Final = 64 * 1024  # a failure's text is compared this far


def failure_key(tool: str | None, output: str) -> bytes:
    """What makes two failed tool results 'the same failure' (seed 002's exact message match): the tool and its
    whole output with the volatile parts hidden (times, durations, temp paths, addresses, ids); line numbers,
    error codes and test counts stay, so a moved error or one failing test fewer is a different failure."""
    text = " ".join(_hide_volatile(output[:_FAILURE_HEAD]).split())
    h = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16)
    h.update(b"\0" + (tool or "").encode("utf-8", "surrogatepass"))
    return h.digest()


def failure_location(output: str) -> str | None:
    """The first file:line a failure's output names (a traceback's `File "x", line N` or a `path:line:`)."""
    for found in _LOCATION.finditer(output[:_FAILURE_HEAD]):
        if found[1]:
            return f"{found[1]}:{found[2]}"
        if _EXTENSION.search(found[3]):  # a file's name: `tests/x.py:12`, not `localhost:8080`
            return f"{found[3]}:{found[4]}"
    return None


# A build runner's own summary line says that a step failed, not which error: the same
# "make: *** [lint-fix] Error 1" closes three different compile errors fixed one after another.
_RUNNER_LINE: Final = re.compile(
    r"\s*(?:make(?:\[\d+\])?: \*\*\* |npm ERR! (?:code|errno) |error Command failed with exit code "
    r"|Process completed with exit code )"
)
_DIAGNOSTIC: Final = re.compile(r"\s*[\w./\\-]+:\d+(?::\d+)?:")  # path:line[:col]: what compilers and linters print


def error_fingerprint(tool: str, output: str) -> str:
    """tool + the normalised line that carries the error; when that line is only a build runner's summary,
    a digest of the diagnostics (path:line: lines) tells one failure from another."""
    line = error_line(output)
    fingerprint = f"{tool}: {normalise_error(line)}"
    if _RUNNER_LINE.match(line):
        diagnostics = [normalise_error(d) for d in output.splitlines()[:400] if _DIAGNOSTIC.match(d)]
        if diagnostics:
            digest = hashlib.blake2b("\n".join(diagnostics).encode("utf-8", "surrogatepass"), digest_size=4)
            fingerprint += f" (diagnostics {digest.hexdigest()})"
    return fingerprint


# Outputs are compared with every number hidden as well: a directory listing whose sizes grow, a poll whose
# percentage or age ticks, is the same output. (Error fingerprints keep small numbers: a line number or an
# error code there tells two errors apart.)
_SIZE: Final = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:[KMGTP]i?B|[KMGTP]\b|bytes?\b|B\b)", re.IGNORECASE)
_NUMBER: Final = re.compile(r"\d+(?:[.,]\d+)*")
_OUTPUT_HEAD: Final = 64 * 1024  # normalise this much; a change past it is told by the raw tail's digest


def normalise_output(output: str) -> str:
    """A tool output with its volatile parts (times, ids, temp paths, sizes, every number) hidden."""
    text = _hide_volatile(output[:_OUTPUT_HEAD])
    if _ANY_DIGIT.search(text) is None:
        return text  # _SIZE and _NUMBER both need a digit
    return _NUMBER.sub("<n>", _SIZE.sub("<n>", text))


def output_shape(output: str) -> bytes:
    """A digest of the normalised output: equal for two outputs that differ only in volatile parts."""
    h = hashlib.blake2b(normalise_output(output).encode("utf-8", "surrogatepass"), digest_size=16)
    if len(output) > _OUTPUT_HEAD:
        h.update(output[_OUTPUT_HEAD:].encode("utf-8", "surrogatepass"))
    return h.digest()


def first_difference(before: str, after: str, limit: int = 80) -> tuple[str, str]:
    """The first line that differs between two outputs (each clipped), for evidence."""
    old, new = before.splitlines(), after.splitlines()
    for a, b in zip(old, new, strict=False):
        if a != b:
            return a[:limit], b[:limit]
    if len(old) == len(new):
        return before[:limit], after[:limit]
    longer = old if len(old) > len(new) else new
    extra = longer[min(len(old), len(new))][:limit]
    return ("", extra) if longer is new else (extra, "")
