"""The console as `loopwarden web` runs it for a browser: the terminal console, minus textual-serve's variables
in what it hands on (a session launched from it with `n` gets the environment of `loopwarden web`), and ended
when `loopwarden web` is gone (killed, it cannot end its consoles; their input does not tell them)."""

from __future__ import annotations

import os

from ..widgets.app import ConsoleApp

# set by textual-serve for the console process (the web driver, its size); read once the driver has started
PARENT_CHECK_SECONDS = 1.0
SERVED_ENV = ("TEXTUAL_DRIVER", "TEXTUAL_FPS", "TEXTUAL_COLOR_SYSTEM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION",
              "COLUMNS", "ROWS")


class ServedConsole(ConsoleApp):
    """ConsoleApp for a browser. Textual calls each class's on_mount in turn: this one adds to the console's."""

    def on_mount(self) -> None:
        for name in SERVED_ENV:
            os.environ.pop(name, None)
        self._server_pid = os.getppid()  # `loopwarden web` starts its consoles itself, with no shell between
        self.set_interval(PARENT_CHECK_SECONDS, self._exit_without_server)

    def _exit_without_server(self) -> None:
        if os.getppid() != self._server_pid:  # re-parented: the server died
            self.exit()
