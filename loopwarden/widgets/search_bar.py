"""The `/` search line of a text view, and the keys and actions any searchable screen shares.

Keys, the same in every view (the event stream, the spill viewer, the help): `/` opens the line and typing
finds as you type; `enter` goes back to the view keeping the matches; `n` and `N` go to the next and the
previous match; `escape` clears the search (a second `escape` does what it did before).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Input, Static

from .search import Match, Search
from .typeahead import TypeAhead

SEARCH_ACTIONS = frozenset({"search_next", "search_previous", "clear_search"})
SEARCH_KEYS: list[BindingType] = [  # escape first: while a search is shown it clears it, else the view's escape runs
    Binding("escape", "clear_search", "Clear search", id="search.clear", show=False),
    Binding("slash", "search", "Search", id="search.open"),
    Binding("n", "search_next", "Next match", id="search.next"),
    Binding("N", "search_previous", "Previous match", id="search.previous"),
]


class SearchBar(Horizontal):
    """`/ query   3/17`: hidden until `/`; the screen runs the search when the text changes."""

    DEFAULT_CSS = """
    SearchBar { display: none; height: 1; background: $panel; }
    SearchBar.-open { display: block; }
    SearchBar > #search-slash { width: 2; padding-left: 1; }
    SearchBar > Input, SearchBar > Input:focus { width: 1fr; height: 1; border: none; padding: 0;
                                                 background: $panel; }
    SearchBar > #search-count { width: auto; min-width: 10; padding: 0 1; color: $text-muted; }
    """

    class QueryLine(Input):
        """The query line itself: escape clears the search."""

        BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "Clear search")]

        def action_clear(self) -> None:
            screen: Any = self.screen
            screen.action_clear_search()

    def compose(self) -> ComposeResult:
        yield Static("/", id="search-slash")
        yield self.QueryLine(placeholder="search (enter: back to the text, n/N: next/previous, esc: clear)",
                        id="search-input")
        yield Static("", id="search-count")

    @property
    def input(self) -> Input:
        return self.query_one("#search-input", Input)

    def show_count(self, text: str) -> None:
        self.query_one("#search-count", Static).update(text)  # only digits and words of ours: no agent text


class SearchableScreen(TypeAhead):
    """What a screen with a text view adds to search it: the bar's messages, `n`/`N`, escape.

    The screen gives `search_lines()` (the plain text of each line, as shown), `search_view()` (the widget
    that has the focus back), `search_top()` (the first line in view) and `show_search()` (draw the
    highlights and bring the current match into view).
    """

    LINE_ACTION = "search"
    search: Search

    def search_lines(self) -> Sequence[str]:
        raise NotImplementedError

    def search_view(self) -> Widget:
        raise NotImplementedError

    def search_top(self) -> int:
        return 0

    def show_search(self) -> None:
        raise NotImplementedError

    @property
    def search_bar(self) -> SearchBar:
        return self.query_one(SearchBar)  # type: ignore[attr-defined]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The search keys work only while there is a search (else `n` and escape pass on to the next binding)."""
        if action in SEARCH_ACTIONS:
            return self.search.active
        return super().check_action(action, parameters)  # type: ignore[misc]

    def action_search(self) -> None:
        bar = self.search_bar
        bar.add_class("-open")
        self.type_into(bar.input)  # the keys typed right after `/` go into the query, never to the view

    def action_search_next(self) -> None:
        self.search.step(True)
        self._searched()

    def action_search_previous(self) -> None:
        self.search.step(False)
        self._searched()

    def action_clear_search(self) -> None:
        bar = self.search_bar
        self.stop_typing()
        self.search.run("", ())
        with bar.input.prevent(Input.Changed):
            bar.input.value = ""
        bar.remove_class("-open")
        self.search_view().focus()
        self._searched()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "search-input":
            return
        self.search.run(event.value, self.search_lines(), self.search_top())
        self._searched()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search-input":
            return
        self.stop_typing()
        if not self.search.active:
            self.search_bar.remove_class("-open")
        self.search_view().focus()
        self.refresh_bindings()  # type: ignore[attr-defined]  # n and N show in the key bar now

    def _searched(self) -> None:
        self.search_bar.show_count(self.search.count_text())
        self.show_search()
        self.refresh_bindings()  # type: ignore[attr-defined]


def scroll_to_match(view: Widget, found: Match) -> None:
    """Scroll `view` so the match is in sight: a third of the way down, and its end inside the width."""
    width, height = view.scrollable_content_region.size
    x = max(0, found.end - width + 4) if found.end > width - 4 else 0
    view.scroll_to(x=x, y=max(0, found.line - height // 3), animate=False, immediate=True)
