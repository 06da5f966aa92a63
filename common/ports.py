"""The ports a server listens on, named as its ready line names them (``client``, ``ha``,
``raft``, ``metrics``), and the error a server raises when it cannot listen on one.

A server started with port 0 binds any free port and reports the number it got; a server
given a port binds that one or fails with :class:`PortBindError`, which says which port it
was and whether another process holds it, so that whoever started the server (the local
launcher) can tell a lost port race from any other failure.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
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


# -- listening sockets handed down by the process that starts a server ---------------------
#
# The local launcher binds the ports it chooses itself and hands each listening socket to
# the server it starts as an inherited file descriptor, named on the command line
# (``--listen-fd raft=5``), as systemd's socket activation hands a service its sockets. A
# port held from its choice to the server's accept is a port no other process can take in
# between. (systemd's own convention, fds from 3 on with LISTEN_PID set to the child's pid,
# cannot be met by a process that starts its children with subprocess: neither the fd
# numbers nor the child's pid can be set before the exec.)


def listen_fd_arg(name: str, sock: socket.socket) -> str:
    """The ``NAME=FD`` of ``--listen-fd`` for a socket handed down to a child."""
    return f"{name}={sock.fileno()}"


def inherited_socket(fd: int, what: str) -> socket.socket:
    """The listening TCP socket open at ``fd`` (inherited from the starting process), taken
    over: not passed on to processes this one starts. ValueError naming ``what`` when the
    fd is not open, not a socket, or not a listening TCP socket."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise ValueError(
            f"--listen-fd {what}={fd}: not an open socket ({exc.strerror or exc})"
        ) from None
    listening = sock.type == socket.SOCK_STREAM and sock.family in (
        socket.AF_INET,
        socket.AF_INET6,
    )
    if listening:
        listening = bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    if not listening:
        sock.detach()  # not ours to close: the fd stays as it was
        raise ValueError(f"--listen-fd {what}={fd}: not a listening TCP socket")
    sock.set_inheritable(False)
    return sock


def parse_listen_fds(specs: Sequence[str], allowed: Sequence[str]) -> dict[str, socket.socket]:
    """``--listen-fd NAME=FD`` options as listening sockets by name. ValueError naming the
    option when one is malformed, names a port not in ``allowed`` or twice, or its fd is
    not a listening socket (none is taken over then)."""
    wanted: dict[str, int] = {}
    for spec in specs:
        name, sep, number = spec.partition("=")
        if not sep or not number.strip().isdigit():
            raise ValueError(f"--listen-fd {spec!r}: expected NAME=FD, such as client=3")
        if name not in allowed:
            raise ValueError(
                f"--listen-fd {spec!r}: no port {name!r} here; expected one of {', '.join(allowed)}"
            )
        if name in wanted:
            raise ValueError(f"--listen-fd {spec!r}: the {name} port is given twice")
        wanted[name] = int(number)
    taken: dict[str, socket.socket] = {}
    try:
        for name, fd in wanted.items():
            taken[name] = inherited_socket(fd, name)
    except ValueError:
        for sock in taken.values():
            sock.detach()
        raise
    return taken
