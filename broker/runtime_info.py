"""What an admin reads about the broker itself: its runtime figures
(GET_BROKER_RUNTIME_INFO's table) and its effective config (GET_BROKER_CONFIG's keys)."""

from __future__ import annotations

import time
from dataclasses import fields
from importlib.metadata import PackageNotFoundError, version

from rocketq.broker.request_host import RequestHost


def broker_version() -> str:
    try:
        return version("rocketq")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def config_table(*configs: object) -> dict[str, str]:
    """The fields of config dataclasses as broker.toml would spell their values ("" for
    one left unset; a running broker's config has every port as a number). A secret key
    (the init user, the inner credentials) shows only whether it is set: ``******``."""
    table: dict[str, str] = {}
    for config in configs:
        for f in fields(config):  # type: ignore[arg-type]
            value = getattr(config, f.name)
            if value is None:
                text = ""
            elif f.metadata.get("secret"):
                text = "******" if value else ""
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, (list, tuple)):
                text = ";".join(str(v) for v in value)
            else:
                text = str(value)
            table[f.name] = text
    return table


def runtime_table(b: RequestHost) -> dict[str, str]:
    """The broker's runtime figures, every value a string (RocketMQ's KVTable)."""
    s = b.store
    table = {
        "brokerName": b.config.broker_name,
        "brokerId": str(b.config.broker_id),
        "brokerRole": b.config.broker_role,
        "brokerAddr": b.config.broker_addr,
        "commitLogMinOffset": str(s.min_phy_offset),
        "commitLogMaxOffset": str(s.max_phy_offset),
        "dispatchBehindBytes": str(s.dispatch_behind_bytes),
        "consumeQueues": str(len(s.queues.queues)),
        "consumeQueuesPreparing": str(s.queues.preparing),
        "consumeQueuesDirty": str(s.queues.dirty_count),
        "flushedOffset": str(s.flusher.flushed[0]),
        "bootTimestamp": str(int(b.boot_time * 1000)),
        "runtimeSeconds": str(int(time.time() - b.boot_time)),
        "sendsInFlight": str(b.flow.in_flight),
        "sendsRejected": str(b.flow.rejected),
        "pullsHeld": str(b.holds.held_count),
        "pullsFound": str(b.pull.found),
        "topics": str(len(b.topics.topics)),
        "topicCount": str(len(b.topics.topics)),
        "consumerGroups": str(len(b.consumers.groups)),
        "brokerVersionDesc": f"rocketq {broker_version()}",
        # The apache.rocketmq.v2 endpoint's port (-1: none): the endpoints of the other
        # brokers put it in the routes they answer RocketMQ 5's clients.
        "grpcListenPort": str(b.grpc_port),
    }
    # Whether the store takes writes (cluster-list's "store" column): writable, disk-full
    # (sends refused until space is freed) or failed (a write or fsync failed: until restart).
    disk = s.disk
    table["storeWriteState"] = disk.state_name
    table["diskUsedRatio"] = f"{disk.ratio:.2f}"
    refusal = s.write_refusal()
    if refusal is not None:
        table["storeWriteRefusal"] = refusal
    table.update(b.stats.runtime_info())
    table.update(b.registration.runtime_info())
    if b.ha_master is not None:
        table["haSlaves"] = str(len(b.ha_master.slaves))
        table["haSlaveAckOffset"] = str(b.ha_master.best_ack)
        if b.ha_master.slaves:  # no slave, no lag: lag_bytes() would give the whole log
            table["haLagBytes"] = str(b.ha_master.lag_bytes())
    if b.raft is not None:
        table.update(b.raft.runtime_info())
    if b.ha_slave is not None:
        table["haMaster"] = b.ha_slave.connected_to
        table["haMasterMaxOffset"] = str(b.ha_slave.master_max_offset)
        table["haLagBytes"] = str(b.ha_slave.lag_bytes())
    return table
