"""`loopwarden config prices`: the price table as the config makes it, or the row a model id is priced by."""

from __future__ import annotations

import subprocess

from tests.support.paths import PY


def lw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "loopwarden", *args], capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


def test_config_prices_shows_the_table_with_the_configs_rows_and_a_models_row() -> None:
    done = lw("config", "prices", "--set", "prices.models=gpt-5.5=1.5,12;gpt-5=2,20")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]}
    assert rows["gpt-5.5"] == ["1.5", "12", "1.5", "1.5", "(prices.models)"]
    assert rows["gpt-5"] == ["2", "20", "2", "2", "(prices.models)"]
    assert rows["claude-haiku-4-5"] == ["1", "5", "0.1", "1.25"]
    done = lw("config", "prices", "anthropic/claude-sonnet-4-5-20250929", "mystery-model-1")
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["anthropic/claude-sonnet-4-5-20250929", "3", "15", "0.3", "3.75"]
    assert lines[2].startswith("mystery-model-1") and "no price: its cost shows as ?" in lines[2]


def test_a_bad_price_entry_is_one_line() -> None:
    done = lw("config", "prices", "--set", "prices.models=gpt-5=cheap,1")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "loopwarden: error: prices.models: 'gpt-5=cheap,1': the prices must be numbers, e.g. gpt-5=1.25,10,0.125"]
