"""rocketq: a RocketMQ-style distributed message queue written in Python.

The SDK's public names, asyncio first::

    from rocketq import Message, Producer

    async with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        await producer.send(Message(topic="T", body=b"hello"))

``rocketq.sync`` has blocking twins with the same names and methods, ``rocketq.errors``
every error class. The servers, the store and the CLI live in the subpackages
(``rocketq.broker``, ``rocketq.storage``, ``rocketq.cli.main`` ...); ``python -m rocketq``
runs the CLI.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketq.common.message import Message, MessageExt, MessageQueue
    from rocketq.sdk.admin import Admin
    from rocketq.sdk.consumer_config import ConsumerConfig, PullConsumerConfig
    from rocketq.sdk.consumer_types import (
        ConsumeFrom,
        ConsumeResult,
        MessageModel,
        MessageSelector,
    )
    from rocketq.sdk.metrics import ClientMetrics
    from rocketq.sdk.producer import (
        Producer,
        SendResult,
        SendStatus,
        split_batches,
    )
    from rocketq.sdk.producer_config import ProducerConfig
    from rocketq.sdk.pull_consumer import PullConsumer
    from rocketq.sdk.push_consumer import PushConsumer
    from rocketq.sdk.transaction import (
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
        TransactionState,
    )


class _PureFinder(importlib.abc.MetaPathFinder):
    """With ``ROCKETQ_PURE`` set, a compiled module loads from the source beside its
    extension: the whole process (and the servers it starts, which inherit the variable)
    runs the pure package, for comparisons of the two builds (``rocketq bench builds``)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("rocketq."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return None
        folder, name = os.path.split(origin)
        source = os.path.join(folder, name.split(".", 1)[0] + ".py")
        if not os.path.exists(source):
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def _check_compiled() -> None:
    """Refuse compiled modules built in place (``make compiled``) from sources that have
    changed since: they would run the old code. ``_compiled.json`` is written by that build
    only (a wheel has none)."""
    marker = os.path.join(os.path.dirname(__file__), "_compiled.json")
    try:
        with open(marker, encoding="utf-8") as f:
            stamps = json.load(f)
        stale = [
            module
            for module, stamp in stamps.items()
            if not os.path.exists(stamp["source"])
            or os.stat(stamp["source"]).st_mtime_ns != stamp["mtime_ns"]
        ]
    except FileNotFoundError:
        return
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ImportError(
            f"{marker} is unreadable ({exc}): `make compiled` rebuilds the compiled modules, "
            "`make pure` removes them"
        ) from None
    if stale:
        raise ImportError(
            f"the compiled {', '.join(stale)} {'is' if len(stale) == 1 else 'are'} older than "
            "the source: `make compiled` rebuilds the compiled modules, `make pure` removes them"
        )


if os.environ.get("ROCKETQ_PURE"):
    sys.meta_path.insert(0, _PureFinder())
else:
    _check_compiled()

try:
    __version__ = version("rocketq")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# Where each public name lives. They are imported on first use, so the servers and the CLI,
# which import rocketq.<subpackage> (and so this package first), do not load the SDK.
_HOMES = {
    "Message": "rocketq.common.message",
    "MessageExt": "rocketq.common.message",
    "MessageQueue": "rocketq.common.message",
    "Admin": "rocketq.sdk.admin",
    "ConsumeFrom": "rocketq.sdk.consumer_types",
    "ConsumeResult": "rocketq.sdk.consumer_types",
    "MessageModel": "rocketq.sdk.consumer_types",
    "MessageSelector": "rocketq.sdk.consumer_types",
    "ClientMetrics": "rocketq.sdk.metrics",
    "Producer": "rocketq.sdk.producer",
    "ProducerConfig": "rocketq.sdk.producer_config",
    "SendResult": "rocketq.sdk.producer",
    "SendStatus": "rocketq.sdk.producer",
    "split_batches": "rocketq.sdk.producer",
    "PullConsumer": "rocketq.sdk.pull_consumer",
    "PullConsumerConfig": "rocketq.sdk.consumer_config",
    "ConsumerConfig": "rocketq.sdk.consumer_config",
    "PushConsumer": "rocketq.sdk.push_consumer",
    "TransactionListener": "rocketq.sdk.transaction",
    "TransactionProducer": "rocketq.sdk.transaction",
    "TransactionSendResult": "rocketq.sdk.transaction",
    "TransactionState": "rocketq.sdk.transaction",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its home module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rocketq' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    """The module's names, the public ones not imported yet included."""
    return sorted([*globals(), *_HOMES])


__all__ = [
    "Admin",
    "ClientMetrics",
    "ConsumeFrom",
    "ConsumeResult",
    "ConsumerConfig",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PullConsumerConfig",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "__version__",
    "split_batches",
]
