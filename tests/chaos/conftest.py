"""The chaos suite: a real daemon attacked as an untrusted agent or a bad day would (issue 10).

Each test states a bound (memory, time, loss) and asserts it against a real daemon, real
processes, real sockets and a real SQLite file.
"""

from tests.hosts.conftest import box, remote  # noqa: F401 - an sshd box, for the doors of `--host`
from tests.web.conftest import web  # noqa: F401 - `loopwarden web`, for the web console's door
