"""The command palette's own provider: the console's commands in the console's order.

Textual's system-commands provider lists its commands sorted by title, which put `Open s10`
before `Open s2`; this one lists them as the app yields them (filter, sorts, help, actions,
then sessions by number) and, once something is typed, by how well they match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen


class HasPaletteCommands(Protocol):
    def palette_commands(self, screen: Screen[Any]) -> Iterable[tuple[str, str, Callable[[], object]]]: ...


class ConsoleCommands(Provider):
    """The app's `palette_commands`, in its order."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        return list(cast(HasPaletteCommands, self.app).palette_commands(self.screen))  # the screen it opened on

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
