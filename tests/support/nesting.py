"""Deeply nested values for the depth-bound tests, built and measured without recursion."""

from __future__ import annotations

from typing import Any


def nest(depth: int, *, key: str | None = None) -> Any:
    """A value `depth` levels deep: arrays, or objects with the one key `key`."""
    value: Any = {} if key is not None else []
    for _ in range(depth - 1):
        value = {key: value} if key is not None else [value]
    return value


def depth_of(value: Any) -> int:
    """How deep a value nests (a scalar: 0; `[]` or `{}`: 1)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
