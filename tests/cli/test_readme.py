"""Every command README.md shows in a ```sh block runs as written and does what the README says.

The commands are read from the README when the tests run. Each belongs to one story below (STORIES), which runs
it in bash in a profile and HOME of its own, with the real agent CLIs on the fake model servers; the README's
placeholders (s3, s3:g1, deploy@box2) are mapped to what the story made, in the `names` given at each call. A
command the README gains fails `test_every_command_the_readme_shows_belongs_to_a_story` until a story runs it:
add it to a story's list and run it there (`readme.run` for one that ends, `readme.start` for one that runs on,
a `Terminal` for one that opens the console)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwarden.runtime.hosts import SSH_ENV
from loopwarden.web.token import token_path
from tests.claude_code.conftest import QUIET, claude_bin  # noqa: F401 - the CLI fixture
from tests.cli.readme import Readme, Terminal, shown_commands, user_env
from tests.codex.codex_home import codex_bin, write_codex_home  # noqa: F401 - the CLI fixture
from tests.codex.fake_responses import FakeResponses, fake_model  # noqa: F401 - the fixture
from tests.fakes.anthropic_server import FakeAnthropic, Turn, assistant_turns, call, say
from tests.gemini.conftest import gemini_bin  # noqa: F401 - the CLI fixture
from tests.gemini.fake_gemini import FakeGemini, fake_gemini, run  # noqa: F401 - the fixture
from tests.gemini.fake_gemini import say as gemini_says
from tests.gemini.gemini_home import write_gemini_home
from tests.hosts.sshd_harness import start_box
from tests.kubernetes.helpers import Cluster
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, DATA, PY, ROOT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

STORIES: dict[str, list[str]] = {
    "try it": [
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/loopwarden demo",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest",
    ],
    "the console": [
        "loopwarden",
        "loopwarden web",
        "loopwarden console --host box1 --host deploy@box2",
    ],
    "supervise an agent": [
        'loopwarden run --set limits.max_runtime=5s -- python -c "import time; time.sleep(60)"',
        "loopwarden run --set limits.stall_timeout=2m -- make test",
        "export ANTHROPIC_API_KEY=sk-ant-...",
        'loopwarden run --adapter native -- loopwarden-agent "fix the failing test"',
        'loopwarden run --adapter claude-code -- --max-turns 30 --allowedTools=Bash,Read,Edit "fix the failing test"',
        "loopwarden hook install",
        'loopwarden run --adapter codex -- "fix the failing test"',
        "loopwarden hook install --agent codex",
        'loopwarden run --agent gemini -- "fix the failing test"',
        'loopwarden run --adapter acp -- qwen --experimental-acp -- "fix the failing test"',
        "loopwarden replay --format claude-code run.jsonl",
    ],
    "acting on sessions": [
        "loopwarden ls",
        "loopwarden logs -f s3",
        "loopwarden gates",
        'loopwarden approve s3:g1 --note "the seed data has a duplicate; remove it"',
        "loopwarden deny s3:g1",
        "loopwarden set s3 limits.max_runtime=2h",
        "loopwarden explain s3",
        "loopwarden kill s3",
        'loopwarden continue s3 --note "carry on"',
        "loopwarden takeover s3",
    ],
    "a working day": [
        "loopwarden run --tag team-a --tag nightly -d -- ./my-agent --task T1",
        "loopwarden ls --tag team-a",
        "loopwarden set s3 tag=urgent",
        "loopwarden logs s3 --since 10m --grep Traceback",
        "loopwarden audit --session s3 --since 1h",
        "loopwarden reset s3 --counter same_error",
        "loopwarden config check",
    ],
    "a worktree": [
        'loopwarden run --worktree --agent gemini -- "fix the failing test"',
        "loopwarden diff s1 --stat",
        "loopwarden diff s1",
        "loopwarden worktree s1 merge",
        "loopwarden worktree s1 discard",
    ],
    "a budget": [
        'loopwarden run --set limits.max_cost_usd=0.50 --adapter claude-code -- "fix the failing test"',
        "loopwarden gates",
        "loopwarden set s2 limits.max_cost_usd=1",
        "loopwarden set budgets.day_usd=20",
        "loopwarden status",
    ],
    "a cluster": [
        "kubectl apply -f deploy/kubernetes/rbac.yaml",
        "loopwarden run -d --on kubernetes:/loopwarden --image ghcr.io/me/agent:1 "
        "--set kubernetes.volume=claim:agents-work -- python3 agent.py",
        "loopwarden console",
    ],
}


def test_every_command_the_readme_shows_belongs_to_a_story() -> None:
    covered = {command for story in STORIES.values() for command in story}
    new = [command for command in shown_commands() if command not in covered]
    assert not new, ("README.md shows commands no test runs: " + "; ".join(repr(c) for c in new)
                     + ". Add each to a story of STORIES in tests/cli/test_readme.py and run it there")


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A HOME under /tmp with a short path: the demo's socket is under it (a unix socket path is short)."""
    with tempfile.TemporaryDirectory(prefix="lwrm-", dir="/tmp") as tmp:
        yield Path(tmp)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed to run the README's console commands in a real terminal")
    term = Terminal(tmp_path)
    yield term
    term.close()


def story(name: str, env: dict[str, str], cwd: Path) -> Readme:
    return Readme(STORIES[name], env, cwd)


# ---- try it --------------------------------------------------------------------------------------------------

def test_try_it(short_home: Path, terminal: Terminal) -> None:
    """The install is what .ci/run runs, verbatim; then the demo opens its console in a real terminal."""
    work = short_home / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(Path(PY).parent.parent)  # the venv the install made: this one
    readme = story("try it", user_env(short_home), work)
    ci = (ROOT / ".ci" / "run").read_text()
    install_and_demo, tests = readme.story
    *install, demo = install_and_demo.split(" && ")
    assert install == ["python3 -m venv .venv", ".venv/bin/pip install -q -e ."]
    assert "python3 -m venv .venv && " in ci and ".venv/bin/pip install -q -e '.[test]'" in ci
    assert tests in ci, "CI runs the README's test command verbatim"
    readme.line(tests)  # this suite is what it runs
    readme.line(install_and_demo)
    try:
        terminal.open(demo, readme.env, work)
        terminal.shows("repetition", "loop_gate", "healthy", timeout=90)
        terminal.keys("q")
        terminal.shows("[exit 0]")
    finally:
        subprocess.run([PY, "-m", "loopwarden", "demo", "--stop"], env=readme.env, capture_output=True, timeout=60,
                       check=False)
    readme.check_all_ran()


# ---- the console ---------------------------------------------------------------------------------------------

def test_the_console(lw: Harness, terminal: Terminal, tmp_path: Path) -> None:
    env = user_env(tmp_path / "home", LOOPWARDEN_HOME=str(lw.home))
    readme = story("the console", env, tmp_path)
    lw.launch(PY, str(AGENTS / "plain_chatter.py"), adapter="plain", name="chatter")
    terminal.open(readme.line("loopwarden"), env, tmp_path)
    terminal.shows("chatter", "s1")
    terminal.keys("q")
    terminal.shows("[exit 0]")

    web = readme.start("loopwarden web")
    try:
        address = web.stdout.readline().strip() if web.stdout else ""
        assert re.fullmatch(r"http://127\.0\.0\.1:8765/(\?token=[\w-]+)?", address), address
        token = token_path(lw.paths).read_text().strip()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the token becomes a cookie
        with browser.open(f"{address.split('?')[0]}?token={token}", timeout=30) as page:
            assert page.status == 200 and "loopwarden" in page.read().decode()
    finally:
        os.killpg(web.pid, signal.SIGINT)  # Ctrl-C
        assert web.wait(30) == 0, web.stderr.read() if web.stderr else ""


def test_the_console_on_several_machines(lw: Harness, terminal: Terminal, tmp_path: Path) -> None:
    """box1 and box2 are two ssh aliases of one sshd on loopback (a second daemon behind it); deploy is the
    user the test runs as."""
    (tmp_path / "remote").mkdir()
    (tmp_path / "ssh").mkdir()
    with Harness(tmp_path / "remote") as remote:
        for box in start_box(tmp_path / "ssh", remote):
            config = box.config.read_text()
            alias = config.split("\n", 1)[1].split("Host ", 1)[0]  # box's lines: HostName, Port, User, keys
            box.config.write_text(config + f"Host box1 box2\n{alias}")
            user = re.search(r"User (\S+)", alias)
            assert user
            remote.launch(PY, str(AGENTS / "plain_chatter.py"), adapter="plain", name="far-away")
            env = user_env(tmp_path / "home", LOOPWARDEN_HOME=str(lw.home), **{SSH_ENV: box.ssh_command})
            readme = story("the console", env, tmp_path)
            line = readme.line("loopwarden console --host box1 --host deploy@box2",
                               {"deploy@box2": f"{user[1]}@box2"})
            terminal.open(line, env, tmp_path)
            terminal.shows("box1", "box2", "far-away")
            terminal.keys("q")
            terminal.shows("[exit 0]")


# ---- supervise an agent --------------------------------------------------------------------------------------

@pytest.fixture
def agents_env(lw: Harness, tmp_path: Path, fake_api: FakeAnthropic, fake_model: FakeResponses,  # noqa: F811
               fake_gemini: FakeGemini, claude_bin: str, codex_bin: str, gemini_bin: str) -> dict[str, str]:  # noqa: F811
    """A user's shell with Claude Code, Codex and Gemini CLI, each on its fake model API, and `qwen` (the scripted
    ACP agent in its place)."""
    home = write_gemini_home(tmp_path / "home")
    codex_home = write_codex_home(tmp_path / "codex-home", fake_model.url)
    shims = tmp_path / "bin"
    shims.mkdir()
    qwen = shims / "qwen"
    qwen.write_text(f"#!/bin/sh\nexec {PY} {AGENTS / 'fake_acp_agent.py'} once\n")
    qwen.chmod(0o755)
    env = user_env(home, LOOPWARDEN_HOME=str(lw.home), CODEX_HOME=str(codex_home), GEMINI_API_KEY="dummy",
                   GOOGLE_GEMINI_BASE_URL=fake_gemini.url, **fake_api.env(),
                   LOOPWARDEN_CLAUDE=claude_bin, LOOPWARDEN_CODEX=codex_bin, LOOPWARDEN_GEMINI=gemini_bin, **QUIET)
    env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
    return env


def test_supervise_an_agent(lw: Harness, agents_env: dict[str, str], tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "Makefile").write_text("test:\n\tpython -c 'print(\"4 passed\")'\n")
    shutil.copy(DATA / "claude_stream-json__claude-clean__simple.jsonl", work / "run.jsonl")
    readme = story("supervise an agent", agents_env, work)
    ended = readme.run('loopwarden run --set limits.max_runtime=5s -- python -c "import time; time.sleep(60)"',
                       code=10)
    assert "session s1 terminated(max_runtime)" in ended.stdout + ended.stderr  # as the README's comment says
    readme.run("loopwarden run --set limits.stall_timeout=2m -- make test")

    readme.run('loopwarden run --adapter native -- loopwarden-agent "fix the failing test"',  # in the same shell
               first="export ANTHROPIC_API_KEY=sk-ant-...")
    readme.run('loopwarden run --adapter claude-code -- --max-turns 30 --allowedTools=Bash,Read,Edit '
               '"fix the failing test"')
    readme.run("loopwarden hook install")
    assert "loopwarden hook" in (work / ".claude" / "settings.json").read_text()  # for sessions in this folder
    readme.run('loopwarden run --adapter codex -- "fix the failing test"')
    readme.run("loopwarden hook install --agent codex")
    assert any("loopwarden hook" in f.read_text() for f in Path(agents_env["CODEX_HOME"]).glob("*.json"))
    readme.run('loopwarden run --agent gemini -- "fix the failing test"')
    readme.run('loopwarden run --adapter acp -- qwen --experimental-acp -- "fix the failing test"')
    assert (work / "held-marker").exists()  # the ACP agent's call was let through
    replay = readme.run("loopwarden replay --format claude-code run.jsonl")
    assert "final state: running (the recording ends here" in replay.stderr, replay.stderr
    readme.check_all_ran()


# ---- acting on sessions --------------------------------------------------------------------------------------

def test_acting_on_sessions(lw: Harness, agents_env: dict[str, str], fake_api: FakeAnthropic, terminal: Terminal,
                            tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    readme = story("acting on sessions", agents_env, work)
    asking, refused = lw.scenario("gate_request"), lw.scenario("gate_request")
    sleeper = lw.launch(PY, "-c", "import time; time.sleep(600)", adapter="plain", name="sleeper")
    fake_api.play([say("ECHOTANGO done")], max_turns=5)
    claude = lw.run_detached("--max-turns", "3", "ECHOTANGO: fix the failing test", adapter="claude-code",
                             cwd=work, env=agents_env)
    for sid in (asking, refused):
        lw.wait_state(sid, "gated", timeout=60)
    lw.wait_state(claude, "exited")

    listed = readme.run("loopwarden ls").stdout
    assert all(sid in listed for sid in (asking, refused, sleeper, claude)), listed
    follow = readme.start("loopwarden logs -f s3", {"s3": asking})
    gates = readme.run("loopwarden gates").stdout
    assert f"{asking}:g1" in gates and f"{refused}:g1" in gates
    readme.run('loopwarden approve s3:g1 --note "the seed data has a duplicate; remove it"', {"s3:g1": f"{asking}:g1"})
    assert follow.wait(60) == 0, "logs -f ends with the session, with its exit code"
    assert "legacy_users" in (follow.stdout.read() if follow.stdout else "")
    readme.run("loopwarden deny s3:g1", {"s3:g1": f"{refused}:g1"})
    assert lw.wait_state(refused, "terminated")["termination"] == "loop_gate_denied"
    readme.run("loopwarden set s3 limits.max_runtime=2h", {"s3": sleeper})
    assert "loop_gate_denied" in readme.run("loopwarden explain s3", {"s3": refused}).stdout
    readme.run("loopwarden kill s3", {"s3": sleeper})
    lw.wait_state(sleeper, "terminated")

    fake_api.play([say("ECHOTANGO done"), say("CARRIED ON")], max_turns=5)
    readme.run('loopwarden continue s3 --note "carry on"', {"s3": claude}, timeout=120)
    carried = wait_for(lambda: next((a["target"] for a in lw.request("actions", session=claude)
                                     if a["action"] == "continue"), None), 60, "the continued session")
    lw.wait_state(carried, "exited", timeout=90)

    env = {k: v for k, v in agents_env.items() if k != "IS_SANDBOX"}  # as root, IS_SANDBOX changes what claude runs
    terminal.open(readme.line("loopwarden takeover s3", {"s3": carried}), env, work)
    terminal.shows("ECHOTANGO", timeout=90)
    terminal.keys("-l", "/exit")
    terminal.keys("Enter")
    terminal.shows("under loopwarden's supervision?", timeout=60)
    terminal.keys("n", "Enter")
    terminal.shows("[exit 0]")
    readme.check_all_ran()


# ---- a working day -------------------------------------------------------------------------------------------

def test_a_working_day(lw: Harness, agents_env: dict[str, str], tmp_path: Path) -> None:
    """./my-agent is a small script that prints a traceback and goes on working; a second, untagged session
    shows that `ls --tag` and the filters leave it out."""
    work = tmp_path / "project"
    work.mkdir()
    agent = work / "my-agent"
    agent.write_text("#!/bin/sh\necho \"working on $2\"\necho 'Traceback (most recent call last):'\nexec sleep 600\n")
    agent.chmod(0o755)
    other = lw.launch(PY, str(AGENTS / "plain_chatter.py"), adapter="plain", name="untagged")
    readme = story("a working day", agents_env, work)
    sid = readme.run("loopwarden run --tag team-a --tag nightly -d -- ./my-agent --task T1").stdout.strip()
    assert re.fullmatch(r"s\d+", sid), sid
    names = {"s3": sid}
    listed = readme.run("loopwarden ls --tag team-a").stdout
    assert sid in listed and "team-a" in listed and other not in listed, listed
    readme.run("loopwarden set s3 tag=urgent", names)
    assert "urgent" in wait_for(lambda: next((" ".join(s.get("tags") or []) for s in lw.request("list")
                                              if s["id"] == sid and "urgent" in (s.get("tags") or [])), None),
                                30, "the new tag")
    found = wait_for(lambda: (out := readme.run("loopwarden logs s3 --since 10m --grep Traceback", names).stdout)
                     and "Traceback" in out and out, 30, "the traceback in the store")
    assert "working on T1" not in found, found  # only what matches
    audit = readme.run("loopwarden audit --session s3 --since 1h", names).stdout
    assert "tag" in audit and other not in audit, audit
    readme.run("loopwarden reset s3 --counter same_error", names)
    assert any(a["action"] == "reset" for a in lw.request("actions", session=sid))
    checked = readme.run("loopwarden config check")
    assert checked.returncode == 0, checked.stderr
    readme.check_all_ran()


# ---- a worktree ----------------------------------------------------------------------------------------------

def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=30).stdout


def test_a_worktree(lw: Harness, agents_env: dict[str, str], fake_gemini: FakeGemini,  # noqa: F811
                    terminal: Terminal, tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    _git(work, "init", "-q", "-b", "master")
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    _git(work, "add", ".")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "calc")
    fix = "sed -i 's/a - b/a + b/' calc.py && printf 'from calc import add\\n\\n\\ndef test_add():\\n' > test_calc.py"
    fake_gemini.play([run(fix), gemini_says("Fixed."), run("echo more > notes.txt"), gemini_says("Noted.")])
    readme = story("a worktree", {**agents_env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                  "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}, work)
    launched = readme.run('loopwarden run --worktree --agent gemini -- "fix the failing test"').stderr
    assert "session s1 works in its own worktree " in launched and "(branch loopwarden/s1," in launched
    assert "your checkout is left as it is" in launched and "a - b" in (work / "calc.py").read_text()
    stat = readme.run("loopwarden diff s1 --stat").stdout.splitlines()
    shown = [re.escape(line.strip()).replace(re.escape("~/.local/share/loopwarden/worktrees/s1"), r"\S+/s1")
             .replace("1332623d0404", "[0-9a-f]{12}") for line in readme.output("loopwarden diff s1 --stat")]
    assert len(stat) == len(shown), stat
    assert all(re.fullmatch(s, line.strip()) for s, line in zip(shown, stat, strict=True)), stat
    assert "+    return a + b" in readme.run("loopwarden diff s1").stdout
    terminal.open(readme.line("loopwarden worktree s1 merge"), readme.env, work)  # it asks on the terminal
    terminal.shows("Merge it? [y/N]:")
    terminal.keys("y", "Enter")
    terminal.shows("[exit 0]")
    assert re.search(r"merged session s1 into master \(commit \w+\); the worktree and branch loopwarden/s1 are "
                     r"removed", " ".join(terminal.screen().split())), terminal.screen()
    assert "a + b" in (work / "calc.py").read_text()
    readme.run('loopwarden run --worktree --agent gemini -- "fix the failing test"')  # s2, to throw away
    terminal.open(readme.line("loopwarden worktree s1 discard", {"s1": "s2"}), readme.env, work)
    terminal.shows("[y/N]:")
    terminal.keys("y", "Enter")
    terminal.shows("[exit 0]")
    assert "loopwarden/s2" not in _git(work, "branch") and not (work / "notes.txt").exists()
    readme.check_all_ran()


# ---- a budget ------------------------------------------------------------------------------------------------

def test_a_budget(lw: Harness, agents_env: dict[str, str], fake_api: FakeAnthropic, tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    raised = threading.Event()

    def spend(body: dict[str, Any]) -> Turn:
        """Calls, each another command, until the test raised the budget; then the turn ends."""
        if raised.is_set():
            return say("Done.")
        return call("Bash", {"command": f"echo step {assistant_turns(body)}", "description": "a step"})

    fake_api.play(spend, max_turns=200)
    lw.launch(PY, "-c", "print('first')", adapter="plain")  # s1: the budget's session is s2, as in the README
    readme = story("a budget", agents_env, work)
    run = readme.start('loopwarden run --set limits.max_cost_usd=0.50 --adapter claude-code -- "fix the failing test"')
    try:
        wait_for(lambda: any(s["id"] == "s2" and s["state"] == "gated" for s in lw.request("list")), 180,
                 "the budget's gate")
        gates = readme.run("loopwarden gates").stdout
        shown = " ".join(" ".join(readme.output("loopwarden gates")).split())  # the README wraps the line
        pattern = re.escape(shown).replace("runaway", r"\S+").replace(r"3\.5s", r"\S+").replace(r"0\.60", r"[\d.]+")
        assert re.search(pattern, " ".join(gates.split())), (pattern, gates)
        raised.set()
        readme.run("loopwarden set s2 limits.max_cost_usd=1")
        assert run.wait(120) == 0, run.stderr.read() if run.stderr else ""
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
            run.wait(30)
    readme.run("loopwarden set budgets.day_usd=20")
    status = readme.run("loopwarden status").stdout
    assert "$" in status, status
    assert lw.status("s2")["cost"]["cost_usd"] > 0.5  # it went on past the first budget
    readme.check_all_ran()


# ---- a cluster -----------------------------------------------------------------------------------------------

def test_a_cluster(lw: Harness, cluster: Cluster, tmp_path: Path, terminal: Terminal) -> None:
    """The README's manifest applied as written, in a namespace of the test's own; an agent polling in a pod there,
    held at its gate; the console shows it on its node and pod, and `g`, `a`, `y` let it go on. The test cluster
    pulls no images and provisions no claims: the README's image is its local Debian-and-python3 image, its claim
    a directory of the node (this machine), where agent.py is (a poller: each call's output new, so only its gate
    stops it, after repetition.progress_gate_after calls)."""
    admin = str(cluster.kubeconfig)
    if shutil.which("kubectl") is None:
        pytest.skip("no kubectl on PATH: the README's first command is a kubectl one")
    namespace = f"lw-readme-{secrets.token_hex(3)}"
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text((ROOT / "deploy" / "kubernetes" / "rbac.yaml").read_text()
                    .replace("name: loopwarden\n", f"name: {namespace}\n", 1)  # the Namespace's own name
                    .replace("namespace: loopwarden", f"namespace: {namespace}"))
    work = tmp_path / "work"
    work.mkdir()
    poller = (AGENTS / "pod_looper.py").read_text().replace('"--changing" in sys.argv[1:]', "True")
    (work / "agent.py").write_text(poller)
    os.chown(work, 1000, 1000)  # kubernetes.agent_user's, as a claim's files would be (fsGroup)
    env = user_env(tmp_path / "home", LOOPWARDEN_HOME=str(lw.home), KUBECONFIG=admin)
    readme = story("a cluster", env, tmp_path)
    names = {"deploy/kubernetes/rbac.yaml": str(rbac), "kubernetes:/loopwarden": f"kubernetes:/{namespace}",
             "ghcr.io/me/agent:1": cluster.image, "claim:agents-work": f"host:{work}"}
    try:
        applied = readme.run("kubectl apply -f deploy/kubernetes/rbac.yaml", names).stdout
        assert f"namespace/{namespace} created" in applied and "role.rbac.authorization.k8s.io/loopwarden-sessions" \
            in applied, applied
        ran = readme.run("loopwarden run -d --on kubernetes:/loopwarden --image ghcr.io/me/agent:1 --set "
                         "kubernetes.volume=claim:agents-work -- python3 agent.py", names, timeout=180)
        sid = ran.stdout.strip()
        gated = lw.wait_state(sid, "gated", timeout=120)
        pod = gated["pod"]
        assert pod["namespace"] == namespace and pod["node"] == cluster.node, pod
        terminal.open(readme.line("loopwarden console"), env, tmp_path)
        terminal.shows(sid, "gated", f"{pod['node']}/{pod['pod']}")
        terminal.keys("g")
        terminal.shows(f"{sid}:{gated['pending_gates'][0]}")
        terminal.keys("a")
        terminal.shows("The call it holds goes ahead")  # the confirmation itself, not the key bar's "a Approve"
        terminal.keys("y")
        wait_for(lambda: any(a["action"] == "approve" for a in lw.request("actions", session=sid)), 60,
                 "the approval in the audit log")
        wait_for(lambda: lw.status(sid)["tool_calls"] > gated["tool_calls"], 60, "the pod's agent to go on")
        terminal.keys("q")
        readme.check_all_ran()
        assert lw.cli("kill", sid).returncode == 0
    finally:
        terminal.close()
        subprocess.run(["kubectl", "delete", "namespace", namespace, "--wait=false"], env=env, capture_output=True,
                       timeout=60, check=False)
