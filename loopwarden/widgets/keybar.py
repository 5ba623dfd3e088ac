"""The footer: the keys of the current screen on one line, drawn by one widget.

Textual's Footer builds a widget per key, and builds them again on every screen
switch, for the hidden screens too. Under load (bench/console_responsiveness.py) that
rebuild was the largest part of a switch, and Textual 8.2.8 kept the old keys
alive. This bar shows the same keys, in the footer's theme colours, as one piece of
text rebuilt only when the screen's bindings change; when they do not fit, it
turns compact, then drops the palette hint, then keys before the last two (`?`
help lists them all). A click on a key presses it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual import events
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget


class KeyBar(Widget, can_focus=False):
    """`key description` for every shown binding of the screen; the command palette's key at the right."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        .keybar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .keybar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._keys: list[tuple[str, str, str, bool]] | None = None  # key, display, description, enabled
        self._hits: list[tuple[int, int, str, bool]] = []  # x range, key, enabled: the last line drawn

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        self._keys = None
        self.refresh()

    def shown_keys(self) -> list[tuple[str, str, str, bool]]:
        """The screen's active bindings that want showing, one per action, in binding order."""
        if self._keys is None:
            palette = self.app.COMMAND_PALETTE_BINDING if self.app.ENABLE_COMMAND_PALETTE else None
            seen: set[str] = set()
            keys = []
            for key, active in self.screen.active_bindings.items():
                binding = active.binding
                if (binding.show or key == palette) and binding.action not in seen:
                    seen.add(binding.action)
                    keys.append((binding.key, self.app.get_key_display(binding), binding.description,
                                 active.enabled))
            self._keys = keys
        return self._keys

    def render(self) -> Content:
        """Roomy when it fits; else compact, then without the palette hint, then without middle keys."""
        key_style = self.get_visual_style("keybar--key")
        text_style = self.get_visual_style("keybar--description")
        palette = self.app.COMMAND_PALETTE_BINDING if self.app.ENABLE_COMMAND_PALETTE else None
        keys = [k for k in self.shown_keys() if k[0] != palette]
        right = next((k for k in self.shown_keys() if k[0] == palette), None)
        width = self.size.width

        def item(display: str, description: str, enabled: bool, compact: bool) -> Content:
            if compact:
                parts = Content.assemble((display, key_style), (f" {description}" if description else "", text_style))
            else:
                parts = Content.assemble((f" {display} ", key_style), (f"{description} " if description else "",
                                                                        text_style))
            return parts if enabled else parts.stylize("dim")

        def layout(compact: bool) -> list[tuple[str, bool, Content]]:
            return [(key, enabled, item(display, description, enabled, compact))
                    for key, display, description, enabled in keys]

        def length(items: list[tuple[str, bool, Content]], compact: bool) -> int:
            return sum(c.cell_length for _, _, c in items) + (len(items) - 1 if compact and items else 0)

        hint = None if right is None else Content.assemble(("▏", "dim"), item(right[1], right[2], right[3], False))
        room = width - (hint.cell_length + 1 if hint is not None else 0)
        compact = False
        items = layout(False)
        if length(items, False) > room:
            compact, items = True, layout(True)
        if length(items, True) > room:
            hint, room = None, width
        while len(items) > 2 and length(items, True) > room:  # the last keys (help, quit) stay
            del items[-3]
        hits: list[tuple[int, int, str, bool]] = []
        line: list[Content] = []
        x = 0
        for key, enabled, content in items:
            if line and compact:
                line.append(Content(" "))
                x += 1
            hits.append((x, x + content.cell_length, key, enabled))
            line.append(content)
            x += content.cell_length
        if hint is not None and right is not None:
            line.append(Content(" " * (width - x - hint.cell_length)))
            hits.append((width - hint.cell_length, width, right[0], right[3]))
            line.append(hint)
        self._hits = hits
        return Content.assemble(*line)

    def on_click(self, event: events.Click) -> None:
        for start, end, key, enabled in self._hits:
            if start <= event.x < end:
                if enabled:
                    self.app.simulate_key(key)
                else:
                    self.app.bell()
                return
