"""Modal dialogs with typed results: confirm, confirm with a reason, ask for text, launch a session, set limits."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from rich.console import RenderableType
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from ..paths import working_directory
from ..runtime.pods.placement import LOCAL
from ..sessions import registry
from ..sessions.base import AUTO
from ..supervisor.config import PRESETS, ConfigError, load_config, parse_set
from ..supervisor.user_config import ProjectDefaults
from ..supervisor.visible import visible

KNOWN_AGENT = "agent:"  # the launch dialog's value for an agent started by name: agent:NAME, beside the adapters


# One convention in every dialog: enter confirms and escape cancels; a dialog with no text to type also takes
# y and n. Each says so in its last line (`keys_hint`).
CHOICE_KEYS: list[BindingType] = [Binding("y,enter", "confirm", "Yes", priority=True),
                                  Binding("n,escape", "cancel", "No", priority=True)]
TEXT_KEYS: list[BindingType] = [Binding("escape", "cancel", "Cancel")]  # enter: the input's own Submitted


def keys_hint(confirms: str = "confirms", *, letters: bool = False) -> str:
    """The dialog's last line: its keys, in the same words everywhere."""
    return f"enter{' or y' if letters else ''} {confirms} · escape{' or n' if letters else ''} cancels"


def _facts(detail: RenderableType | None) -> ComposeResult:
    """What the question is about (a gate's reason and evidence), scrollable when long."""
    if detail is not None:
        with VerticalScroll(classes="facts"):
            yield Static(detail)


def _fit_facts(screen: ModalScreen[Any], rows_around: int) -> None:
    """Let the facts take what the terminal's height leaves after the dialog's other `rows_around` rows,
    so the buttons and the input stay on screen at 80x24 (a max-height in vh is mismeasured in an auto box)."""
    for facts in screen.query(".facts"):
        facts.styles.max_height = max(3, screen.app.size.height - rows_around)


class Confirm(ModalScreen[bool]):
    """A yes/no question for destructive keys; enter, `y` or Yes confirms, escape, `n` or No declines."""

    BINDINGS: ClassVar[list[BindingType]] = CHOICE_KEYS

    def __init__(self, question: str, detail: RenderableType | None = None) -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog danger"):
            yield Label(self.question, markup=False, classes="question")  # names come from agents and commands
            yield from _facts(self.detail)
            with Horizontal(classes="buttons"):
                yield _unfocused(Button("Yes", id="yes", variant="error"))
                yield _unfocused(Button("No", id="no"))
            yield Label(keys_hint(letters=True), classes="hint keys")

    def on_resize(self) -> None:
        _fit_facts(self, 16)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


def _unfocused(button: Button) -> Button:
    """A button for the mouse: the keys are the dialog's, so enter never presses whichever button has focus."""
    button.can_focus = False
    return button


class ConfirmWithReason(ModalScreen[str | None]):
    """A destructive question with an optional reason for the audit log (and, on a denial, the agent).

    Enter or Yes confirms with what was typed ("" for no reason); escape or No declines (None).
    """

    BINDINGS: ClassVar[list[BindingType]] = TEXT_KEYS

    def __init__(self, question: str, placeholder: str, detail: RenderableType | None = None) -> None:
        super().__init__()
        self.question = question
        self.placeholder = placeholder
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog danger"):
            yield Label(self.question, markup=False, classes="question")
            yield from _facts(self.detail)
            yield Input(placeholder=self.placeholder, id="reason")
            with Horizontal(classes="buttons"):
                yield _unfocused(Button("Yes", id="yes", variant="error"))
                yield _unfocused(Button("No", id="no"))
            yield Label(keys_hint(), classes="hint keys")

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()

    def on_resize(self) -> None:
        _fit_facts(self, 20)

    @on(Input.Submitted)
    @on(Button.Pressed, "#yes")
    def confirmed(self) -> None:
        self.dismiss(self.query_one("#reason", Input).value.strip())

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(None)


class AskText(ModalScreen[str | None]):
    """One line of text for the agent (guidance, an injected message); empty or escape cancels.

    `detail` is what the text is about (a gate's reason and evidence), shown above the input.
    """

    BINDINGS: ClassVar[list[BindingType]] = TEXT_KEYS

    def __init__(self, title: str, placeholder: str = "", *, allow_empty: bool = False,
                 detail: RenderableType | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.allow_empty = allow_empty
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, markup=False, classes="question")
            yield from _facts(self.detail)
            yield Input(placeholder=self.placeholder, id="text")
            yield Label(keys_hint("sends"), classes="hint keys")

    def on_mount(self) -> None:
        self.query_one("#text", Input).focus()  # not the facts above it, which can take focus to scroll

    def on_resize(self) -> None:
        _fit_facts(self, 15)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text or self.allow_empty:
            self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _worktree_default() -> bool:
    """The launch dialog's worktree box, as sessions.worktree says in this environment (off when unreadable)."""
    try:
        return load_config().sessions.worktree
    except ConfigError:
        return False


def _placement_defaults(project: ProjectDefaults | None) -> tuple[str, str]:
    """The launch dialog's where and image: kubernetes.place and kubernetes.image as the settings in this
    environment and the project's give them (local and none when unreadable: the daemon says what is wrong)."""
    try:
        k8s = load_config(sets=project.sets() if project else ()).kubernetes
    except ConfigError:
        return LOCAL, ""
    return k8s.place, k8s.image


class Launch(ModalScreen[dict[str, Any] | None]):
    """A new session: command, adapter, preset, an optional name, whether it gets a worktree of its own, and
    where it runs (here, or a pod of its own on a cluster, from an image).

    `submit` sends the `run` spec (blocking, so it runs in a thread) and returns the daemon's reply,
    which is the dialog's result; when it fails the dialog stays open with what was typed and the error.
    """

    BINDINGS: ClassVar[list[BindingType]] = TEXT_KEYS

    def __init__(self, submit: Callable[[dict[str, Any]], Any], project: ProjectDefaults | None = None) -> None:
        super().__init__()
        self.submit = submit
        self.project = project  # the user config's launch defaults for the directory the console runs in

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog launch"):
            yield Label("Launch a supervised session")
            yield Input(placeholder="command, e.g. python -m loopwarden.sessions.scripted healthy", id="command")
            with Horizontal(classes="row"):
                known = [(f"{cls.name}: {n} (the command is the prompt)", f"{KNOWN_AGENT}{n}")
                         for n, cls in registry.known_agents().items()]
                adapters = [(a, a) for a in registry.names()] + known
                yield Select(adapters, value=self._default_adapter([a for _, a in adapters]), allow_blank=False,
                             id="adapter")
                yield Select([(p, p) for p in PRESETS], value="recommended", allow_blank=False, id="preset")
            with Horizontal(classes="row"):
                yield Input(placeholder="name (optional)", id="name")
                own = self.project.worktree if self.project and self.project.worktree is not None else None
                yield Checkbox("own git worktree", _worktree_default() if own is None else own, id="worktree",
                               tooltip="the agent works in a worktree and branch of its own (loopwarden/ID); your "
                                       "checkout is left as it is: review with 'loopwarden diff ID'")
            place, image = _placement_defaults(self.project)
            with Horizontal(classes="row"):
                shown = "" if place == LOCAL else place  # empty: here, and the placeholder says what else
                yield Input(shown, placeholder="where: local or kubernetes:CTX/NS", id="where",
                            tooltip="where the agent runs: local (here) or kubernetes[:CONTEXT[/NAMESPACE]], a pod "
                                    "of its own on a cluster your kubeconfig reaches (kubernetes.place)")
                yield Input(image, placeholder="image (kubernetes)", id="image",
                            tooltip="the pod's image: the agent's program and a python3 (kubernetes.image)")
            if self.project is not None:
                yield Label(self._project_line(self.project, [a for _, a in adapters]), id="project",
                            classes="hint", markup=False)
            yield Label("", id="error", classes="error", markup=False)  # errors quote what was typed
            with Horizontal(classes="buttons"):
                yield _unfocused(Button("Launch", id="launch", variant="primary"))
                yield _unfocused(Button("Cancel", id="cancel"))
            yield Label(keys_hint("launches"), classes="hint keys")

    @on(Input.Submitted)
    @on(Button.Pressed, "#launch")
    def launch(self) -> None:
        if self.query_one("#launch", Button).disabled:  # the previous launch is still on its way
            return
        spec = self.spec()
        if spec is not None:
            self.query_one("#error", Label).update("launching…")
            self.query_one("#launch", Button).disabled = True
            self.send(spec)

    def spec(self) -> dict[str, Any] | None:
        """The `run` spec from what was typed, or None after saying what is wrong."""
        text = self.query_one("#command", Input).value
        adapter = str(self.query_one("#adapter", Select).value)
        agent = adapter.removeprefix(KNOWN_AGENT) if adapter.startswith(KNOWN_AGENT) else None
        try:
            command = [text.strip()] if agent else shlex.split(text)
        except ValueError as exc:
            self.query_one("#error", Label).update(f"command: {exc}")
            return None
        if not command or not command[0]:
            self.query_one("#error", Label).update("type the command to run (for an ACP agent: the prompt)")
            self.query_one("#command", Input).focus()
            return None
        env = dict(os.environ)
        try:  # for an agent CLI the words are its arguments and prompt; for a known agent, the prompt
            cwd = working_directory()
            launch = registry.prepare_launch(AUTO if agent else adapter, command, env, cwd, agent=agent)
        except ValueError as exc:
            self.query_one("#error", Label).update(str(exc))
            return None
        return {"command": launch.command, "adapter": launch.adapter, "env_extra": launch.env, "cwd": cwd,
                "preset": self.query_one("#preset", Select).value,
                "name": self.query_one("#name", Input).value.strip() or None,
                "worktree": self.query_one("#worktree", Checkbox).value,
                "sets": self.project.sets() if self.project else [],
                "on": self.query_one("#where", Input).value.strip() or None,
                "image": self.query_one("#image", Input).value.strip() or None}

    @staticmethod
    def _project_line(project: ProjectDefaults, offered: list[str]) -> str:
        """What the project's defaults set here, and its adapter when the dialog does not offer it."""
        taken = project.adapter in offered
        applied = project if taken else replace(project, adapter=None)
        line = f"project defaults from {project.name}: {applied.describe()}"
        return line if taken or not project.adapter else \
            f"{line} (its adapter {project.adapter!r} is not one offered: auto)"

    def _default_adapter(self, offered: list[str]) -> str:
        """The project's adapter when it is one offered, else auto."""
        wanted = self.project.adapter if self.project else None
        return wanted if wanted in offered else AUTO

    @work(thread=True, exclusive=True, exit_on_error=False)
    def send(self, spec: dict[str, Any]) -> None:
        try:
            reply = self.submit(spec)
        except Exception as exc:  # noqa: BLE001 - any failure is shown in the dialog, in one line
            self.app.call_from_thread(self.failed, visible(str(exc)) or type(exc).__name__)
            return
        self.app.call_from_thread(self.dismiss, reply if isinstance(reply, dict) else {})

    def failed(self, error: str) -> None:
        self.query_one("#error", Label).update(f"launch failed: {error}")
        self.query_one("#launch", Button).disabled = False

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class SetLimits(ModalScreen[dict[str, Any] | None]):
    """KEY=VALUE settings for a running session (`limits.max_runtime=2h`), shown with its current limits.

    `submit` sends the values (op `set`, blocking, so in a thread) and returns the daemon's reply, which is
    the dialog's result; when the daemon refuses them the dialog stays open with what was typed and why.
    """

    BINDINGS: ClassVar[list[BindingType]] = TEXT_KEYS

    def __init__(self, title: str, current: RenderableType,
                 submit: Callable[[dict[str, str]], Any] | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.current = current
        self.submit = submit

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog limits"):
            yield Label(self.title_text, markup=False)
            yield from _facts(self.current)
            yield Input(placeholder="KEY=VALUE ..., e.g. limits.max_runtime=2h limits.max_iterations=40", id="values")
            yield Label("", id="error", classes="error", markup=False)  # errors quote what was typed
            yield Label(keys_hint("applies") + " · 0 turns a limit off", classes="hint keys")

    def on_mount(self) -> None:
        self.query_one("#values", Input).focus()  # not the facts above it, which can take focus to scroll

    def on_resize(self) -> None:
        _fit_facts(self, 17)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        try:
            values = parse_settings(event.value)
        except ValueError as exc:
            self.query_one("#error", Label).update(str(exc))
            return
        if self.submit is None:
            self.dismiss(values)
            return
        self.query_one("#error", Label).update("applying…")
        self.send(values)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def send(self, values: dict[str, str]) -> None:
        assert self.submit is not None
        try:
            reply = self.submit(values)
        except Exception as exc:  # noqa: BLE001 - any refusal is shown in the dialog, in one line
            self.app.call_from_thread(self.query_one("#error", Label).update, visible(str(exc)) or type(exc).__name__)
            return
        self.app.call_from_thread(self.dismiss, reply if isinstance(reply, dict) else {})

    def action_cancel(self) -> None:
        self.dismiss(None)


def parse_settings(text: str) -> dict[str, str]:
    """`a.b=1 c.d=2h` as {"a.b": "1", "c.d": "2h"}: each word read as `loopwarden set` reads it (`parse_set`);
    ValueError (one line) on anything else."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot read that: {exc}") from None
    if not words:
        raise ValueError("type KEY=VALUE, e.g. limits.max_runtime=2h")
    return dict(parse_set(word, "setting") for word in words)
