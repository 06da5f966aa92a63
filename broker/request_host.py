"""What the code answering clients' and admins' requests reads from the broker: besides
its config, store and managers (:class:`~rocketq.broker.host.BrokerHost`), its processors,
its replication and its counters.

A protocol of its own, apart from ``host.py``: the processors and replication it names
import ``host.py`` themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from rocketq.broker.host import BrokerHost
from rocketq.broker.metrics import BrokerCounters
from rocketq.broker.stats import BrokerStats

if TYPE_CHECKING:
    from rocketq.broker.flow_control import FlowControl
    from rocketq.broker.pop import PopService
    from rocketq.broker.pull_processor import PullProcessor
    from rocketq.broker.raft_member import RaftMember
    from rocketq.broker.send_processor import SendProcessor
    from rocketq.broker.transaction import TransactionalMessageService
    from rocketq.replication.ha.master import HAMaster
    from rocketq.replication.ha.slave import HASlave


class RequestHost(BrokerHost, Protocol):
    """The broker as its request handlers see it: its processors and its replication."""

    send: SendProcessor
    pull: PullProcessor
    pop: PopService
    transactions: TransactionalMessageService
    flow: FlowControl
    raft: RaftMember | None
    ha_master: HAMaster | None
    ha_slave: HASlave | None
    metrics: BrokerCounters | None
    stats: BrokerStats

    @property
    def grpc_port(self) -> int:
        """The port of the broker's apache.rocketmq.v2 endpoint; -1 without one."""
        ...
