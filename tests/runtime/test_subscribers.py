"""Subscribers (runtime/subscribers.py): queues bounded by bytes, skips counted, a reader that
takes nothing cut off with a reason; over a real unix socket pair."""

from __future__ import annotations

import socket

import anyio
import orjson
import pytest
from anyio.abc import UNIXSocketStream

from loopwarden.runtime import subscribers
from loopwarden.runtime.subscribers import HEARTBEAT_MESSAGE, MESSAGE_LIMIT, QueueBudget, Subscriber, encode
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio


def message(n: int, size: int = 1000) -> bytes:
    return orjson.dumps({"kind": "event", "n": n, "pad": "x" * size}) + b"\n"


def test_a_full_queue_skips_and_counts_and_never_grows() -> None:
    sub = Subscriber(None, True, QueueBudget(), limit=10_000, clock=Clock(100.0))
    for n in range(100):
        sub.offer(message(n))
    assert sub.queued <= 10_000 and len(sub.queue) == 9 and sub.skipped == 91


def test_all_queues_together_stay_under_the_budget_yet_a_reader_that_keeps_up_is_served(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subscribers, "FAIR_SHARE", 3_000)
    budget = QueueBudget(limit=25_000)
    subs = [Subscriber(None, True, budget, limit=20_000, clock=Clock(100.0)) for _ in range(3)]
    for n in range(30):
        for sub in subs:
            sub.offer(message(n))
    assert budget.used <= 25_000 + 3 * 3_000 and budget.used == sum(s.queued for s in subs)
    keeping_up = Subscriber(None, True, budget, limit=20_000, clock=Clock(100.0))
    keeping_up.offer(message(99))  # the budget is spent by the stuck ones, yet this one gets its message
    assert len(keeping_up.queue) == 1 and keeping_up.skipped == 0
    for sub in [*subs, keeping_up]:
        sub.release()
    assert budget.used == 0


def test_a_reader_that_takes_nothing_is_cut_off_only_after_the_cutoff() -> None:
    clock = Clock(100.0)
    sub = Subscriber(None, True, QueueBudget(), limit=5_000, cutoff=30.0, clock=clock)
    for n in range(10):
        sub.offer(message(n))
    clock.now += 29.0
    sub.offer(message(99))
    assert sub.cut_reason is None
    clock.now += 2.0
    sub.offer(message(100))
    assert sub.cut_reason is not None and "took no message for 31 s" in sub.cut_reason


def test_an_idle_subscription_is_never_cut_off() -> None:
    clock = Clock(100.0)
    sub = Subscriber(None, True, QueueBudget(), limit=5_000, clock=clock)
    clock.now += 3600  # nothing to send for an hour is not a stall
    for n in range(3):
        sub.offer(message(n))
    assert sub.cut_reason is None and sub.skipped == 0


def test_wants_filters_by_session_and_by_kind() -> None:
    sub = Subscriber({"s1"}, False, QueueBudget())
    assert sub.wants("s1", is_event=False) and not sub.wants("s1", is_event=True) and not sub.wants("s2", False)


def test_a_record_too_long_for_one_message_is_clipped() -> None:
    line, trouble = encode("event", "s1", {"type": "tool_result", "output": "y" * 100_000})
    assert trouble is None and len(line) <= MESSAGE_LIMIT and orjson.loads(line)["data"]["clipped"] is True


def test_a_record_orjson_cannot_write_goes_out_cut_and_says_why() -> None:
    deep: dict = {}
    node = deep
    for _ in range(400):
        node["k"] = {}
        node = node["k"]
    line, trouble = encode("event", "s1", {"type": "tool_call", "args": deep})
    assert trouble is not None and orjson.loads(line)["kind"] == "event"


async def test_pump_delivers_in_order_with_the_skip_count_then_the_cut_reason() -> None:
    left, right = socket.socketpair()
    clock = Clock(100.0)
    sub = Subscriber(None, True, QueueBudget(), limit=3_500, clock=clock)
    for n in range(5):
        sub.offer(message(n))  # three fit, two are skipped
    async with await UNIXSocketStream.from_socket(left) as stream, anyio.create_task_group() as tg:
        tg.start_soon(sub.pump, stream)
        reader = right.makefile("rb")
        got = [orjson.loads(await anyio.to_thread.run_sync(reader.readline)) for _ in range(4)]
        sub.cut("cut off: a test")
    tail = [orjson.loads(line) for line in reader.readlines()]
    right.close()
    assert [g.get("n") for g in got] == [None, 0, 1, 2] and got[0] == {"kind": "skipped", "count": 2}
    assert tail == [{"kind": "cut", "reason": "cut off: a test"}]


async def test_a_reader_that_never_takes_even_the_first_reply_is_cut_off() -> None:
    left, right = socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    clock = Clock(100.0)
    sub = Subscriber(None, True, QueueBudget(), limit=5_000, cutoff=30.0, clock=clock)
    sub.first(message(0, size=1 << 20))  # far more than the socket takes: the pump blocks sending it
    async with await UNIXSocketStream.from_socket(left) as stream:
        with anyio.fail_after(5):  # the blocked send is cancelled and the pump returns
            async with anyio.create_task_group() as tg:
                tg.start_soon(sub.pump, stream)
                await anyio.sleep(0.1)  # lets the pump start and block on the full socket (what is asserted
                for n in range(10):     # below is that it returns, not when)
                    sub.offer(message(n))
                clock.now += 31.0
                sub.offer(message(11))
    right.close()
    assert sub.cut_reason is not None and "took no message" in sub.cut_reason


class CountingStream:
    """A real socket stream that records the size of each write (the pump's, then the cut line)."""

    def __init__(self, stream: UNIXSocketStream) -> None:
        self.stream = stream
        self.writes: list[int] = []

    async def send(self, data: bytes) -> None:
        self.writes.append(len(data))
        await self.stream.send(data)


async def test_what_waits_goes_out_in_few_writes_in_order_and_the_budget_gets_every_byte_back() -> None:
    left, right = socket.socketpair()
    budget = QueueBudget()
    sub = Subscriber(None, True, budget, clock=Clock(100.0))
    for n in range(600):  # 600 x ~1 KB: more than one write takes (WRITE_BYTES)
        sub.offer(message(n))
    assert budget.used == sub.queued > subscribers.WRITE_BYTES
    async with await UNIXSocketStream.from_socket(left) as raw, anyio.create_task_group() as tg:
        stream = CountingStream(raw)
        tg.start_soon(sub.pump, stream)
        reader = right.makefile("rb")
        got = [orjson.loads(await anyio.to_thread.run_sync(reader.readline))["n"] for _ in range(600)]
        sub.cut("cut off: a test")
    right.close()
    sub.release()
    assert got == list(range(600))
    batches = stream.writes[:-1]  # the last write is the cut line
    assert 2 <= len(batches) <= 4 and all(size <= subscribers.WRITE_BYTES + 2_000 for size in batches)
    assert budget.used == 0 and sub.sending == 0


def test_bytes_being_written_count_against_the_subscribers_limit() -> None:
    sub = Subscriber(None, True, QueueBudget(), limit=5_000, clock=Clock(100.0))
    for n in range(4):
        sub.offer(message(n))
    sub._take()  # four messages taken for a write still under way
    sub.offer(message(4))
    assert sub.skipped == 1 and not sub.queue  # the queue is empty, yet the subscriber holds its limit
    near = Subscriber(None, True, QueueBudget(), limit=5_000, clock=Clock(100.0))
    for n in range(3):
        near.offer(message(n))
    near._take()  # three under way: a fourth still fits
    near.offer(message(3))
    assert near.skipped == 0 and len(near.queue) == 1


def test_a_heartbeat_goes_only_to_a_subscription_sent_nothing_for_its_interval() -> None:
    clock = Clock(100.0)
    budget = QueueBudget()
    sub = Subscriber(None, True, budget, clock=clock)
    clock.now += 4.0
    assert not sub.keepalive(5.0)  # quiet for less than the interval
    clock.now += 1.0
    assert sub.keepalive(5.0) and list(sub.queue) == [HEARTBEAT_MESSAGE] and budget.used == len(HEARTBEAT_MESSAGE)
    clock.now += 60.0
    assert not sub.keepalive(5.0) and len(sub.queue) == 1  # one waits already: that reader is behind, not quiet
    sub._take()
    clock.now += 60.0
    assert not sub.keepalive(5.0)  # nor while a write to it is under way (it stopped reading: the write waits)
    sub.sending = 0
    sub.offer(message(1))
    sub._take()
    sub.sending = 0
    clock.now += 1.0
    assert not sub.keepalive(5.0)  # a record went out a second ago: no heartbeat needed
    sub.cut("cut off: a test")
    clock.now += 60.0
    assert not sub.keepalive(5.0)
    waiting = Subscriber(None, True, QueueBudget(), clock=clock)
    waiting.first(b'{"id":1}\n')
    clock.now += 60.0
    assert not waiting.keepalive(5.0)  # the reply to `subscribe` comes first
