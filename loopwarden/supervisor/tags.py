"""Tags: short labels an operator puts on sessions (`run --tag`, `set SESSION tag=...`) to group and filter them.

A tag is 1 to 32 printable characters without spaces or commas (so `ls --tag` and the console's TAGS
column show it as given); a session has at most MAX_TAGS. `tag=NAME` adds one, `tag=-NAME` removes it.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_TAG_CHARS = 32
MAX_TAGS = 16
MAX_CHANGES = 2 * MAX_TAGS  # every tag removed and as many added, in one request


class TagError(ValueError):
    """A tag, or a change of tags, that cannot be taken; its message is one line for a person."""


def check_tag(tag: object) -> str:
    """`tag` when it is a valid tag, else TagError saying why."""
    if not isinstance(tag, str) or not tag:
        raise TagError("a tag cannot be empty; e.g. --tag review")
    shown = tag[:MAX_TAG_CHARS].encode("unicode_escape").decode("ascii")
    if len(tag) > MAX_TAG_CHARS:
        raise TagError(f"tag {shown!r}... is longer than {MAX_TAG_CHARS} characters")
    if not tag.isprintable() or any(c.isspace() or c == "," for c in tag):
        raise TagError(f"tag {shown!r}: use printable characters without spaces or commas, e.g. team-a")
    if tag.startswith("-"):
        raise TagError(f"tag {shown!r} cannot start with '-' (tag=-NAME removes the tag NAME)")
    return tag


def check_tags(tags: Iterable[object]) -> list[str]:
    """Valid, unique tags in the order given, at most MAX_TAGS, else TagError."""
    out: list[str] = []
    for tag in tags:
        if check_tag(tag) not in out:
            out.append(str(tag))
            if len(out) > MAX_TAGS:  # said at the first one over, never after reading a huge request
                raise TagError(f"more than {MAX_TAGS} tags; a session has at most {MAX_TAGS}")
    return out


def change_tags(tags: Iterable[str], changes: Iterable[object]) -> list[str]:
    """`tags` after each change in turn: NAME adds it, -NAME removes it (a tag it lacks: no change)."""
    out = list(tags)
    for count, change in enumerate(changes, 1):
        if count > MAX_CHANGES:  # a removal may follow an addition, so the tags are counted once at the end
            raise TagError(f"more than {MAX_CHANGES} tag changes at once")
        if isinstance(change, str) and change.startswith("-") and len(change) > 1:
            name = check_tag(change[1:])
            out = [t for t in out if t != name]
        elif check_tag(change) not in out:
            out.append(str(change))
    return check_tags(out)


def stored_tags(snap: dict[str, object]) -> list[str]:
    """The tags a stored snapshot holds; none when they cannot be read (a label is never worth refusing a run)."""
    tags = snap.get("tags")
    try:
        return check_tags(tags) if isinstance(tags, list) else []
    except TagError:
        return []
