"""A pod session as the store keeps it, for tests of what `ls`, `status` and the console show of one where no
cluster is at hand: a session that ran here is rewritten in the stopped daemon's store as a pod session whose pod
was deleted under it is written (state lost, lost how: host, its pod in the snapshot), and the daemon started again
reads it back as it reads any ended session. The cluster's names are untrusted text, so callers can put escapes in.
"""

from __future__ import annotations

from typing import Any

from loopwarden.runtime.store import Batch, Store
from tests.support.daemon import Harness

POD = {"on": "kubernetes:prod/agents", "context": "prod", "namespace": "agents", "pod": "lw-s1-ab12cd",
       "node": "node1", "image": "local/py3:1"}


def stored_as_lost_pod(lw: Harness, sid: str, **pod: Any) -> dict[str, Any]:
    """Rewrite ended session `sid` as a pod session whose host was lost (the daemon stopped meanwhile, then started
    again); its pod: POD with `pod`'s fields instead. Returns the pod as stored."""
    shown = {**POD, **pod}
    text = f"host lost: pod {shown['pod']} on node {shown['node']} was deleted"
    shown["lost"] = text
    lw.stop()
    with Store.open(lw.paths.database) as store:
        row = store.session(sid)
        assert row is not None and isinstance(row["snapshot"], dict), row
        lost = {"how": "host", "text": text}
        snap = {**row["snapshot"], "state": "lost", "termination": "lost", "termination_text": text, "lost": lost,
                "pod": shown, "cwd": "/workspace"}
        store.write(Batch(sessions_upsert=[{"id": sid, "state": "lost", "termination": "lost",
                                            "termination_text": text, "lost": lost, "snapshot": snap}]))
    lw.start()
    return shown
