"""Offline commands: replay a recording, the demo, inspect settings."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any, BinaryIO

import click
import orjson

from ..replay import Replayer, ReplaySummary, WrongFormat, choose_format, open_recording
from ..supervisor.config import Config, describe_keys, format_duration, load_config, redact_url
from ..runtime.spill import Spiller
from ..runtime.spill_bounds import SpillBounds, SpillLedger
from ..supervisor.verdicts import Verdict
from ..supervisor.visible import visible
from ..paths import default_paths
from .common import Fail, build_config, config_options
from .user_config import config_check, config_path, user_config_lines

class LaterChoice(click.Choice):
    """A choice among values asked for only when the option is used or its help is shown: the formats come from
    the adapter registry, which imports every adapter (`loopwarden config`, in this module too, needs none)."""

    def __init__(self, values: Callable[[], Iterable[str]]) -> None:
        self._values = values
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._values())

    @choices.setter
    def choices(self, value: tuple[str, ...]) -> None:
        """(Set by click.Choice's constructor; the values are always read afresh.)"""


def recorded_formats() -> list[str]:
    from ..sessions.registry import recordings

    return list(recordings())


@click.command()
@config_options
@click.option("--format", "fmt", type=LaterChoice(recorded_formats), default=None,
              help="Wire format of the recording  [default: told from its first lines]")
@click.option("--summary-json", is_flag=True, help="Write the summary to stderr as one JSON object.")
@click.option("--no-spill", is_flag=True, help="Report large outputs without writing spill files.")
@click.argument("file", metavar="FILE|-")
def replay(config_file: str | None, preset: str | None, sets: tuple[str, ...], fmt: str | None,
           summary_json: bool, no_spill: bool, file: str) -> None:
    """Feed a recorded agent stream through the engine and print its verdicts.

    One JSON line per verdict other than allow goes to stdout (seq is the input
    line that caused it); a summary goes to stderr: the format, lines read and
    ignored (blank, or nothing to judge on their own), events, verdicts, final
    state. Without --format the format is told from the first lines; a --format
    the input plainly is not is an error naming the likely one. Exit 0 when the
    input was read, whatever the verdicts; 2 for usage errors, an unreadable
    file or a wrong --format.

    \b
    Examples:
      loopwarden replay session.jsonl
      loopwarden replay --set repetition.max_identical_calls=3 claude-run.jsonl
      claude -p "fix the tests" --output-format stream-json --verbose | loopwarden replay -
      loopwarden replay --format codex-app-server app-server-stdout.jsonl
      loopwarden replay --format acp gemini-acp-stdout.jsonl
    """
    config = build_config(config_file, preset, sets)
    out = sys.stdout.buffer

    def emit(verdict: Verdict) -> None:
        out.write(orjson.dumps(verdict.to_dict()) + b"\n")

    summary = _run_replay(config, file, fmt, emit, spill=not no_spill)
    out.flush()
    if summary_json:
        sys.stderr.write(orjson.dumps(summary.to_dict()).decode() + "\n")
    else:
        sys.stderr.write(render_summary(summary))


def _run_replay(config: Config, file: str, fmt: str | None, emit: Any, *, spill: bool) -> ReplaySummary:
    directory = str(config.spill.dir or default_paths().spill)
    ledger = SpillLedger()
    if spill:
        ledger.measure([directory])  # the files there count against spill.max_total_bytes
    spiller = Spiller(directory, preview_chars=config.spill.preview_chars,
                      truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                      session="replay", bounds=SpillBounds.of(config.spill, ledger)) if spill else None
    stream: BinaryIO
    try:
        stream = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise Fail(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        guess, stream = open_recording(stream)
        chosen = choose_format(fmt, guess, "stdin" if file == "-" else file)
        return Replayer(config, spiller=spiller, spill=spill).run(stream, chosen, emit, array=guess.array,
                                                                  detected=fmt is None)
    except WrongFormat as exc:
        raise Fail(str(exc)) from None
    except BrokenPipeError:
        raise  # our reader went away (| head): not the input's fault
    except OSError as exc:
        raise Fail(f"cannot read {file}: {exc.strerror or exc}") from None
    finally:
        if file != "-":
            stream.close()


def render_summary(s: ReplaySummary) -> str:
    """The human summary printed after a replay."""
    types = ", ".join(f"{k} {v:,}" for k, v in sorted(s.by_type.items(), key=lambda kv: -kv[1]))
    rules = ", ".join(f"{k} {v:,}" for k, v in sorted(s.by_rule.items(), key=lambda kv: -kv[1])) or "none"
    how = "detected" if s.detected else "as given"
    lines = [
        f"replay: {s.format} ({how}); {s.lines:,} {s.unit if s.lines != 1 else s.unit[:-1]} read, "
        f"{s.ignored:,} ignored; {s.events:,} events"
        + (f" ({types})" if types else ""),
        f"verdicts: {s.verdicts:,} ({rules})",
        f"validation failures: {s.validation_failures:,}"
        + "".join(f"\n  line {v['seq']}: {visible(str(v['reason']))}" for v in s.validation_examples[:10]),
    ]
    final = s.state
    if s.state == "running" and not s.pending_gates:  # a recording of a session that was not stopped
        final += " (the recording ends here; nothing stopped the session)"
    if s.termination:
        final += f" ({s.termination}) at line {s.stopped_at:,}; the rest of the input was not judged"
    if s.pending_gates:
        final += f"; gates waiting for a human: {', '.join(s.pending_gates)}"
    lines.append(f"final state: {final}")
    return "\n".join(lines) + "\n"


_ACTION_STYLE = {
    "nudge": "yellow", "block": "red", "gate": "magenta", "terminate": "bright_red",
    "force_next": "cyan", "unblock_authority": "cyan", "escalate": "magenta", "spill": "blue",
}


def replay_demo(as_json: bool) -> None:
    """Replay the bundled example session and explain every verdict (`loopwarden demo --replay`).

    The example is a scripted agent that loops in every way loopwarden knows:
    repeated calls, the same error, alternation, monologue, malformed output,
    a stall, a huge output, a repeated failure that needs a human, a blocked
    task. No API key or network is needed.
    """
    config = load_config(env={})
    example = resources.files("loopwarden") / "examples" / "demo.jsonl"

    def emit(v: Verdict) -> None:
        if as_json:
            click.echo(orjson.dumps(v.to_dict()).decode())
            return
        head = click.style(f"{str(v.action).upper():<17}", fg=_ACTION_STYLE.get(str(v.action)), bold=True)
        click.echo(f"line {v.seq:>3}  {head} {v.rule:<22} {v.reason}")
        if v.message and v.message != v.reason:
            width = max(40, min(shutil.get_terminal_size((100, 24)).columns, 120) - 12)
            shown = [w for line in v.message.splitlines()[:10] for w in (textwrap.wrap(line, width) or [""])]
            for text_line in shown[:12]:
                click.echo(click.style("          │ ", dim=True) + text_line)

    with resources.as_file(example) as path:
        summary = _run_replay(config, str(path), "native", emit, spill=True)
    click.echo("")
    click.echo(render_summary(summary), nl=False)


@click.group()
def config() -> None:
    """Inspect settings: every key, and what a preset, file, environment and --set add up to.

    \b
    Examples:
      loopwarden config keys
      loopwarden config show --preset aggressive --set limits.max_runtime=30m
      loopwarden config prices gpt-5
      loopwarden config path
      loopwarden config check
    """


config.add_command(config_path)
config.add_command(config_check)


@config.command("keys")
def config_keys() -> None:
    """List every setting with its default and what it accepts.

    \b
    Example:
      loopwarden config keys | grep repetition
    """
    for key, accepts, help_text, default in describe_keys():
        if _is_duration(key):
            default = format_duration(default)
        click.echo(f"{key:<34} default {default!s:<22} {help_text}; accepts {accepts}")


@config.command("show")
@config_options
def config_show(config_file: str | None, preset: str | None, sets: tuple[str, ...]) -> None:
    """Print the effective configuration (defaults < preset < file < environment < --set) as TOML, then the
    user config's console and project settings (see `loopwarden config check --help`).

    \b
    Example:
      LOOPWARDEN_LIMITS_STALL_TIMEOUT=1m loopwarden config show --config team.toml
    """
    cfg = build_config(config_file, preset, sets)
    click.echo(f'preset = "{cfg.preset}"')
    for section, values in cfg.to_dict().items():
        click.echo(f"\n[{section}]")
        for key, value in values.items():
            if _is_duration(f"{section}.{key}"):
                value = format_duration(value)
            if section == "notify" and key == "urls" and value:  # they hold tokens: never printed whole
                click.echo(f"urls = {_toml_value([redact_url(v) for v in value])}  # hidden, they hold secrets")
                continue
            click.echo(f"{key} = {_toml_value(value)}")
    click.echo("")
    for line in user_config_lines():
        click.echo(line)


@config.command("prices")
@config_options
@click.argument("models", nargs=-1)
def config_prices(config_file: str | None, preset: str | None, sets: tuple[str, ...], models: tuple[str, ...]) -> None:
    """Print the price table in USD per million tokens (input, output, cached input, cache write): the list prices
    shipped, with `prices.models` from the config added; or the row each MODEL id is priced by.

    \b
    Examples:
      loopwarden config prices
      loopwarden config prices claude-sonnet-4-5-20250929 gpt-5.5 --set prices.models=gpt-5.5=1.5,12
    """
    from ..supervisor.prices import SHIPPED, table_of

    table = table_of(build_config(config_file, preset, sets).prices.models)
    rows = [(m, table.price(m)) for m in models] if models else list(table.rows.items())
    click.echo(f"{'MODEL':<34} {'INPUT':>8} {'OUTPUT':>8} {'CACHED':>8} {'WRITE':>8}")
    for model, price in rows:
        name = visible(model)[:60]
        if price is None:
            click.echo(f"{name:<34} no price: its cost shows as ? (give it one with prices.models)")
            continue
        own = "" if models or SHIPPED.get(model) == price else "  (prices.models)"
        click.echo(f"{name:<34} {price.input:>8g} {price.output:>8g} {price.cache_read:>8g} "
                   f"{price.cache_write:>8g}{own}")


def _is_duration(key: str) -> bool:
    from ..supervisor.config import KEYS

    return KEYS.get(key) == "duration"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return "[" + ", ".join(orjson.dumps(v).decode() for v in value) + "]"
    return repr(value)
