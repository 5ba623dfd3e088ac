"""Flat arguments skip the canonicaliser's walk (issue 16); the bytes are the walk's own."""

from __future__ import annotations

import random

import orjson

from loopwarden.supervisor.signature import _canon, canonical_args


def walked(args: dict) -> bytes:
    return orjson.dumps(_canon(args, 0), option=orjson.OPT_SORT_KEYS)


def test_flat_arguments_give_the_bytes_of_the_walk() -> None:
    rng = random.Random(3)
    values = ["x", "", " lead", "trail\n", "\tboth ", "in side", "é", "\u2003wide", 0, -5, 2**63, True, False, None,
              1.0, 2.5, -0.0, [1], {"a": " b "}]
    for _ in range(2000):
        args = {f"k{rng.randint(0, 9)}": rng.choice(values) for _ in range(rng.randint(0, 5))}
        assert canonical_args(args) == walked(args), args


def test_surrounding_whitespace_and_integral_floats_still_count_as_equal() -> None:
    assert canonical_args({"path": " a.py\n", "n": 1.0}) == canonical_args({"n": 1, "path": "a.py"})
    assert canonical_args({"path": "a.py "}) != canonical_args({"path": "a .py"})  # a near miss: inner space stays
