"""Modal dialogs with typed results: confirm, ask for text, launch a session."""

from __future__ import annotations

import os
import shlex
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from ..sessions import acp_agents, registry
from ..supervisor.config import PRESETS



class Confirm(ModalScreen[bool]):
    """A yes/no question for destructive keys; `y` or Yes confirms, `n`, escape or No declines."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "Yes"),
                                             Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog danger"):
            yield Label(self.question, markup=False)  # names come from agents and commands
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", id="yes", variant="error")
                yield Button("No (n)", id="no")

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class AskText(ModalScreen[str | None]):
    """One line of text for the agent (guidance, an injected message); empty or escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, placeholder: str = "", *, allow_empty: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, markup=False)
            yield Input(placeholder=self.placeholder, id="text")
            yield Label("enter sends · escape cancels", classes="hint")

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text or self.allow_empty:
            self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Launch(ModalScreen[dict[str, Any] | None]):
    """A new session: command, adapter, preset and an optional name; the result is a `run` spec."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog launch"):
            yield Label("Launch a supervised session")
            yield Input(placeholder="command, e.g. python -m loopwarden.sessions.scripted healthy", id="command")
            with Horizontal(classes="row"):
                known = [(f"acp: {n} (the command is the prompt)", f"agent:{n}") for n in acp_agents.AGENTS]
                yield Select([(a, a) for a in registry.names()] + known, value="auto", allow_blank=False,
                             id="adapter")
                yield Select([(p, p) for p in PRESETS], value="recommended", allow_blank=False, id="preset")
            yield Input(placeholder="name (optional)", id="name")
            yield Label("", id="error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Launch", id="launch", variant="primary")
                yield Button("Cancel", id="cancel")

    @on(Input.Submitted)
    @on(Button.Pressed, "#launch")
    def launch(self) -> None:
        text = self.query_one("#command", Input).value
        adapter = str(self.query_one("#adapter", Select).value)
        try:
            command = [text.strip()] if adapter.startswith("agent:") else shlex.split(text)
        except ValueError as exc:
            self.query_one("#error", Label).update(f"command: {exc}")
            return
        if not command or not command[0]:
            self.query_one("#error", Label).update("type the command to run (for an ACP agent: the prompt)")
            self.query_one("#command", Input).focus()
            return
        env = dict(os.environ)
        try:  # for an agent CLI the words are its arguments and prompt
            if adapter.startswith("agent:"):  # a known ACP agent: the whole text is the prompt
                command = acp_agents.shortcut_words(adapter.removeprefix("agent:"), command, env, os.getcwd())
                adapter = "acp"
            cls = registry.adapters()[adapter]
            command = cls.launch_command(command, env)
            extra = cls.launch_env(command, env, os.getcwd())
        except ValueError as exc:
            self.query_one("#error", Label).update(str(exc))
            return
        self.dismiss({"command": command, "adapter": adapter, "env_extra": extra,
                      "preset": self.query_one("#preset", Select).value,
                      "name": self.query_one("#name", Input).value.strip() or None})

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
