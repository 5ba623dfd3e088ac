"""The footer: the keys of the current screen on one line, drawn by one widget.

Textual's Footer builds a widget per key, and builds them again on every screen
switch, for the hidden screens too. Under load (bench/console_responsiveness.py) that
rebuild was the largest part of a switch, and Textual 8.2.8 kept the old keys
alive. This bar shows the same keys, in the same colours, as one piece of text that
is rebuilt only when the screen's bindings change. A click on a key presses it.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget


class KeyBar(Widget, can_focus=False):
    """`key description` for every shown binding of the screen; the command palette's key at the right."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"keybar--key", "keybar--description"}
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
        self._hits: list[tuple[int, int, str]] = []  # x range of each key on the last line drawn

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
        key_style = self.get_visual_style("keybar--key")
        text_style = self.get_visual_style("keybar--description")
        palette = self.app.COMMAND_PALETTE_BINDING if self.app.ENABLE_COMMAND_PALETTE else None
        parts: list[Content] = []
        hits: list[tuple[int, int, str]] = []
        x = 0
        right: Content | None = None
        for key, display, description, enabled in self.shown_keys():
            item = Content.assemble((f" {display} ", key_style), (f"{description} " if description else "",
                                                                   text_style))
            if not enabled:
                item = item.stylize("dim")
            if key == palette:
                right = Content.assemble(("▏", "dim"), item)
                continue
            hits.append((x, x + item.cell_length, key))
            parts.append(item)
            x += item.cell_length
        line = Content.assemble(*parts)
        if right is not None:
            gap = self.size.width - line.cell_length - right.cell_length
            if gap >= 1:
                hits.append((self.size.width - right.cell_length, self.size.width, palette or ""))
                line = Content.assemble(line, " " * gap, right)
        self._hits = hits
        return line

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._hits:
            if start <= event.x < end:
                self.app.simulate_key(key)
                return
