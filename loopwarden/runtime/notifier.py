"""Sending alerts through apprise, off the event loop, never in the daemon's way.

Each notify URL is a target with its own bounded queue (alerts.AlertQueue) and its own worker task;
a send runs in a daemon thread of the target's own, so a receiver that hangs holds up only its own
target (never the store's threads, never the other targets, never a session, never the daemon's exit).
A send that does not end in time is left to finish alone, and while it lives no other starts for that
URL (its alerts fail at once, saying so): a receiver that trickles bytes forever costs one thread. A failed send
is tried again `notify.retries` times, waiting 1 s, 2 s, 4 s ... (at most BACKOFF_MAX); one that still
fails is counted and reported. apprise is imported only when a URL is configured, in the worker thread.
URLs hold secrets (tokens, passwords, private topics): they are shown as `#N scheme://…` and every
error text is scrubbed of every part of them before it is kept, logged or stored.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..supervisor.config import Notify, redact_url
from .alerts import Alert, AlertPolicy, AlertQueue

BACKOFF_FIRST = 1.0  # seconds before the first retry; doubled for each next one
BACKOFF_MAX = 30.0
ERROR_CHARS = 300  # a kept error text at most
MAX_TARGETS = 16  # notify URLs used at most
READ_WAIT = 60.0  # seconds for importing apprise and reading a URL (no network) before it is left alone
MAX_RETRIES = 10  # notify.retries past this would hold a URL's queue for many minutes per alert


def label(n: int, url: str) -> str:
    """How a target is named wherever it is shown: its number and scheme, nothing that may be a secret."""
    return f"#{n} {redact_url(url)}"


def secrets_of(url: str) -> list[str]:
    """Every part of a URL that may be a secret (user, password, host, path segments, query values),
    longest first, as written and percent-decoded."""
    try:
        parts = urlsplit(url.strip())
        rest = url.split("://", 1)[1] if "://" in url else url
    except ValueError:
        return [url]
    pieces = {rest, parts.netloc, parts.username or "", parts.password or "", parts.hostname or ""}
    pieces.update(parts.path.split("/"))
    for pair in re.split(r"[&;]", parts.query):
        pieces.update(pair.split("=", 1))
    pieces.update([unquote(p) for p in pieces])
    return sorted((p for p in pieces if len(p) >= 3), key=len, reverse=True)


_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*)://[^\s)\]>'\"]+")  # ends at a closing bracket or quote


def scrub(text: str, urls: list[str]) -> str:
    """`text` (an error, a log line) with every secret part of `urls` and any URL in it replaced."""
    for url in urls:
        for secret in secrets_of(url):
            text = text.replace(secret, "…")
    text = _URL.sub(r"\1://…", text)
    return " ".join(text.split())[:ERROR_CHARS]


# ---- apprise, in worker threads ---------------------------------------------------------------------

class _ThreadLog(logging.Handler):
    """apprise's log records by the thread that made them: a send learns why it failed, and nothing of
    apprise's reaches the daemon's log (it may name a URL)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: dict[int, str] = {}
        self.guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose arguments do not format: its template will do
            message = str(record.msg)
        with self.guard:
            self.last[threading.get_ident()] = message

    def take(self) -> str | None:
        with self.guard:
            return self.last.pop(threading.get_ident(), None)


_apprise_log: _ThreadLog | None = None
_import_lock = threading.Lock()


def _apprise() -> Any:
    """apprise, imported on first use (it loads its hundred plugins: ~0.2 s), its log captured."""
    global _apprise_log
    with _import_lock:
        import apprise

        if _apprise_log is None:
            _apprise_log = _ThreadLog()
            logger = logging.getLogger("apprise")
            logger.addHandler(_apprise_log)
            logger.propagate = False
            logger.setLevel(logging.WARNING)
        return apprise


def service(url: str) -> tuple[Any, str | None]:
    """The apprise service for `url`, or None and why not (a worker thread: this imports apprise)."""
    apprise = _apprise()
    try:
        # sequential and without apprise's own deadline: the send runs (and logs) in the calling thread,
        # ours, never in apprise's shared pool, whose threads an exiting daemon would wait for
        asset = apprise.AppriseAsset(async_mode=False, service_timeout=0)
        plugin = apprise.Apprise.instantiate(url, asset=asset, suppress_exceptions=True)
    except Exception as exc:  # noqa: BLE001 - a plugin's constructor may raise anything on a bad URL
        return None, f"not a URL apprise can use ({type(exc).__name__})"
    if plugin is None:
        assert _apprise_log is not None
        why = _apprise_log.take()
        return None, f"not a URL apprise can use ({why})" if why else "not a URL apprise can use"
    return plugin, None


def send_once(plugin: Any, alert: Alert, timeout: float) -> str | None:
    """One send of `alert` through an apprise service (a worker thread): None when it was delivered, else
    why not (unscrubbed: the caller scrubs it).

    The text is sent as plain text through an Apprise object of its own (one per URL, so one URL's
    failure is never another's): only that path converts it to what the service renders, escaping
    HTML for Telegram and the like and Markdown for ntfy's markdown; the plugin's own notify() would
    pass an agent's `<a href=...>` on as markup."""
    apprise = _apprise()
    assert _apprise_log is not None
    plugin.socket_connect_timeout = plugin.socket_read_timeout = timeout
    _apprise_log.take()
    try:
        one = apprise.Apprise()
        one.add(plugin)
        ok = one.notify(body=alert.body, title=alert.title, body_format=apprise.NotifyFormat.TEXT,
                        notify_type=getattr(apprise.NotifyType, alert.severity.upper(), apprise.NotifyType.INFO))
    except Exception as exc:  # noqa: BLE001 - a plugin bug must cost one alert, not the daemon
        return f"{type(exc).__name__}: {exc}"
    if ok:
        _apprise_log.take()
        return None
    return _apprise_log.take() or "the service refused it"


# ---- targets and the notifier ---------------------------------------------------------------------

@dataclass
class Target:
    """One notify URL: its queue, its send thread, what it sent and why it last failed."""

    n: int
    url: str
    queue: AlertQueue = field(default_factory=AlertQueue)
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one send at a time (the worker's, notify test's)
    left: threading.Event | None = None  # a send left behind by its wait: set once it has ended
    left_since: float = 0.0
    wake: anyio.Event = field(default_factory=anyio.Event)
    plugin: Any = None
    sent: int = 0
    failed: int = 0
    dropped: int = 0  # its queue was full
    last_error: str | None = None
    last_error_at: float | None = None
    retired: bool = False  # its URL left the settings: its worker ends
    started: bool = False  # its worker runs
    sending: Alert | None = None  # the alert its worker is sending (with its retries) now

    @property
    def label(self) -> str:
        return label(self.n, self.url)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.label, "ready": self.plugin is not None, "sent": self.sent, "failed": self.failed,
                "dropped": self.dropped,
                "queued": len(self.queue), "last_error": self.last_error, "last_error_at": self.last_error_at}


Report = Callable[[Alert, str, str], None]  # (alert, target label or "", outcome) -> None, on the event loop


class Notifier:
    """Admits alerts by the policy and queues them for every target; workers send them; counts all."""

    def __init__(self, report: Report, *, clock: Callable[[], float] = time.time,
                 log: Callable[[str], None] = lambda text: None) -> None:
        self.report = report
        self.clock = clock
        self.log = log
        self.settings = Notify()
        self.policy = AlertPolicy(self.settings.events, self.settings.dedup_window, self.settings.max_per_minute)
        self.targets: list[Target] = []
        self.counts = {"sent": 0, "failed": 0, "deduplicated": 0, "rate_limited": 0, "dropped": 0, "filtered": 0}
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.config_error: str | None = None
        self.config_warning: str | None = None  # the config file is open to others
        self.host = ""
        self._tg: Any = None
        self._summary_wake = anyio.Event()
        self.closed = False  # the daemon stops: drain() has said what became of every alert

    # ---- settings ---------------------------------------------------------------------------------------
    def configure(self, settings: Notify) -> None:
        """New settings: the policy's limits, and targets for the URLs (a kept URL keeps its queue)."""
        self.settings = settings
        self.policy.events = frozenset(settings.events)
        self.policy.dedup_window, self.policy.max_per_minute = settings.dedup_window, settings.max_per_minute
        urls = settings.urls[:MAX_TARGETS]
        if len(settings.urls) > MAX_TARGETS:
            self.log(f"alerts: only the first {MAX_TARGETS} of {len(settings.urls)} notify.urls are used")
        old = {t.url: t for t in self.targets}
        targets = []
        for n, url in enumerate(urls, 1):
            target = old.pop(url, None) or Target(n, url)
            target.n = n
            targets.append(target)
        for gone in old.values():
            gone.retired = True
            gone.wake.set()
        self.targets = targets
        if self._tg is not None:
            for target in targets:
                if not target.started:
                    self._start(target)

    @property
    def urls(self) -> list[str]:
        return [t.url for t in self.targets]

    # ---- the event loop side ----------------------------------------------------------------------------
    async def run(self) -> None:
        """The workers (one per target) and the summary of held-back alerts, until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for target in self.targets:
                self._start(target)
            tg.start_soon(self._summaries)

    def _start(self, target: Target) -> None:
        target.started = True
        self._tg.start_soon(self._work, target)

    def offer(self, alert: Alert) -> str:
        """Admit `alert` by the policy and queue it for every target: 'queued', or why not."""
        if not self.targets:
            return "no_targets"
        decision = self.policy.admit(alert, self.clock())
        if decision != "send":
            self.counts[decision] += 1
            if decision == "rate_limited":
                self._summary_wake.set()
            if decision != "filtered":
                self.report(alert, "", decision)
            return decision
        self._queue(alert)
        return "queued"

    def _queue(self, alert: Alert) -> None:
        for target in self.targets:
            if self.closed:
                self._not_sent(target, alert)
                continue
            if target.queue.push(alert):
                target.wake.set()
            else:
                target.dropped += 1
                self.counts["dropped"] += 1
                self.report(alert, target.label, "dropped: its queue was full")

    async def _summaries(self) -> None:
        """Once the rate allows, one alert that sums up what the rate limit held back."""
        while True:
            due = self.policy.summary_due()
            if due is None:
                await self._summary_wake.wait()
                self._summary_wake = anyio.Event()
                continue
            await anyio.sleep(max(0.0, due - self.clock()) + 0.01)
            summary = self.policy.summary(self.host, self.clock())
            if summary is not None:
                self._queue(summary)

    async def _work(self, target: Target) -> None:
        await self._prepare(target)
        while not target.retired and not self.closed:
            if not len(target.queue):
                await target.wake.wait()
                target.wake = anyio.Event()
                continue
            alert = target.sending = target.queue.pop()
            try:
                error = await self.deliver(target, alert, min(self.settings.retries, MAX_RETRIES))
            finally:
                target.sending = None
            if self.closed:
                return  # drain() has audited it already: one row per alert and target
            if error is None:
                target.sent += 1
                self.counts["sent"] += 1
                self.report(alert, target.label, "sent")
            else:
                self._failed(target, error)
                self.report(alert, target.label, f"failed: {error}")

    async def drain(self, at_most: float) -> None:
        """The daemon stops: up to `at_most` seconds for the queued alerts to go out. Each alert still
        queued or being sent after that is counted and audited as not sent, so no admitted alert ends
        without a trace; from then on the workers end, and an alert raised later is audited as not sent."""
        with anyio.move_on_after(at_most):
            while any(len(t.queue) or t.sending for t in self.targets):  # noqa: ASYNC110 - no event for it
                await anyio.sleep(0.02)
        self.closed = True
        for target in self.targets:
            target.wake.set()  # its worker ends
            if target.sending is not None:
                self.report(target.sending, target.label, "unknown: the daemon stopped during its send")
            while len(target.queue):
                self._not_sent(target, target.queue.pop())

    def _not_sent(self, target: Target, alert: Alert) -> None:
        """An alert the stopping daemon will not send to `target`: counted and audited."""
        target.dropped += 1
        self.counts["dropped"] += 1
        self.report(alert, target.label, "not sent: the daemon stopped first")

    async def _prepare(self, target: Target) -> None:
        """Import apprise and read the URL before the first alert needs it (the import takes ~0.2 s, more
        on a busy machine); a URL apprise cannot use is said once, in the log."""
        def read() -> str | None:
            target.plugin, why = service(target.url)
            return why

        why = await self._off_loop(target, read, READ_WAIT)
        if why is not None:
            why = scrub(why, [target.url])
            target.last_error = f"{target.label}: {why}"
            self.log(f"alerts: {target.label}: {why}")

    def _failed(self, target: Target, error: str) -> None:
        now = self.clock()
        target.failed += 1
        self.counts["failed"] += 1
        target.last_error = self.last_error = f"{target.label}: {error}"
        target.last_error_at = self.last_error_at = now

    async def deliver(self, target: Target, alert: Alert, retries: int) -> str | None:
        """Send with retries and backoff: None once delivered, else the last error, scrubbed."""
        timeout = self.settings.timeout or 10.0
        error: str | None = "not sent"
        for attempt in range(retries + 1):
            if attempt:
                await anyio.sleep(min(BACKOFF_FIRST * 2 ** (attempt - 1), BACKOFF_MAX))
            # a send past twice its timeouts (a receiver trickling bytes) is left to finish alone
            error = await self._off_loop(target, lambda: self._send(target, alert, timeout), timeout * 3 + 5)
            if error is None:
                return None
            error = scrub(error, self.urls + [target.url])
            if error.startswith("not a URL"):
                break  # no retry helps a URL apprise cannot read
        return error

    async def _off_loop(self, target: Target, work: Callable[[], str | None], wait: float) -> str | None:
        """`work` in a daemon thread of the target's own: what it returned, or why it did not. Not
        anyio's worker threads: one abandoned there frees the target's limiter for the next (a thread
        per retry), and they are joined when the daemon exits (a hung receiver would hold its exit)."""
        async with target.lock:
            if target.left is not None and not target.left.is_set():
                return f"an earlier send has not ended for {self.clock() - target.left_since:.0f} s: not tried"
            return await self._in_thread(target, work, wait)

    async def _in_thread(self, target: Target, work: Callable[[], str | None], wait: float) -> str | None:
        """`work` in a new daemon thread, waited for at most `wait` s; one not ended by then is left to end alone."""
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        result: list[str | None] = []
        ended = threading.Event()

        def run() -> None:
            try:
                result.append(work())
            except Exception as exc:  # noqa: BLE001 - a plugin bug costs one alert, not the thread's report
                result.append(f"{type(exc).__name__}: {exc}")
            ended.set()
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except Exception:  # noqa: BLE001 - whatever it raises, the event loop has ended
                pass  # the daemon is stopping: no one waits for this send

        threading.Thread(target=run, name=f"alert send {target.n}", daemon=True).start()
        with anyio.move_on_after(wait):
            await done.wait()
        if result:
            return result[0]
        target.left, target.left_since = ended, self.clock()
        return f"no answer within {wait:g} s"

    def _send(self, target: Target, alert: Alert, timeout: float) -> str | None:
        """One attempt (a worker thread)."""
        if target.plugin is None:
            target.plugin, why = service(target.url)
            if target.plugin is None:
                return why
        return send_once(target.plugin, alert, timeout)

    async def test(self, alert: Alert) -> list[tuple[str, str | None]]:
        """Send `alert` to every target now (no policy, no queue, one try each, all at once): each
        target's label and None, or its error."""
        results: list[tuple[str, str | None]] = [(t.label, "not tried") for t in self.targets]

        async def one(i: int, target: Target) -> None:
            error = await self.deliver(target, alert, 0)
            results[i] = (target.label, error)
            if error is None:
                target.sent += 1
                self.counts["sent"] += 1
            else:
                self._failed(target, error)
            self.report(alert, target.label, "sent" if error is None else f"failed: {error}")

        async with anyio.create_task_group() as tg:
            for i, target in enumerate(self.targets):
                tg.start_soon(one, i, target)
        return results

    def health(self) -> dict[str, Any]:
        """The counters for `status` and the daemon's snapshot: never a URL, only labels."""
        return {"targets": [t.to_dict() for t in self.targets], **self.counts,
                "last_error": self.last_error, "last_error_at": self.last_error_at,
                "config_error": self.config_error, "config_warning": self.config_warning,
                "events": list(self.settings.events)}
