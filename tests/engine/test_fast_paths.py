"""The engine's shortcuts (issue 16, replay at half of raw json.loads) give what the plain code they skip
would: each is compared with that plain code over many generated inputs, the ones it must not miss included."""

from __future__ import annotations

import posixpath
import random

from loopwarden.supervisor.guards.rereads import normal_path


def test_a_path_is_normalised_as_normpath_would() -> None:
    r = random.Random(16)
    parts = ["src", "a.py", ".", "..", "", ".git", "x..y", "..z", "dir.d", "~", "-"]
    paths = ["/", "//", "///", ".", "..", "a", "a/", "/a//b", "./a", "../a", "a/.", "a/..", "a/./b", ".hidden",
             "/tmp/x.py", "src/app/models/user_service.py"]
    paths += [("/" if r.random() < 0.5 else "") + "/".join(r.choice(parts) for _ in range(r.randint(1, 5)))
              for _ in range(5000)]
    for path in paths:
        if path:
            assert normal_path(path) == posixpath.normpath(path), path


def test_a_check_command_is_told_as_the_word_by_word_test_would() -> None:
    from loopwarden.supervisor.config import load_config
    from loopwarden.supervisor.guards.reflections import ReflectionsGuard

    guard = ReflectionsGuard(load_config(env={}))

    def plain(command: str) -> bool:
        if any(word.rpartition("/")[2] in guard.first_words for word in command.split()):
            return guard.pattern.search(command) is not None
        return False

    r = random.Random(16)
    words = ["pytest", "-q", "tests/x.py", "./node_modules/.bin/jest", "/usr/bin/make", "test", "ls", "cargo", "go",
             "vet", "npm", "run", "lint", "echo", "mypy", "src", "&&", "|", "grep", "x/pytest", "pytestx", "-k"]
    commands = [" ".join(r.choice(words) for _ in range(r.randint(1, 6))) for _ in range(5000)]
    assert sum(map(plain, commands)) > 500  # check commands, and near misses beside them
    for command in commands:
        assert guard._is_check(command) == plain(command), command
