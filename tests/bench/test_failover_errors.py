"""The failover benchmark says why its senders waited: the distinct errors between a kill
and the first SEND_OK after it, with counts, in the order they first came."""

from __future__ import annotations

from rocketq.bench.failover_bench import _Sends


def test_errors_between_counts_the_window_only() -> None:
    sends = _Sends()
    sends.errors = [
        (1.0, "ConnectBrokerError: before the kill"),
        (2.0, "NotLeaderError: n1 is a follower"),
        (2.5, "RequestTimeoutError: send timed out"),
        (3.0, "NotLeaderError: n1 is a follower"),
        (9.0, "ConnectBrokerError: after the first SEND_OK"),
    ]
    assert sends.errors_between(2.0, 5.0) == [
        ("NotLeaderError: n1 is a follower", 2),
        ("RequestTimeoutError: send timed out", 1),
    ]
    assert sends.errors_between(5.0, 8.0) == []
