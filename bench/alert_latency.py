"""Time from a gate opening to the webhook receiving its alert, beside a direct send of the same alert.

    .venv/bin/python bench/alert_latency.py [-n 50]

A throw-away daemon (its own LOOPWARDEN_HOME) whose config file points `notify.urls` at a JSON webhook
receiver on loopback (tests/fakes/webhook_receiver.py, a thread of this process). n sessions of the
bundled `gate_request` scenario run one after the other; for each, the latency is the receiver's
arrival time minus the gate's `opened_at` (the daemon's timestamp when it judged the agent's request).
The daemon imports apprise and reads the URL when it starts (0.4 to 1 s, more on a busy machine); the
bench waits for that, then reports the first alert apart.

Baselines in the same run, to the same receiver, n times each:
  (a) a raw HTTP POST of the same JSON body (urllib, a new connection each time): the floor;
  (b) apprise's json:// plugin called directly in this process: what apprise itself costs.
The daemon's part is the difference: routing the gate record, the policy, the queue, the worker thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from live_common import PY, BenchDaemon, pct, wait_for

from loopwarden.runtime.client import Client
from loopwarden.sessions.scripted import load_scenario
from tests.fakes.webhook_receiver import WebhookReceiver


def _row(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (f"{name:<44} n={len(ms):<4} p50 {pct(ms, 0.5):7.2f} ms  p99 {pct(ms, 0.99):7.2f} ms  "
            f"max {max(ms):7.2f} ms")


def daemon_alerts(hook: WebhookReceiver, n: int) -> tuple[float, list[float]]:
    """(the first alert's latency, the others'): gate opened_at to arrival at the receiver."""
    bench = BenchDaemon("alerts")
    (bench.home / "config.toml").write_text(f'[notify]\nurls = ["{hook.url("daemon")}"]\nmax_per_minute = 0\n'
                                            'dedup_window = "0s"\nretries = 0\n')
    latencies: list[float] = []
    with bench:
        sets = list(load_scenario("gate_request").config)
        with Client.connect(bench.paths, autostart=False, name="bench") as c:
            wait_for(lambda: all(t["ready"] for t in c.request("ping")["alerts"]["targets"]), 30,
                     "apprise to be imported in the daemon")
            for _ in range(n):
                sid = c.request("run", spec={"command": [PY, "-m", "loopwarden.sessions.scripted", "gate_request"],
                                             "adapter": "native", "sets": sets, "name": "gate_request"})["id"]
                ref = f"{sid}:g1"
                got = hook.wait_for(lambda r, ref=ref: ref in r.message, timeout=30, path="daemon")[0]
                gate = next(g for g in c.request("gates") if g["ref"] == ref)
                latencies.append(got.at - gate["opened_at"])
                c.request("deny", gate=ref, note="bench")
                wait_for(lambda sid=sid: c.request("status", session=sid)["state"] == "terminated", 20,
                         "the session to end")
    return latencies[0], latencies[1:]


def raw_posts(hook: WebhookReceiver, body: bytes, n: int) -> list[float]:
    out = []
    for i in range(n):
        mark = f"raw-{i}"
        data = body.replace(b"MARK", mark.encode())
        start = time.time()
        request = urllib.request.Request(f"http://127.0.0.1:{hook.port}/raw", data=data,
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        got = hook.wait_for(lambda r, mark=mark: mark in r.message, path="raw")[0]
        out.append(got.at - start)
    return out


def apprise_direct(hook: WebhookReceiver, title: str, message: str, n: int) -> list[float]:
    import apprise

    plugin = apprise.Apprise.instantiate(hook.url("direct"))
    out = []
    for i in range(n):
        mark = f"direct-{i}"
        start = time.time()
        plugin.notify(body=message.replace("MARK", mark), title=title, notify_type=apprise.NotifyType.WARNING)
        got = hook.wait_for(lambda r, mark=mark: mark in r.message, path="direct")[0]
        out.append(got.at - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=50, help="gates (and baseline sends) to time (default 50)")
    args = parser.parse_args()
    with WebhookReceiver() as hook:
        first, latencies = daemon_alerts(hook, args.n)
        sample = hook.messages("daemon")[-1]
        title, message = sample.title, sample.message + "\nMARK"
        body = json.dumps({"version": "1.0", "title": title, "message": message, "attachments": [],
                           "type": "warning"}).encode()
        raw = raw_posts(hook, body, args.n)
        direct = apprise_direct(hook, title, message, args.n)
    print(f"alert latency, {args.n} gates (gate_request scenario), one JSON webhook on loopback")
    print(_row("(a) raw HTTP POST (urllib)", raw))
    print(_row("(b) apprise json:// direct, in process", direct))
    print(_row("daemon: gate opened -> webhook received", latencies))
    print(f"{'daemon: the first alert':<44} {first * 1000:.1f} ms")
    print(f"added by the daemon over apprise direct: p50 {(pct(latencies, 0.5) - pct(direct, 0.5)) * 1000:.2f} ms, "
          f"p99 {(pct(latencies, 0.99) - pct(direct, 0.99)) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
