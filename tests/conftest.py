"""Fixtures every test package may use."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another program listens on (as another program could hold 9876)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]
