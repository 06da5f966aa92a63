"""Fixtures for tests against a real cluster: nameserver and broker processes on free ports,
started by the launcher that ``rocketq cluster up`` uses.

``cluster`` is one nameserver and one broker group; ``make_cluster(brokers=2, ...)`` starts
others (any :class:`~cluster.launcher.ClusterSpec` field but ``data_dir``). Every cluster
is stopped in teardown, even when the test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.cluster.launcher import ClusterSpec, LocalCluster

# Delay levels for tests: levels 1 and 2 are 1 s and 2 s (delayed-message tests); the
# levels retries use (3 + reconsume times) are 100 ms, so 16 retries take seconds.
TEST_DELAY_LEVELS = "1s 2s " + " ".join(["100ms"] * 16)
# Small CommitLog segments: a broker start does not map 1 GiB per test.
SMALL_STORE: dict[str, str] = {
    "mapped_file_size_commit_log": "67108864",
    "message_delay_level": TEST_DELAY_LEVELS,
}

MakeCluster = Callable[..., LocalCluster]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    started: list[LocalCluster] = []

    def make(**spec_kwargs: Any) -> LocalCluster:
        settings = {**SMALL_STORE, **spec_kwargs.pop("broker_settings", {})}
        data_dir = tmp_path / f"cluster-{len(started)}"
        spec = ClusterSpec(data_dir=data_dir, broker_settings=settings, **spec_kwargs)
        cluster = LocalCluster(spec)
        started.append(cluster)
        cluster.start()
        return cluster

    try:
        yield make
    finally:
        errors = []
        for cluster in reversed(started):
            try:
                cluster.stop()
            except Exception as exc:  # stop the others, then report
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def cluster(make_cluster: MakeCluster) -> LocalCluster:
    return make_cluster()


@pytest.fixture
def cluster_ha(make_cluster: MakeCluster) -> LocalCluster:
    """One nameserver and one broker group of an ASYNC_MASTER and its slave."""
    return make_cluster(replication="ha")
