"""What the console's keys do to a session or a gate: each action checks it may, asks when it must, and sends one
request to the daemon off the UI thread."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work

from ..runtime.client import DaemonError
from ..runtime.contract import NEEDS as CONTRACT_NEEDS
from ..supervisor.config import show_value
from ..supervisor.verdicts import FINAL_STATES
from ..supervisor.visible import visible
from .continuing import CONTINUE_NOTE, ConsoleTakeover, continue_question, continue_refusal
from .counters import ALL, ChooseCounter, resettable_counters
from .dialogs import AskText, Confirm, ConfirmWithReason, Launch, SetLimits
from .gates import evidence_text
from .health import limits_view
from .user_settings import project_here

if TYPE_CHECKING:
    from pathlib import Path

    from textual.app import App

    from .bulk import BulkActions
    from .feed import Feed
    from .hosts_feed import HostsFeed

    _AppBase = App[None]
else:
    _AppBase = object

# what a session must be able to do for an action (snapshot "capabilities"; see docs/adapters.md)
_ACTION_NEEDS = {**CONTRACT_NEEDS, "approve_with_guidance": CONTRACT_NEEDS["approve"]}
NEEDS = {action: need.name.lower() for action, need in _ACTION_NEEDS.items() if need.name}
CANNOT = {"hold": "hold a call for a gate", "inject": "receive text",
          "rewind": "rewind its conversation (restart it: R)"}


class SessionActions(_AppBase):
    """The console's per-session and per-gate actions (approve, deny, kill, ...), with the checks and
    confirmations they share; mixed into the app, where Textual looks its `action_*` methods up."""

    feed: Feed | HostsFeed
    read_only: bool
    bulk: BulkActions
    gates: list[dict[str, Any]]
    clock: Callable[[], float]

    if TYPE_CHECKING:
        @property
        def user_config(self) -> Path | None: ...

        def target(self) -> dict[str, Any] | None: ...

        def target_gate(self) -> str | None: ...

    @staticmethod
    def _incapable(snap: dict[str, Any] | None, action: str) -> str | None:
        """Why the session cannot carry out `action` (one line), or None. Old snapshots list no capabilities."""
        need = NEEDS.get(action)
        caps = (snap or {}).get("capabilities")
        if need is None or not isinstance(caps, list) or need in caps:
            return None
        return f"session {snap.get('id') if snap else '?'} ({(snap or {}).get('adapter')}) cannot {CANNOT[need]}"

    def _capable(self, snap: dict[str, Any] | None, action: str) -> bool:
        why = self._incapable(snap, action)
        if why:
            self.notify(visible(why), severity="warning")
        return why is None

    def _allowed(self, verb: str) -> bool:
        """Actions need a writable console and a live link (a request now might reach another daemon)."""
        if self.read_only:
            self.notify(f"read-only console: cannot {verb}", severity="warning")
            return False
        if not self.feed.connected:
            self.notify(f"not connected to the daemon: cannot {verb} until the console reconnects "
                        "(see the status line)", severity="error", markup=False)
            return False
        return True

    def _session(self, verb: str, action: str = "") -> dict[str, Any] | None:
        """The live session an action applies to, or None after saying why there is none."""
        if not self._allowed(verb):
            return None
        snap = self.target()
        if snap is None:
            self.notify("no session selected", severity="warning")
            return None
        if snap.get("state") in FINAL_STATES:  # say so now, not after a confirmation the daemon then refuses
            self.notify(f"{snap['id']} has ended; nothing to {verb}", severity="warning", markup=False)
            return None
        return snap if self._capable(snap, action) else None

    def _gate(self, verb: str, action: str = "") -> str | None:
        if not self._allowed(verb):
            return None
        snap = self.target()
        if snap is not None and snap.get("state") in FINAL_STATES:
            self.notify(f"{snap['id']} has ended; no gate to {verb}", severity="warning", markup=False)
            return None
        if not self._capable(snap, action):
            return None
        ref = self.target_gate()
        if ref is None:
            self.notify("no gate is waiting here", severity="warning")
        return ref

    def _confirm(self, question: str, then: Callable[[], object], detail: Any = None) -> None:
        def answer(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(Confirm(question, detail), answer)

    def action_approve(self) -> None:
        if self.bulk.takes("approve"):
            return
        ref = self._gate("approve", "approve")
        if ref:
            self._with_gate(ref, lambda gate: self._confirm(
                f"Approve {ref} ({gate.get('name') or gate.get('session')})? The call it holds goes ahead.",
                lambda: self.act("approve", gate=ref), evidence_text(gate)))

    def action_approve_with_guidance(self) -> None:
        ref = self._gate("approve", "approve_with_guidance")
        if ref:
            def approve(text: str | None) -> None:
                if text:
                    self.act("approve", gate=ref, note=text)

            self._with_gate(ref, lambda gate: self.push_screen(
                AskText(f"Approve {ref} ({gate.get('name') or gate.get('session')}) with guidance for the agent:",
                        "what the agent should do next", detail=evidence_text(gate)), approve))

    def action_deny(self) -> None:
        if self.bulk.takes("deny"):
            return
        ref = self._gate("deny", "deny")
        if ref:
            def ask(gate: dict[str, Any]) -> None:
                question = (f"Deny {ref} ({gate.get('name') or gate.get('session')})? "
                            "The session will be terminated (loop_gate_denied).")
                self._confirm_with_reason(question, "why, for the agent and the audit log (optional)",
                                          lambda why: self.act("deny", gate=ref, note=why or "denied from the console"),
                                          evidence_text(gate))

            self._with_gate(ref, ask)

    def action_grant(self) -> None:
        snap = self._session("grant authority to", "grant")
        if snap:
            self._confirm(f"Grant session {snap['id']} ({snap.get('name')}) unblock authority?",
                          lambda: self.act("grant", session=snap["id"], note="granted from the console"))

    def action_reset(self) -> None:
        if self.bulk.takes("reset"):
            return
        snap = self._session("reset")
        if snap:
            def reset(counter: str | None) -> None:
                if counter is not None:
                    self.act("reset", session=snap["id"], counter=None if counter == ALL else counter,
                             note="reset from the console")

            self.push_screen(ChooseCounter(f"Reset which counter of session {snap['id']} ({snap.get('name')})?",
                                           resettable_counters(snap)), reset)

    def action_inject(self) -> None:
        if self.bulk.takes("inject"):
            return
        snap = self._session("send text to", "inject")
        if snap:
            def inject(text: str | None) -> None:
                if text:
                    self.act("inject", session=snap["id"], text=text)

            self.push_screen(AskText(f"Message for session {snap['id']} ({snap.get('name')}):"), inject)

    def action_pause(self) -> None:
        if self.bulk.takes("pause"):
            return
        snap = self._session("pause")
        if snap:
            self.act("pause", session=snap["id"])

    def action_resume(self) -> None:
        if self.bulk.takes("resume"):
            return
        snap = self._session("resume")
        if snap:
            self.act("resume", session=snap["id"])

    def action_kill(self) -> None:
        if self.bulk.takes("kill"):
            return
        snap = self._session("kill")
        if snap:
            self._confirm_with_reason(f"Kill session {snap['id']} ({snap.get('name')})?",
                                      "why, for the audit log (optional)",
                                      lambda why: self.act("kill", session=snap["id"],
                                                           note=why or "killed from the console"))

    def action_rewind(self) -> None:
        snap = self._session("rewind", "rewind")
        if snap:
            self._confirm_with_reason(f"Rewind session {snap['id']} ({snap.get('name')}) to before its last turn "
                                      "and retry it with the loop's evidence as guidance?",
                                      "guidance for the agent, also for the audit log (optional)",
                                      lambda note: self.act("rewind", session=snap["id"], note=note or None))

    def action_restart(self) -> None:
        if not self._allowed("restart"):
            return
        snap = self.target()  # an ended session too: restarting one is the point
        if snap is None:
            self.notify("no session selected", severity="warning")
            return
        ended = snap.get("state") in FINAL_STATES
        self._confirm_with_reason(f"Restart the task of session {snap['id']} ({snap.get('name')}) as a new session, "
                                  f"told first what failed?{'' if ended else ' This one is stopped first.'}",
                                  "a note for the new run, also for the audit log (optional)",
                                  lambda note: self.act("restart", session=snap["id"], note=note or None))

    def action_continue_session(self) -> None:
        """Continue an ended or lost session in its agent's own conversation (`loopwarden continue`), confirmed."""
        if not self._allowed("continue"):
            return
        snap = self.target()
        refusal = continue_refusal(snap)
        if snap is None or refusal:
            self.notify(refusal or "no session selected", severity="warning", markup=False)
            return
        self._confirm_with_reason(continue_question(snap), CONTINUE_NOTE,
                                  lambda note: self.act("continue", session=snap["id"], note=note or None,
                                                        env=dict(os.environ)))

    def action_takeover(self) -> None:
        """Take the selected session's conversation over in its agent's own program (`loopwarden takeover`)."""
        if not self._allowed("take over"):
            return
        snap = self.target()
        if snap is None:
            self.notify("no session selected", severity="warning")
        else:
            ConsoleTakeover(self).offer(snap)

    def action_limits(self) -> None:
        snap = self._session("change limits of", "limits")
        if snap:
            def send(values: dict[str, str]) -> Any:  # in the dialog's thread; a refusal stays in the dialog
                if not self.feed.connected:
                    raise DaemonError("not connected to the daemon; wait until the status line says reconnected")
                return self.feed.request("set", session=snap["id"], values=values)

            def done(reply: dict[str, Any] | None) -> None:
                if reply is not None:
                    self.notify(f"set {snap['id']}: {outcome(reply)}", timeout=3, markup=False)

            self.push_screen(SetLimits(f"Limits of session {snap['id']} ({snap.get('name')}): type KEY=VALUE",
                                       limits_view(snap, self.clock()), send), done)

    def action_launch(self) -> None:
        if self._allowed("launch"):
            project = project_here(self.user_config) if self.user_config is not None else None
            self.push_screen(Launch(self._run_spec, project), self._launched)

    def _run_spec(self, spec: dict[str, Any]) -> Any:
        """Send the launch dialog's spec (in its worker thread); an error stays in the dialog."""
        if not self.feed.connected:
            raise DaemonError("not connected to the daemon; wait until the status line says reconnected")
        extra = spec.pop("env_extra", None) or {}
        return self.feed.request("run", spec={**spec, "env": {**os.environ, **extra}})

    def _launched(self, reply: dict[str, Any] | None) -> None:
        if reply is not None:
            self.notify(f"session {reply.get('id') or '?'} started", timeout=3, markup=False)

    def _with_gate(self, ref: str, then: Callable[[dict[str, Any]], object]) -> None:
        """Call `then` with the gate's reason and evidence, read from the daemon if not loaded yet."""
        gate = next((g for g in self.gates if g.get("ref") == ref), None)
        if gate is not None:
            then(gate)
        else:
            self._fetch_gate(ref, then)

    @work(thread=True, exit_on_error=False)
    def _fetch_gate(self, ref: str, then: Callable[[dict[str, Any]], object]) -> None:
        try:
            gates = self.feed.request("gates")
        except (DaemonError, OSError) as exc:
            self.call_from_thread(self.notify, f"cannot read gate {ref}: {visible(str(exc))}", severity="error",
                                  markup=False)
            return
        gate = next((g for g in gates or [] if g.get("ref") == ref), None)
        if gate is None:  # decided meanwhile (another console, an expiry): nothing left to ask about
            self.call_from_thread(self.notify, f"gate {ref} is no longer pending", severity="warning", markup=False)
        else:
            self.call_from_thread(then, gate)

    def _confirm_with_reason(self, question: str, placeholder: str, then: Callable[[str], object],
                             detail: Any = None) -> None:
        def answer(reason: str | None) -> None:
            if reason is not None:
                then(reason)

        self.push_screen(ConfirmWithReason(question, placeholder, detail), answer)

    @work(thread=True, exit_on_error=False)
    def act(self, op: str, **fields: Any) -> None:
        """Send one request to the daemon off the UI thread; the outcome comes back as a notification."""
        if not self.feed.connected:  # confirmed after the link was lost: this daemon may not be the one shown
            self.call_from_thread(self.notify, f"{op}: not sent, the console is not connected to the daemon",
                                  severity="error", markup=False)
            return
        try:
            result = self.feed.request(op, **fields)
        except (DaemonError, OSError) as exc:
            self.call_from_thread(self.notify, f"{op}: {visible(str(exc))}", severity="error", markup=False)
            return
        target = fields.get("gate") or fields.get("session") or (result or {}).get("id")
        self.call_from_thread(self.notify, f"{op} {target}: {outcome(result)}", timeout=3, markup=False)


def outcome(result: Any) -> str:
    """A reply in a few words: the changes a `set` made, else done."""
    changed = result.get("changed") if isinstance(result, dict) else None
    if isinstance(changed, dict) and changed:
        return ", ".join(f"{key} {_pair(key, pair)}" for key, pair in changed.items())
    return "done" if not isinstance(changed, dict) else "nothing changed"


def _pair(key: str, pair: Any) -> str:
    if isinstance(pair, list) and len(pair) == 2:
        return f"{show_value(key, pair[0])} → {show_value(key, pair[1])}"
    return f"= {pair}"
