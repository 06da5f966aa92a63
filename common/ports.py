"""The ports a server listens on, named as its ready line names them (``client``, ``ha``,
``raft``, ``metrics``), and the error a server raises when it cannot listen on one.

A server started with port 0 binds any free port and reports the number it got; a server
given a port binds that one or fails with :class:`PortBindError`, which says which port it
was and whether another process holds it, so that whoever started the server (the local
launcher) can tell a lost port race from any other failure.
"""

from __future__ import annotations

import errno
from typing import Final, Literal, get_args

PortName = Literal["client", "ha", "raft", "metrics", "grpc"]
PORT_NAMES: Final[tuple[PortName, ...]] = get_args(PortName)


class PortBindError(OSError):
    """A server could not listen on one of its ports. ``name`` says which
    (``client``, ``ha``, ``raft`` or ``metrics``), ``port`` the number it asked for,
    ``errno`` why (:attr:`in_use`: another process holds it)."""

    def __init__(self, message: str, *, name: PortName, port: int, code: int | None) -> None:
        super().__init__(message)
        self.name: PortName = name
        self.port = port
        self.errno = code  # OSError's own field

    @property
    def in_use(self) -> bool:
        """Another process listens there (EADDRINUSE)."""
        return self.errno == errno.EADDRINUSE

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild, (str(self), self.name, self.port, self.errno)


def _rebuild(message: str, name: PortName, port: int, code: int | None) -> PortBindError:
    return PortBindError(message, name=name, port=port, code=code)
