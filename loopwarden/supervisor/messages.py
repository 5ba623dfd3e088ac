"""Every text the supervisor sends to an agent, in one place.

Each says what happened, with the evidence, and what to do instead.
"""

from __future__ import annotations

from typing import Any

import orjson

from .config import format_duration

_ARGS_LIMIT = 200
_OUTCOME_LIMIT = 160
AWAITING_HUMAN = "Waiting for a human decision."  # how every gate's text ends (the console drops it once decided)


def clip(text: str, limit: int) -> str:
    """One line of at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show_args(args: dict[str, Any]) -> str:
    """Arguments as compact JSON, clipped for a message."""
    try:
        text = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        text = repr(args)
    return clip(text, _ARGS_LIMIT)


def outcome(output: str | None, failed: bool) -> str:
    """'error: <first line>' or 'ok: <first line>' or 'no result yet'."""
    if output is None:
        return "no result yet"
    first = next((line for line in output.splitlines() if line.strip()), "")
    return f"{'error' if failed else 'ok'}: {clip(first, _OUTCOME_LIMIT)}" if first else ("error" if failed else "ok")


def repetition_nudge(tool: str, args: dict[str, Any], count: int, last: str) -> str:
    return (
        f'Your previous attempt is looping: Tool "{tool}" was called {count} consecutive times '
        f"with identical arguments {show_args(args)}. Last outcome: {last}. "
        "Try a different approach, use a different tool, or decompose the problem."
    )


def repetition_block(tool: str, args: dict[str, Any], count: int, last: str) -> str:
    return (
        f"Tool call blocked: tool '{tool}' called {count} times consecutively with identical "
        f"parameters {show_args(args)}. Last outcome: {last}. "
        "Try a different approach or parameters."
    )


def repetition_terminate(tool: str, count: int, blocks: int) -> str:
    return (
        f"session terminated: repetition loop: tool '{tool}' was called {count} times in a row "
        f"and {blocks} blocked repeats did not change the approach"
    )


def same_error_block(tool: str, count: int, fingerprint: str) -> str:
    return (
        f"Tool call blocked: tool '{tool}' has returned the same error {count} consecutive times: "
        f"'{fingerprint}'. Investigate the cause (read the code or logs the error points to) "
        "instead of calling it again with small variations."
    )


def alternation_nudge(a: str, b: str, cycles: int) -> str:
    return (
        f"Your previous attempt is looping: you alternated between '{a}' and '{b}' {cycles} times "
        "and got the same results each time. Neither call is giving you new information. "
        "Step back, state what you expected to change, and try a different approach."
    )


def alternation_changing_nudge(a: str, b: str, cycles: int) -> str:
    return (
        f"You have alternated between '{a}' and '{b}' {cycles} times with the same arguments; their output "
        "keeps changing, but the pattern does not. If you are waiting on something, wait for it once (with a "
        "timeout); otherwise say what you expect to change and try a different approach."
    )


def alternation_block(tool: str, a: str, b: str) -> str:
    return (
        f"Tool call blocked: '{tool}' continues an A,B,A,B loop between '{a}' and '{b}' that you "
        "were already warned about. Try a different approach."
    )


def monologue_nudge(count: int) -> str:
    return (
        f"You have sent {count} messages in a row without using a tool or making progress. "
        "Stop deliberating: take one concrete action with a tool, or say that you are done."
    )


def stall_nudge(elapsed: float, last_tool: str | None, last: str) -> str:
    tool = f"Last tool: {last_tool} → {last}. " if last_tool else "No tool has run yet. "
    return (
        f"Your previous attempt stalled after {elapsed * 1000:.0f}ms. {tool}"
        "Try a different approach or decompose the problem into smaller steps."
    )


def max_runtime(limit: float) -> str:
    return f"session terminated: max runtime exceeded ({format_duration(limit)})"


def validation_nudge(description: str, count: int, limit: int) -> str:
    return (
        f"Failed to parse your response: {description}. Please try again with valid JSON. "
        f"(validation failure {count}/{limit})"
    )


def validation_terminate(count: int, description: str) -> str:
    return f"session terminated: {count} consecutive validation failures (last: {description})"


def failures_terminate(count: int, last: str) -> str:
    return f"session terminated: {count} consecutive failures (last: {last})"


def loop_gate(task: str, count: int, why: str, message: str) -> str:
    return (
        f"Loop detected on task {task}: loop count {count} ({why}; last: "
        f"'{clip(message, _OUTCOME_LIMIT)}'). Waiting for a human decision."
    )


def gate_guidance(note: str) -> str:
    return f"A human reviewed the loop and approved continuing, with this guidance: {note}"


def force_next_done(task: str, attempts: int) -> str:
    return (
        f"LOOP DETECTED: Task {task} completed after {attempts} attempts.\n"
        "DO NOT revisit this task. SELECT NEXT TASK from the roadmap."
    )


def force_next_no_progress(task: str, attempts: int) -> str:
    return (
        f"LOOP DETECTED: Task {task} made no progress in {attempts} attempts (the same work each time).\n"
        "DO NOT revisit this task. SELECT NEXT TASK from the roadmap."
    )


_AUTHORITY = (
    "You have FULL AUTHORITY to:\n"
    "1. Remove or work around these blockers\n"
    "2. Make necessary architectural changes\n"
    "3. Skip unavailable dependencies temporarily\n"
    "4. Create stub implementations if needed\n"
    "5. Document blockers as technical debt for later\n\n"
    "COMPLETE the task by any means necessary, then mark it done and move on."
)


def unblock_authority(task: str, blockers: list[str], attempts: int) -> str:
    head = f"UNBLOCK AUTHORITY GRANTED: Task {task} blocked by [{', '.join(blockers)}] after {attempts} attempts."
    return f"{head}\n\n{_AUTHORITY}"


def operator_authority(task: str | None, note: str | None) -> str:
    scope = f"Task {task}" if task else "The current task"
    head = f"UNBLOCK AUTHORITY GRANTED by an operator: {scope}."
    return head + ("\nOperator note: " + note if note else "") + "\n\n" + _AUTHORITY


def escalate_human(task: str, attempts: int, reason: str) -> str:
    return (
        f"ESCALATION: Loop detected on task {task} after {attempts} attempts.\n"
        f"Human intervention required.\nReason: {reason}."
    )


def escalate_model(current: str, nxt: str, why: str) -> str:
    return f"Escalating from {current} to {nxt}: {why}. Use the stronger model to rethink the approach."


def stuck_iterations(pattern: str) -> str:
    return f"Stuck loop detected over the last 3 iterations: {pattern}."


def max_iterations(limit: int) -> str:
    return f"session terminated: max iterations reached ({limit})"


def budget_warning(what: str, used: str, limit: str) -> str:
    return f"You have used {used} of your {what} budget of {limit}. Finish the task or wrap up soon."


def budget_terminate(what: str, used: str, limit: str) -> str:
    return f"session terminated: {what} budget exhausted ({used} of {limit})"


BUDGET_KEYS = {"session": "limits.max_cost_usd", "day": "budgets.day_usd", "project": "budgets.project_usd"}


def budget_scope(scope: str, what: str, project: str | None) -> str:
    """Which budget, in words: 'the session's cost budget', 'the day budget of every session'."""
    if scope == "day":
        return "the day budget of every session"
    if scope == "project":
        return f"the day budget of project {clip(project or '?', 120)}"
    return f"the session's {what} budget"


def budget_gate(scope: str, what: str, used: str, limit: str, project: str | None = None) -> str:
    """A budget reached holds the next call: the gate's reason (for the operator)."""
    key = "limits.max_tokens" if scope == "session" and what == "token" else BUDGET_KEYS.get(scope, "")
    spent = "spent today" if scope != "session" else "used"
    return (f"{budget_scope(scope, what, project)} is reached: {used} {spent} of {limit} ({key}); the next call "
            "waits until it is raised, or one call is approved")


def budget_reached_terminate(scope: str, what: str, used: str, limit: str, project: str | None = None) -> str:
    return f"session terminated: {budget_scope(scope, what, project)} is reached ({used} of {limit})"


def deaf_agent(unread: int, limit: int) -> str:
    return (f"session terminated: the agent stopped reading its input ({unread:,} bytes of verdicts and messages "
            f"unread, limits.stdin_backlog is {limit:,}). A supervised agent must read what it is sent, "
            "a verdict for each tool call when it announced the handshake.")


def rewind_guidance(turns: int, evidence: str | None, note: str | None) -> str:
    """What a rewound agent reads with its retried task: the loop it no longer remembers, and what to do."""
    dropped = "your last turn was" if turns == 1 else f"your last {turns} turns were"
    text = f"A supervisor (loopwarden) rewound this conversation: {dropped} dropped because it looped."
    if evidence:
        text += f" What it did: {clip(evidence, 600)}"
    if note:
        text += f" Operator's note: {clip(note, 600)}"
    return text + (" Start the task again, and do not repeat that approach: use a different tool or command, "
                   "or decompose the problem.")


def _restart_cause(ended: str | None, exit_code: int | None) -> str:
    """Why the task runs again, as it was: a failure, a non-zero exit, a clean exit, or a run still going."""
    if ended:
        return "because the previous attempt failed"
    if exit_code is None:
        return "while the previous attempt was still running (it was stopped)"
    if exit_code == 0:
        return "at an operator's request; the previous attempt ended by itself (exit code 0) and no rule stopped it"
    return f"because the previous attempt exited with code {exit_code}"


def restart_summary(task: str | None, ended: str | None, last: str | None, errors: list[str],
                    note: str | None, exit_code: int | None = 1) -> str:
    """The first message of a restarted task: how the run before it ended (and what it did wrong, so it is not
    done again)."""
    text = f"This task was restarted by a supervisor (loopwarden) {_restart_cause(ended, exit_code)}."
    if task:
        text += f" Task: {clip(task, 300)}."
    if ended:
        text += f" How it ended: {clip(ended, 400)}"
    if last and last != ended:
        text += f" Last intervention: {clip(last, 400)}"
    if errors:
        text += " Last errors: " + "; ".join(clip(e, 200) for e in errors[-3:]) + "."
    if note:
        text += f" Operator's note: {clip(note, 600)}"
    if not ended and exit_code == 0 and not errors:
        return text + " Check whether the task is really done, and finish what is left."
    return text + " Do not repeat what failed: take a different approach from the start."


def _change(volatile_only: bool) -> str:
    return "only numbers, sizes or times changed" if volatile_only else "its content changed"


def polling_nudge(tool: str, args: dict[str, Any], count: int, volatile_only: bool) -> str:
    return (
        f'Tool "{tool}" has been called {count} times in a row with identical arguments {show_args(args)}; '
        f"its output kept changing, but {_change(volatile_only)}. If you are waiting for a long process, wait "
        "for it once (with a timeout) instead of polling; if you are paging, read the rest in one call. "
        "Otherwise stop repeating the call and try a different approach."
    )


def polling_gate(tool: str, count: int, volatile_only: bool) -> str:
    return (
        f"Tool '{tool}' was called {count} times in a row with identical arguments and {_change(volatile_only)} "
        "between outputs. Waiting for a human decision."
    )


def condensation_gate(count: int) -> str:
    return (
        f"The context was condensed {count} times in a row with no work in between: condensing frees no room. "
        "Waiting for a human decision."
    )


def reread_block(path: str, reads: int) -> str:
    return (
        f"Tool call blocked: you have read '{clip(path, _ARGS_LIMIT)}' {reads} times without changing it. "
        "Its content is already in your context: use what you read, search it for what you need, "
        "or edit the file, instead of reading it again."
    )


def reread_gate(path: str, reads: int) -> str:
    return (
        f"'{clip(path, _ARGS_LIMIT)}' was read {reads} times without a write, and a blocked read did not "
        "change the approach. Waiting for a human decision."
    )


def chanting_nudge(passage: str, count: int) -> str:
    return (
        f"Your last message repeats the same passage over and over ({count} times: "
        f"'{clip(passage, _OUTCOME_LIMIT)}'). Stop repeating it: say in one sentence what you are trying to do, "
        "then take one concrete action."
    )


def chanting_gate(passage: str, count: int) -> str:
    return (
        f"An assistant message repeats the same passage {count} times ('{clip(passage, _OUTCOME_LIMIT)}') "
        "after a warning. Waiting for a human decision."
    )


def reflections_gate(rounds: int, limit: int, task: str | None, last: str) -> str:
    scope = f"task {task}" if task else "this task"
    return (
        f"{rounds} failed test or lint rounds on {scope} since the last human message (budget {limit}; "
        f"last: {clip(last, _OUTCOME_LIMIT)}). Waiting for a human decision."
    )
