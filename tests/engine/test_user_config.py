"""The user config's reading and checks (supervisor/user_config.py), and the engine's config beside it in one file."""

from __future__ import annotations

from pathlib import Path

from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.user_config import EXAMPLE, check_keys, check_theme, read_user_config


def test_the_example_file_reads_without_a_warning_and_the_engine_reads_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(EXAMPLE + "\n[notify]\nevents = [\"gate\"]\n")
    user = read_user_config(path)
    assert (user.exists, user.error, user.warnings) == (True, None, ())
    assert user.theme == "gruvbox" and user.keys == {"kill": "ctrl+x", "limits": "ctrl+l"}
    (api,) = user.projects
    assert api.root == Path.home() / "code" / "api"
    assert api.describe() == "adapter claude-code, worktree on, limits.max_runtime=2h, limits.max_cost_usd=5.0"
    assert api.sets() == ["limits.max_runtime=2h", "limits.max_cost_usd=5"]
    assert load_config(file=path, env={}).notify.events == ["gate"]  # [console] and [projects] are not its keys


def test_a_missing_file_is_an_empty_one(tmp_path: Path) -> None:
    user = read_user_config(tmp_path / "config.toml")
    assert (user.exists, user.error, user.keys, user.projects) == (False, None, {}, ())


def test_bad_toml_is_one_line_naming_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for text, line in (('[console]\ntheme = "nord\n', "line 2"), ("[console]\ntheme =", "line 2")):
        path.write_text(text)
        user = read_user_config(path)
        assert user.error is not None and "\n" not in user.error
        assert str(path) in user.error and line in user.error and user.theme is None


def test_the_deepest_project_holding_the_directory_wins(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[projects."{tmp_path}"]\nadapter = "native"\n'
                    f'[projects."{tmp_path / "api"}"]\nadapter = "plain"\n')
    user = read_user_config(path)
    assert user.project_for(tmp_path / "api" / "src").adapter == "plain"  # type: ignore[union-attr]
    assert user.project_for(tmp_path / "web").adapter == "native"  # type: ignore[union-attr]
    assert user.project_for(tmp_path / "apix").adapter == "native"  # type: ignore[union-attr]
    assert user.project_for(tmp_path.parent) is None


def test_what_a_project_cannot_take_is_a_warning_and_left_out(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[projects."relative/dir"]\nadapter = "plain"\n'
                    '[projects."/srv/api"]\nworktree = "yes"\nlimits.max_runtim = "2h"\nlimits.max_tokens = "lots"\n'
                    'colour = "red"\n')
    user = read_user_config(path)
    assert [p.name for p in user.projects] == ["/srv/api"]
    assert user.projects[0].limits == {} and user.projects[0].worktree is None
    said = "\n".join(user.warnings)
    assert len(user.warnings) == 5
    for part in ('projects."relative/dir": not an absolute path', 'projects."/srv/api".worktree: expected true',
                 "limits.max_runtim: unknown limit (did you mean max_runtime?)", "limits.max_tokens",
                 'projects."/srv/api".colour: unknown setting'):
        assert part in said


def test_a_key_another_action_keeps_or_an_unknown_action_keeps_the_default() -> None:
    defaults = {"kill": ["ctrl+k", "K"], "quit": ["q"], "approve": ["a"]}
    table = {"j": "the sessions table"}
    chosen, warnings = check_keys({"kill": "ctrl+x", "approve": "q", "nope": "z"}, defaults, reserved=table)
    assert chosen == {"kill": "ctrl+x"}
    assert warnings == ["console.keys.approve: 'q' is already quit's key; the default is kept",
                        "console.keys.nope: unknown action; it accepts approve, kill, quit; ignored"]
    assert check_keys({"kill": "j"}, defaults, reserved=table)[1] == [
        "console.keys.kill: 'j' is already a key of the sessions table; the default is kept"]


def test_rebindings_are_judged_together_so_order_does_not_matter_and_two_actions_can_swap_keys() -> None:
    defaults = {"kill": ["ctrl+k", "K"], "quit": ["q"], "approve": ["a"]}
    for wanted in ({"quit": "K", "kill": "ctrl+x"}, {"kill": "ctrl+x", "quit": "K"}):
        assert check_keys(wanted, defaults) == ({"kill": "ctrl+x", "quit": "K"}, [])
    assert check_keys({"approve": "q", "quit": "a"}, defaults) == ({"approve": "q", "quit": "a"}, [])
    # kill's new key is refused, so it keeps K, which quit then cannot take
    chosen, warnings = check_keys({"quit": "K", "kill": "a"}, defaults)
    assert chosen == {} and warnings == ["console.keys.quit: 'K' is already kill's key; the default is kept",
                                         "console.keys.kill: 'a' is already approve's key; the default is kept"]
    assert check_keys({"kill": "z", "quit": "z"}, defaults)[0] == {"kill": "z"}  # the first written keeps it


def test_a_project_named_through_a_symlink_holds_the_real_directory_the_shell_is_in(tmp_path: Path) -> None:
    (tmp_path / "real" / "api" / "src").mkdir(parents=True)
    (tmp_path / "code").symlink_to(tmp_path / "real")
    path = tmp_path / "config.toml"
    path.write_text(f'[projects."{tmp_path / "code" / "api"}/"]\nadapter = "plain"\n')
    user = read_user_config(path)
    assert user.project_for(tmp_path / "real" / "api" / "src").adapter == "plain"  # type: ignore[union-attr]
    assert user.project_for(tmp_path / "code" / "api").adapter == "plain"  # type: ignore[union-attr]
    assert user.project_for(tmp_path / "real" / "api2") is None


def test_an_unknown_theme_keeps_the_default() -> None:
    assert check_theme("nord", ["nord", "dracula"]) == ("nord", [])
    assert check_theme("nrd", ["nord", "dracula"]) == (
        None, ["console.theme: unknown theme 'nrd' (did you mean nord?); the default is kept"])


def test_the_deepest_project_is_judged_by_the_real_directories(tmp_path: Path) -> None:
    (tmp_path / "data" / "code" / "api").mkdir(parents=True)
    (tmp_path / "home" / "u").mkdir(parents=True)
    (tmp_path / "home" / "u" / "code").symlink_to(tmp_path / "data" / "code")
    path = tmp_path / "config.toml"
    path.write_text(f'[projects."{tmp_path / "home" / "u" / "code"}"]\nadapter = "native"\n'
                    f'[projects."{tmp_path / "data" / "code" / "api"}"]\nadapter = "plain"\n')
    user = read_user_config(path)
    assert user.project_for(tmp_path / "data" / "code" / "api").adapter == "plain"  # type: ignore[union-attr]
    assert user.project_for(tmp_path / "data" / "code" / "web").adapter == "native"  # type: ignore[union-attr]
