"""The real one-node Kubernetes cluster the cluster tests use: the one `.ci/kubernetes/prepare.sh ROOT` builds and
starts (CI does it in the background: `.ci/run`), named by LOOPWARDEN_TEST_CLUSTER=ROOT. Any test folder may ask
for the `cluster` fixture (the README's cluster story does); tests/conftest.py waits for it before a test that
does, outside the test's own timeout."""

from __future__ import annotations

import functools
import os
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.kubernetes.helpers import Cluster
from tests.support.waiting import wait_for

CLUSTER_VARIABLE = "LOOPWARDEN_TEST_CLUSTER"
PREPARE_TIMEOUT = 20 * 60.0  # CI's build takes about 7 minutes on two cores, longer beside the other tests
HOW_TO_GET_ONE = f"as root: .ci/kubernetes/prepare.sh ROOT, then {CLUSTER_VARIABLE}=ROOT"


@functools.cache
def prepared_cluster() -> Cluster | str | AssertionError:
    """The cluster LOOPWARDEN_TEST_CLUSTER names once its preparation has ended; or why there is none (a str:
    the tests skip); or the timeout, if it never ended (the tests fail). Waits once a process, at most
    PREPARE_TIMEOUT, for ROOT/ready or ROOT/unavailable."""
    root_name = os.environ.get(CLUSTER_VARIABLE)
    if not root_name:
        return f"no cluster: {CLUSTER_VARIABLE} is unset ({HOW_TO_GET_ONE})"
    root = Path(root_name)
    ready, unavailable = root / "ready", root / "unavailable"
    try:
        wait_for(lambda: ready.exists() or unavailable.exists(), timeout=PREPARE_TIMEOUT, every=2.0,
                 what=f"{ready} or {unavailable} (.ci/kubernetes/prepare.sh {root}; its logs: {root}/logs/)")
    except AssertionError as timeout:
        return timeout
    if not ready.exists():
        return f"no cluster on this machine: {unavailable.read_text().strip()}"
    return Cluster(root=root, kubeconfig=Path(ready.read_text().strip()),
                   operator_kubeconfig=root / "operator.kubeconfig")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """A test using the cluster waits for its preparation before the test's own timeout starts to run, so that
    the wait is bounded by PREPARE_TIMEOUT and the test still by pytest-timeout's limit."""
    if "cluster" in getattr(item, "fixturenames", ()):
        prepared_cluster()
    yield


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The running cluster; skips, in one line, where there is none (the variable unset, or the machine
    cannot run one: prepare.sh's reason)."""
    found = prepared_cluster()
    if isinstance(found, str):
        pytest.skip(found)
    if isinstance(found, AssertionError):
        raise found
    return found


