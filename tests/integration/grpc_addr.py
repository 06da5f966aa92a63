"""Where a broker's gRPC services listen, as the nameserver says: the tests that call those
services directly (beside the SDK, which finds them the same way) ask with the broker's
address (its remoting port)."""

from __future__ import annotations

from rocketq.cluster.remoting.codes import RequestCode
from rocketq.cluster.remoting.command import RemotingCommand
from rocketq.cluster.remoting.transport import request_blocking
from rocketq.cluster.route_data import parse_cluster_info


def grpc_addr(namesrv: str, broker_addr: str) -> str:
    answer = request_blocking(
        namesrv.split(";")[0], RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0
    )
    for data in parse_cluster_info(answer.body or b"{}").broker_addr_table.values():
        for bid, addr in data.broker_addrs.items():
            if addr == broker_addr and bid in data.grpc_addrs:
                return data.grpc_addrs[bid]
    raise LookupError(f"broker {broker_addr} is not registered with {namesrv}")
