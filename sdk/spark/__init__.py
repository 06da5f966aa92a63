"""rocketq on Spark: the ``rocketq`` data source (Spark 4's Python Data Source API).

Install the extra (``pip install 'rocketq[spark]'``), then::

    from rocketq.sdk.spark import register
    register(spark)
    df = spark.read.format("rocketq").option("namesrv", "127.0.0.1:9876") \\
        .option("topic", "Orders").load()

The options, the schema and the write columns are in README.md ("Spark").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketq.sdk.spark.source import SCHEMA, RocketqDataSource


def register(spark: Any) -> None:
    """Make ``format("rocketq")`` known to ``spark`` (a SparkSession)."""
    from rocketq.sdk.spark.source import RocketqDataSource

    spark.dataSource.register(RocketqDataSource)


def __getattr__(name: str) -> Any:
    # pyspark is imported when the data source is first used, not with this package:
    # `rocketq pipeline` checks for it first and says what to install.
    if name in ("SCHEMA", "RocketqDataSource"):
        from rocketq.sdk.spark import source

        return getattr(source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SCHEMA", "RocketqDataSource", "register"]
