"""The error hierarchy as users see it in ``rocketq.errors``: one root, each error also the
builtin it is (timeouts ``TimeoutError``, unreachable servers ``ConnectionError``, bad
input ``ValueError``), a docstring on each, codes found by ``for_code``, pickling intact;
and real calls to a dead port and to a server that never answers, caught the way code that
knows nothing of rocketq catches them."""

from __future__ import annotations

import inspect
import pickle
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from rocketq import errors
from rocketq.common import exceptions
from rocketq.sdk.admin import Admin

PUBLIC_CLASSES = [
    value for name in errors.__all__ if inspect.isclass(value := getattr(errors, name))
]

TIMEOUTS = {
    errors.RequestTimeoutError,
    errors.FlushDiskTimeoutError,
    errors.FlushSlaveTimeoutError,
    errors.ConsumeMsgTimeoutError,
}
CONNECTIONS = {errors.ConnectBrokerError, errors.NoNameServerError}
VALUES = {
    errors.ConfigError,
    errors.MessageIllegalError,
    errors.PropertiesSizeExceededError,
    errors.BadMessageError,
    errors.RouteBodyError,
    errors.SubscriptionParseFailedError,
}


def test_every_public_error_is_a_rocketq_error_with_a_docstring_of_its_own() -> None:
    assert len(PUBLIC_CLASSES) >= len(exceptions.ALL_ERRORS) + 1
    for cls in PUBLIC_CLASSES:
        assert issubclass(cls, errors.RocketqError), cls
        doc = cls.__dict__.get("__doc__")
        assert doc and doc.strip(), f"{cls.__name__} has no docstring"
    # Every error class of the shared kernel is exported.
    defined = {
        value
        for value in vars(exceptions).values()
        if inspect.isclass(value) and issubclass(value, exceptions.RocketqError)
    }
    assert defined <= set(PUBLIC_CLASSES)


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_each_error_is_exactly_the_builtins_it_is(cls: type[errors.RocketqError]) -> None:
    assert issubclass(cls, TimeoutError) == (cls in TIMEOUTS)
    assert issubclass(cls, ConnectionError) == (cls in CONNECTIONS)
    assert issubclass(cls, ValueError) == (cls in VALUES)
    # The root comes first, so RocketqError's attributes win over the builtin's.
    assert cls.__mro__.index(errors.RocketqError) < cls.__mro__.index(Exception)


@pytest.mark.parametrize("cls", exceptions.ALL_ERRORS, ids=lambda c: c.__name__)
def test_codes_lookup_and_pickling_survive_the_second_base(
    cls: type[errors.RocketqError],
) -> None:
    assert errors.for_code(cls.code) is cls
    exc = cls("the broker said no")
    assert str(exc) == "the broker said no"
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc) and back.args == exc.args
    assert (back.code, back.name, back.retriable) == (cls.code, cls.name, cls.retriable)


def test_unknown_codes_are_system_errors() -> None:
    assert errors.for_code(123456) is errors.RocketqSystemError


def test_errors_with_their_own_constructors_pickle_with_their_attributes() -> None:
    refused = pickle.loads(pickle.dumps(errors.NotLeaderError("not the leader", leader="n2")))
    assert isinstance(refused, errors.NotLeaderError) and refused.leader == "n2"
    assert errors.NotLeaderError("no leader").leader is None
    bad = errors.BadMessageError.undecodable("T", 3, 42, "a torn record")
    back = pickle.loads(pickle.dumps(bad))
    assert isinstance(back, errors.BadMessageError) and isinstance(back, ValueError)
    assert (back.topic, back.queue_id, back.queue_offset, back.reason) == (
        "T",
        3,
        42,
        bad.reason,
    )
    assert str(back) == str(bad)


def test_the_raft_node_refuses_with_the_one_not_leader_error() -> None:
    from rocketq.replication.raft import node

    assert node.NotLeaderError is errors.NotLeaderError
    exc = node.not_leader("n3")
    assert isinstance(exc, errors.NotLeaderError) and exc.leader == "n3" and exc.retriable


def dead_addr() -> str:
    """An address nothing listens on: a port bound and released (never listened on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def stalled_server() -> Iterator[str]:
    """A real TCP server that takes connections (the kernel's backlog) and never reads."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


async def test_a_server_that_never_answers_is_a_timeout_error() -> None:
    with stalled_server() as addr:
        async with Admin(addr, timeout=0.3) as admin:
            try:
                await admin.broker_config(addr)
            except TimeoutError as exc:
                caught: BaseException = exc
            else:
                pytest.fail("a stalled broker answered")
    assert isinstance(caught, errors.RequestTimeoutError) and caught.retriable


async def test_a_dead_port_is_a_connection_error() -> None:
    addr = dead_addr()
    async with Admin(addr, timeout=1.0) as admin:
        with pytest.raises(ConnectionError) as broker:
            await admin.broker_config(addr)
        with pytest.raises(ConnectionError) as nameserver:
            await admin.topic_list()
    assert isinstance(broker.value, errors.ConnectBrokerError) and broker.value.retriable
    assert isinstance(nameserver.value, errors.NoNameServerError)
    assert addr in str(nameserver.value)


def test_no_nameserver_address_is_a_config_error() -> None:
    with pytest.raises(ValueError) as caught:
        Admin(" ; ")
    assert isinstance(caught.value, errors.ConfigError)
    assert "namesrv=" in str(caught.value)


def test_the_blocking_twins_raise_the_same_builtins() -> None:
    from rocketq import sync

    with (
        stalled_server() as addr,
        sync.Admin(addr, timeout=0.3) as admin,
        pytest.raises(TimeoutError) as stalled,
    ):
        admin.broker_config(addr)
    assert isinstance(stalled.value, errors.RequestTimeoutError)
    dead = dead_addr()
    with sync.Admin(dead, timeout=1.0) as admin, pytest.raises(ConnectionError):
        admin.broker_config(dead)
