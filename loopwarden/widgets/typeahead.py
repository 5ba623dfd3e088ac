"""Type-ahead into a screen's one-line box (the `/` search, the sessions filter), however fast the keys come.

Textual moves the focus a turn later (`Widget.focus` goes through `call_later`), and a binding runs only when
its key has bubbled up to the app: keys typed right after `/` (a paste, `tmux send-keys`, a fast typist)
are already on their way to the view and its bindings when the box opens, so `/Kill` would press `K`. A
`TypeAhead` screen runs the box's opening key as soon as it reaches the screen, focuses the box at once, and
puts every key that still arrives by the old way into the box, until enter or escape.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar, Protocol

from textual import events
from textual.widget import Widget
from textual.widgets import Input


class Line(Protocol):
    """What the box offers besides an Input's own: escape clears it."""

    def action_clear(self) -> None: ...


class TypeAhead:
    """Mixin for a Screen: `LINE_ACTION` is the action whose key opens the box; it calls `type_into(box)`."""

    LINE_ACTION: ClassVar[str]
    typing_into: Input | None = None

    def type_into(self, box: Input) -> None:
        """Every following key goes into `box`; `Screen.set_focus` moves the focus now, not a turn later."""
        self.typing_into = box
        self.set_focus(box)  # type: ignore[attr-defined]

    def stop_typing(self) -> None:
        self.typing_into = None

    async def on_key(self, event: events.Key) -> None:
        box = self.typing_into
        if box is not None and box is not self.focused:  # type: ignore[attr-defined]
            self.typing_into = box = None  # the operator moved the focus away (tab, a click)
        if box is None:
            await self._open_line(event)
        elif self._type(box, event):
            event.stop()
            event.prevent_default()

    async def _open_line(self, event: events.Key) -> None:
        """The opening key runs here, before the keys behind it reach the bindings."""
        bound = self.active_bindings.get(event.key)  # type: ignore[attr-defined]
        if bound is None or not bound.enabled or bound.binding.action != self.LINE_ACTION:
            return
        event.stop()
        event.prevent_default()
        await self.app.run_action(bound.binding.action, bound.node)  # type: ignore[attr-defined]

    def _type(self, box: Input, event: events.Key) -> bool:
        """A key for the box that came past it (or that the box leaves to its bindings): done here.

        The edit runs as the box's own message, so the box's Changed and Submitted reach the app (Textual stops a
        message from bubbling past the node that posted it, and this screen would be that node).
        """
        edit: Callable[[], object]
        if event.is_printable and event.character:
            edit = partial(box.insert_text_at_cursor, event.character)
        elif event.key == "backspace":
            edit = box.action_delete_left
        elif event.key in ("enter", "escape"):
            self.typing_into = None
            edit = box.action_submit if event.key == "enter" else partial(_clear, box)
        else:
            return False  # cursor keys and the like: the focused box's own bindings
        box.call_later(edit)
        return True


def _clear(box: Widget) -> None:
    line: Line = box  # type: ignore[assignment]
    line.action_clear()
