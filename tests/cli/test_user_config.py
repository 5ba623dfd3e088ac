"""The user config from the command line: `config path`, `check` and `show`, and `run` taking a project's launch
defaults (a flag given wins), against a real daemon."""

from __future__ import annotations

from pathlib import Path

from loopwarden.supervisor.user_config import EXAMPLE
from tests.support.daemon import Harness
from tests.support.paths import PY

SLEEP = (PY, "-c", "import time; time.sleep(60)")


def write_config(lw: Harness, text: str) -> Path:
    path = lw.paths.config_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def detached(lw: Harness, *args: str, cwd: Path) -> tuple[str, str]:
    """`run --detach ARGS -- sleep` in `cwd`: the session's id and what run said on stderr."""
    proc = lw.cli("run", "--detach", *args, "--", *SLEEP, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), proc.stderr


def test_run_applies_the_deepest_projects_defaults_and_says_so_in_one_line(lw: Harness, tmp_path: Path) -> None:
    api = tmp_path / "api"
    (api / "src").mkdir(parents=True)
    write_config(lw, f'[projects."{tmp_path}"]\nadapter = "native"\n\n'
                     f'[projects."{api}"]\nadapter = "plain"\nlimits.max_runtime = "2h"\nlimits.max_iterations = 7\n')
    sid, said = detached(lw, cwd=api / "src")
    lines = [line for line in said.splitlines() if "project defaults" in line]
    assert lines == [f"loopwarden: project defaults from {api}: adapter plain, limits.max_runtime=2h, "
                     "limits.max_iterations=7"]
    status = lw.status(sid)
    assert (status["adapter"], status["max_runtime"]) == ("plain", 7200)
    lw.request("kill", session=sid)


def test_a_flag_given_to_run_beats_the_projects_default(lw: Harness, tmp_path: Path) -> None:
    write_config(lw, f'[projects."{tmp_path}"]\nadapter = "native"\nlimits.max_runtime = "2h"\n'
                     'limits.max_iterations = 7\n')
    sid, said = detached(lw, "--adapter", "plain", "--set", "limits.max_runtime=30m", cwd=tmp_path)
    assert f"loopwarden: project defaults from {tmp_path}: limits.max_iterations=7" in said.splitlines()
    status = lw.status(sid)
    assert (status["adapter"], status["max_runtime"]) == ("plain", 1800)
    lw.request("kill", session=sid)


def test_outside_every_project_run_says_nothing_of_them(lw: Harness, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    write_config(lw, f'[projects."{tmp_path / "api"}"]\nadapter = "native"\n')
    sid, said = detached(lw, "--adapter", "plain", cwd=tmp_path / "elsewhere")
    assert "project defaults" not in said and lw.status(sid)["max_runtime"] == 4 * 3600
    lw.request("kill", session=sid)


def test_config_path_check_and_show_name_the_file_and_its_settings(lw: Harness, tmp_path: Path) -> None:
    path = lw.paths.config_file
    where = lw.cli("config", "path")
    assert where.stdout == f"{path}\n" and "does not exist yet" in where.stderr
    write_config(lw, f'[console]\ntheme = "nord"\n[console.keys]\nkill = "ctrl+x"\n'
                     f'[projects."{tmp_path}"]\nworktree = true\nlimits.max_runtime = "2h"\n')
    assert lw.cli("config", "check").returncode == 0
    shown = lw.cli("config", "show").stdout
    tail = shown[shown.index("# user config"):]
    assert tail == (f"# user config: {path} (exists)\n\n[console]\ntheme = \"nord\"\n\n[console.keys]\n"
                    f"kill = \"ctrl+x\"\n\n[projects.\"{tmp_path}\"]\nworktree = true\nlimits.max_runtime = \"2h\"\n")


def test_config_check_and_show_say_each_problem_in_one_line(lw: Harness) -> None:
    write_config(lw, '[console]\ntheme = "nordd"\n[console.keys]\napprove = "q"\n')
    check = lw.cli("config", "check")
    assert check.returncode == 1
    assert check.stderr.splitlines() == [
        "loopwarden: console.keys.approve: 'q' is already quit's key; the default is kept",
        "loopwarden: console.theme: unknown theme 'nordd' (did you mean nord?); the default is kept"]
    assert "# warning: console.keys.approve: 'q' is already quit's key" in lw.cli("config", "show").stdout
    path = write_config(lw, '[console]\ntheme = "nord\n')
    check = lw.cli("config", "check")
    assert check.returncode == 1 and len(check.stderr.splitlines()) == 1
    assert str(path) in check.stderr and "line 2" in check.stderr and "Traceback" not in check.stderr
    shown = lw.cli("config", "show")
    assert shown.returncode == 0 and f"# warning: {path}: not valid TOML" in shown.stdout


def test_config_check_help_teaches_with_an_example_file(lw: Harness) -> None:
    helped = lw.cli("config", "check", "--help").stdout
    assert '[projects."~/code/api"]' in helped and 'kill = "ctrl+x"' in helped and "[console]" in helped


def test_a_config_file_or_an_environment_variable_beats_the_projects_limit(lw: Harness, tmp_path: Path) -> None:
    write_config(lw, f'[projects."{tmp_path}"]\nadapter = "plain"\nlimits.max_runtime = "2h"\n')
    chosen = tmp_path / "chosen.toml"
    chosen.write_text('[limits]\nmax_runtime = "30m"\n')
    sid, said = detached(lw, "--config", str(chosen), cwd=tmp_path)
    assert f"loopwarden: project defaults from {tmp_path}: adapter plain" in said.splitlines()
    assert lw.status(sid)["max_runtime"] == 1800  # the file named on the command line, not the project's 2h
    lw.request("kill", session=sid)
    proc = lw.cli("run", "--detach", "--", *SLEEP, cwd=tmp_path, env={"LOOPWARDEN_LIMITS_MAX_RUNTIME": "20m"})
    assert proc.returncode == 0, proc.stderr
    assert lw.status(proc.stdout.strip())["max_runtime"] == 1200
    lw.request("kill", session=proc.stdout.strip())


def test_a_key_that_is_no_keys_name_is_refused_in_one_line_and_the_action_keeps_its_own(lw: Harness) -> None:
    write_config(lw, '[console.keys]\nkill = "Ctrl+X"\nquit = "ctl+q"\napprove = "F5"\n'
                     'deny = "ctrl+shift+d"\npause = "f5,P,ctrl+f6"\n')
    check = lw.cli("config", "check")
    assert check.returncode == 1
    assert check.stderr.splitlines() == [
        f"loopwarden: console.keys.{action}: {key!r} is not a key's name (such as ctrl+x, K, f5, escape, space); "
        "the default is kept" for action, key in (("kill", "Ctrl+X"), ("quit", "ctl+q"), ("approve", "F5"))]
    shown = lw.cli("config", "show").stdout
    assert 'deny = "ctrl+shift+d"' in shown and 'pause = "f5,P,ctrl+f6"' in shown
    assert "kill =" not in shown


def test_a_key_the_detail_the_gates_queue_or_textual_keeps_is_refused_and_the_example_takes_none(
        lw: Harness) -> None:
    write_config(lw, '[console.keys]\nlimits = "l"\nkill = "ctrl+q"\nquit = "tab"\npause = "ctrl+p"\n')
    check = lw.cli("config", "check")
    assert check.returncode == 1
    assert check.stderr.splitlines() == [
        "loopwarden: console.keys.limits: 'l' is already a key of the session detail; the default is kept",
        "loopwarden: console.keys.kill: 'ctrl+q' is already a key of Textual's own; the default is kept",
        "loopwarden: console.keys.quit: 'tab' is already a key of Textual's own; the default is kept",
        "loopwarden: console.keys.pause: 'ctrl+p' is already a key of Textual's own; the default is kept"]
    write_config(lw, EXAMPLE)  # the example `config check --help` and docs/configuration.md show
    assert lw.cli("config", "check").returncode == 0, "the example has a problem"
