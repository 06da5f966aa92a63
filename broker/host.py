"""What the broker's services read from the broker that owns them.

The broker (``broker.py``) builds every manager and service and hands itself to those
that need its other parts. They see it through these protocols, not through ``Broker``,
so no module of the package imports the broker module but the CLI's start-up: the
dependencies point one way, from the broker to its parts.
"""

from __future__ import annotations

from typing import Protocol

from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.server_security import ServerSecurity
from rocketq.broker.config import BrokerConfig
from rocketq.broker.consumer_manager import ConsumerManager
from rocketq.broker.consumer_offset import ConsumerOffsetManager
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.broker.registration import NameServerRegistration
from rocketq.broker.schedule import ScheduleMessageService
from rocketq.broker.subscription_group import SubscriptionGroupManager
from rocketq.broker.timer import TimerMessageStore
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.common.config import StoreConfig
from rocketq.remoting.tls import ClientSecurity
from rocketq.storage.message_store import MessageStore


class BrokerHost(Protocol):
    """The broker's config, its store and the managers of its runtime state."""

    config: BrokerConfig
    store_config: StoreConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    holds: PullRequestHoldService
    locks: RebalanceLockManager
    schedule: ScheduleMessageService
    timer: TimerMessageStore
    registration: NameServerRegistration
    boot_time: float
    # How the broker's own calls to other nodes are signed and encrypted (its inner
    # credentials, its TLS client settings); None: plain and unsigned.
    client_security: ClientSecurity | None
    # The broker's security keys as applied (the access check, the ports' TLS).
    security: ServerSecurity
    # The credentials the cluster's nodes sign their own calls with.
    inner_credentials: Credentials | None
    # Users and ACL policies (kept whether or not auth is on, so that they can be made
    # before it is turned on).
    auth_metadata: AuthMetadata
