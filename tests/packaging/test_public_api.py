"""The public API is ``rocketq`` itself, ``rocketq.sync`` its blocking twins and
``rocketq.errors`` every error class."""

from __future__ import annotations

import inspect
import subprocess
import sys

import rocketq
import rocketq.errors
import rocketq.sync
from rocketq.common import exceptions as error_module
from rocketq.sdk import admin, producer, pull_consumer, push_consumer, transaction

CLIENTS = {
    "Producer": producer.Producer,
    "TransactionProducer": transaction.TransactionProducer,
    "PushConsumer": push_consumer.PushConsumer,
    "PullConsumer": pull_consumer.PullConsumer,
    "Admin": admin.Admin,
}


def test_rocketq_exports_the_sdk() -> None:
    for name in (
        "Producer",
        "TransactionProducer",
        "PushConsumer",
        "PullConsumer",
        "Admin",
        "Message",
        "MessageSelector",
        "ConsumeResult",
        "ConsumeFrom",
        "MessageModel",
        "SendStatus",
        "SendResult",
        "TransactionState",
        "TransactionListener",
        "split_batches",
    ):
        assert name in rocketq.__all__, name
    for name, cls in CLIENTS.items():
        assert getattr(rocketq, name) is cls
    assert all(hasattr(rocketq, name) for name in rocketq.__all__)
    assert rocketq.__version__ == "0.1.0"


def test_sync_has_a_blocking_twin_of_every_client() -> None:
    for name, cls in CLIENTS.items():
        twin = getattr(rocketq.sync, name)
        assert twin is not cls and twin.async_class is cls, name
    # The data types are the same objects in both.
    for name in ("Message", "ConsumeResult", "ConsumeFrom", "MessageSelector", "SendStatus"):
        assert getattr(rocketq.sync, name) is getattr(rocketq, name)
    assert all(hasattr(rocketq.sync, name) for name in rocketq.sync.__all__)


def test_errors_exports_every_error_class() -> None:
    defined = {
        name
        for name, value in vars(error_module).items()
        if inspect.isclass(value) and issubclass(value, error_module.RocketqError)
    }
    assert defined <= set(rocketq.errors.__all__)
    for name in defined:
        assert getattr(rocketq.errors, name) is getattr(error_module, name)
    assert rocketq.errors.for_code(17) is rocketq.errors.TopicNotExistError


def test_python_m_rocketq_is_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rocketq", "admin", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: rocketq admin" in done.stdout
