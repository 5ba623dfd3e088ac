"""Fixtures shared by every test folder."""

from __future__ import annotations

import compileall
import signal
from pathlib import Path

import pytest

from tests.agents import npm_agents
from tests.fakes.anthropic_server import fake_api  # noqa: F401 - the fake Messages API, for any folder's tests
from tests.support.cluster import cluster, pytest_runtest_protocol  # noqa: F401 - the test cluster, waited for
from tests.support.daemon import lw  # noqa: F401 - a real daemon of its own, for any test that asks for `lw`
from tests.support.paths import ROOT


def pytest_sessionstart(session: pytest.Session) -> None:
    """Bytecode for loopwarden written once, before any test: hundreds of daemons, CLI calls and scripted
    agents import it in fresh processes, and where PYTHONDONTWRITEBYTECODE is set (as on CI) none of them
    writes it, so each compiled every module again (0.15 s a daemon start). Importing reads bytecode whatever
    that variable says; compileall skips what is already up to date."""
    if not hasattr(session.config, "workerinput"):  # once, in the controller (pytest-xdist's workers come after)
        compileall.compile_dir(ROOT / "loopwarden", quiet=2)
    # A suite started in the background of a shell without job control inherits SIGINT ignored, and so would every
    # process it starts, where the tests' Ctrl-C would then do nothing: the processes start with it as a terminal
    # gives it (a handled signal is reset to its default in a new program; an ignored one stays ignored).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def npm_agents_root() -> Path:
    """The project's `.agents/` npm folder with Gemini CLI and claude-agent-acp at their pinned versions,
    installed on first use (tests/agents/npm_agents.py); skips only where npm is missing."""
    try:
        return npm_agents.install()
    except npm_agents.NpmMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, the loop the daemon and Textual use; trio (installed with selenium for the
    web tests) would otherwise be offered to tests that do not pin a backend of their own."""
    return "asyncio"
