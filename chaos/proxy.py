"""A TCP proxy on every link between the members of a Raft group, to cut a member off
without root: each member reaches each other member through a listening port of its own
that forwards to the other's Raft port or, while cut, closes every connection at once.

:class:`ProxiedCluster` is a launcher cluster whose members' ``dledger_peers`` name the
proxy's ports; the proxy serves them from an event loop on a thread of its own, so the
launcher's blocking calls never stall it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from rocketq.cluster.launcher import HOST, ClusterSpec, LocalCluster, Node, raft_member_id

CHUNK = 65536
START_TIMEOUT = 5.0


class Link:
    """One direction of one member pair."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.cut = False
        self.port = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(HOST, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(CHUNK):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            for w in list(self._writers):
                w.transport.abort()

    async def close(self) -> None:
        self.set_cut(True)
        if self._server is not None:
            self._server.close()


class ProxyNet:
    """The links of a cluster, keyed by (from member, to member)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.links: dict[tuple[str, str], Link] = {}

    def link(self, src: str, dst: str, target_port: int) -> int:
        """The port ``src`` dials to reach ``dst`` (made on first use; forwarding to
        ``target_port`` from now on, which changes when the launcher starts a group again on
        new Raft ports)."""
        key = (src, dst)
        if key not in self.links:
            link = Link(target_port)
            asyncio.run_coroutine_threadsafe(link.start(), self.loop).result(START_TIMEOUT)
            self.links[key] = link
        self.links[key].target_port = target_port
        return self.links[key].port

    def isolate(self, member: str) -> None:
        """Cut every link to and from ``member``."""
        for (src, dst), link in self.links.items():
            if member in (src, dst):
                self.loop.call_soon_threadsafe(link.set_cut, True)

    def heal(self, member: str | None = None) -> None:
        """Restore the links of ``member`` (all links when None)."""
        for (src, dst), link in self.links.items():
            if member is None or member in (src, dst):
                self.loop.call_soon_threadsafe(link.set_cut, False)

    def close(self) -> None:
        if not self.thread.is_alive():
            return
        for link in self.links.values():
            asyncio.run_coroutine_threadsafe(link.close(), self.loop).result(START_TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(START_TIMEOUT)
        self.loop.close()


class ProxiedCluster(LocalCluster):
    """Each member reaches each other member of its group through its own link."""

    def __init__(self, spec: ClusterSpec, net: ProxyNet) -> None:
        super().__init__(spec)
        self.net = net

    def raft_peers(self, node: Node) -> str:
        parts = []
        for m in self.group_members(node.broker_name):
            port = m.raft_port if m is node else self.net.link(node.name, m.name, m.raft_port)
            parts.append(f"{raft_member_id(m)}-{HOST}:{port}")
        return ";".join(parts)

    def isolate(self, node: Node) -> None:
        self.net.isolate(node.name)

    def heal(self, node: Node) -> None:
        self.net.heal(node.name)
