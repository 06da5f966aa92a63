"""One local Spark (``local[2]``) per test module, with the ``rocketq`` data source
registered, and a cluster of two broker groups per module (sharing one is what keeps a
module's Spark jobs cheap: the cluster outlives each test's topics)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.sdk.spark import register
from tests.integration.conftest import SMALL_STORE, make_cluster

__all__ = ["make_cluster"]  # the integration tests' fixture, for clusters of a test's own


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={work}")
        .getOrCreate()
    )
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One nameserver and two broker groups (broker-a, broker-b) of one broker each."""
    data_dir: Path = tmp_path_factory.mktemp("cluster")
    cluster = LocalCluster(
        ClusterSpec(
            data_dir=data_dir,
            brokers=2,
            broker_settings={**SMALL_STORE, "enable_property_filter": "true"},
        )
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def wait_for(cond: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll ``cond`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
