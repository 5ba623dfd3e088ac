"""The console as `loopwarden web` runs it for a browser: the terminal console, minus textual-serve's variables
in what it hands on (a session launched from it with `n` gets the environment of `loopwarden web`), and ended
when `loopwarden web` is gone (killed with SIGKILL, it cannot end its consoles, and their closed pipes do not
end them): the kernel sends SIGTERM when the server dies (PR_SET_PDEATHSIG), and a watch on the parent exits
the process within EXIT_GRACE_SECONDS even if the app cannot finish."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

from ..widgets.app import ConsoleApp

SERVER_ENV = "LOOPWARDEN_WEB_SERVER"  # the pid of `loopwarden web`, set for its consoles
PARENT_CHECK_SECONDS = 0.5
EXIT_GRACE_SECONDS = 3.0  # once the server is gone, the app has this long to finish before os._exit
PR_SET_PDEATHSIG = 1
# set by textual-serve for the console process (the web driver, its size); read once the driver has started
SERVED_ENV = ("TEXTUAL_DRIVER", "TEXTUAL_FPS", "TEXTUAL_COLOR_SYSTEM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION",
              "COLUMNS", "ROWS", SERVER_ENV)


class ServedConsole(ConsoleApp):
    """ConsoleApp for a browser. Textual calls each class's on_mount in turn: this one adds to the console's."""

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run as `loopwarden web`'s console process (tests drive the app with run_test, untied)."""
        tie_to_server(self._exit_without_server)
        return super().run(*args, **kwargs)

    def on_mount(self) -> None:
        for name in SERVED_ENV:
            os.environ.pop(name, None)

    def _exit_without_server(self) -> None:
        try:
            self.call_from_thread(self.exit)
        except RuntimeError:  # not running yet, or already stopping
            pass


def tie_to_server(politely: Any) -> int:
    """End this process when `loopwarden web` ends: SIGTERM from the kernel, and a thread that sees the parent
    change, calls `politely()`, then exits for sure after EXIT_GRACE_SECONDS. Returns the server's pid."""
    try:
        server = int(os.environ.get(SERVER_ENV, ""))
    except ValueError:
        server = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watch below still ends it
    if os.getppid() != server:  # the server died before the signal was armed
        os._exit(0)

    def watch() -> None:
        while os.getppid() == server:
            time.sleep(PARENT_CHECK_SECONDS)
        politely()
        time.sleep(EXIT_GRACE_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="loopwarden-web-parent", daemon=True).start()
    return server
