"""The cluster page (``/``, ``/api/cluster``) and a broker's page: every broker from
``Admin.cluster_list()`` with what its runtime table reports (its apache.rocketmq.v2 gRPC
endpoint for RocketMQ 5's clients included), the Raft members, and whether authentication
and authorization are on (each broker's config in effect, its ``authentication_enabled``
and ``authorization_enabled`` keys).

A broker that does not answer keeps its row, with the error, and the others are still
shown; what a broker does not report (version, TPS) is ``None`` in the API, "not
reported" on the page, never a guess.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rocketq.common.exceptions import RocketqError
from rocketq.console.pages import admin_of, error_response, render
from rocketq.sdk.admin import Admin, BrokerInfo
from rocketq.sdk.broker_state import raft_follower_lags, raft_lag, store_state


def _int(runtime: dict[str, str], key: str) -> int | None:
    try:
        return int(runtime[key])
    except (KeyError, ValueError):
        return None


def _float(runtime: dict[str, str], *keys: str) -> float | None:
    for key in keys:
        try:
            return float(runtime[key].split()[0])
        except (KeyError, ValueError, IndexError):
            continue
    return None


def replication_lag(runtime: dict[str, str]) -> str | None:
    """Bytes the best slave is behind ("no slave" when none is connected); None where the
    classic HA does not run (Raft) or the broker does not say."""
    if runtime.get("haSlaves") == "0":
        return "no slave"
    return runtime.get("haLagBytes")


def today(runtime: dict[str, str], now_key: str, morning_key: str) -> int | None:
    """Messages since midnight (or since the broker started, if that was today)."""
    now, morning = _int(runtime, now_key), _int(runtime, morning_key)
    if now is None or morning is None:
        return None
    return now - morning


GRPC_OFF: Final = "off"


def grpc_endpoint(addr: str, runtime: dict[str, str]) -> str | None:
    """The broker's apache.rocketmq.v2 endpoint, ``host:port`` (the host of its remoting
    address, as the brokers put it in the routes they answer RocketMQ 5's clients); "off"
    when it serves none (``grpcListenPort`` -1); None when the broker does not say."""
    port = _int(runtime, "grpcListenPort")
    if port is None:
        return None
    if port <= 0:
        return GRPC_OFF
    return f"{addr.rpartition(':')[0]}:{port}"


def broker_row(b: BrokerInfo) -> dict[str, Any]:
    rt = b.runtime
    return {
        "cluster": b.cluster,
        "broker_name": b.broker_name,
        "broker_id": b.broker_id,
        "addr": b.addr,
        "role": rt.get("brokerRole") or rt.get("raftRole"),
        "version": rt.get("brokerVersionDesc") or rt.get("version"),
        "tps_in": _float(rt, "putTps", "tpsIn"),
        "tps_out": _float(rt, "getTransferedTps", "getTransferredTps", "tpsOut"),
        "messages_in_today": today(rt, "msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        "messages_out_today": today(rt, "msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
        "commit_log_min": _int(rt, "commitLogMinOffset"),
        "commit_log_max": _int(rt, "commitLogMaxOffset"),
        "replication_lag": replication_lag(rt),
        "dispatch_behind": _int(rt, "dispatchBehindBytes"),
        "grpc_port": _int(rt, "grpcListenPort"),
        "grpc_endpoint": grpc_endpoint(b.addr, rt),
        # As cluster-list's store column: ok, "disk-full 0.93" (sends refused until space
        # is freed), failed (a write or fsync failed: sends refused until a restart).
        "store": None if "error" in rt else store_state(rt),
        "store_refusal": rt.get("storeWriteRefusal"),
        "error": rt.get("error"),
    }


def raft_row(b: BrokerInfo, follower_lags: dict[str, str] | None = None) -> dict[str, Any] | None:
    """A Raft member's row; ``follower_lags`` are its group's, as the leader reports them
    (``raft_follower_lags``), for the lag column cluster-list shows too."""
    rt = b.runtime
    if "raftSelfId" not in rt:
        return None
    return {
        "lag": raft_lag(rt, follower_lags or {}),
        "rebuilding": rt.get("raftRebuilding") == "true",
        "group": rt.get("raftGroup", b.broker_name),
        "member": rt["raftSelfId"],
        "addr": b.addr,
        "role": rt.get("raftRole"),
        "term": _int(rt, "raftTerm"),
        "leader": rt.get("raftLeader") or None,
        "commit_index": _int(rt, "raftCommitIndex"),
        "serving": rt.get("raftServing") == "true",
    }


AUTH_KEYS: Final = {
    "authentication": "authentication_enabled",
    "authorization": "authorization_enabled",
}
UNKNOWN: Final = "unknown"


def switch(config: dict[str, str] | None, key: str) -> str:
    """The switch as "on", "off", or "unknown" (config unread, or without the key)."""
    value = (config or {}).get(key, "").strip().lower()
    if value in ("true", "1"):
        return "on"
    if value in ("false", "0"):
        return "off"
    return UNKNOWN


def summary(states: list[str]) -> str:
    """One word for the cluster: every broker's, "mixed" when they differ, "unknown" when
    no broker says."""
    known = set(states) - {UNKNOWN}
    if not known:
        return UNKNOWN
    if len(known) == 1 and UNKNOWN not in states:
        return known.pop()
    return "mixed"


async def auth_states(admin: Admin, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Fill each answering broker's row with its authentication and authorization switches
    (read from its config concurrently); the cluster's summary of each."""

    async def config_of(row: dict[str, Any]) -> dict[str, str] | None:
        if row["error"]:
            return None
        try:
            return await admin.broker_config(row["addr"])
        except RocketqError:
            return None

    configs = await asyncio.gather(*(config_of(r) for r in rows))
    for row, config in zip(rows, configs, strict=True):
        for name, key in AUTH_KEYS.items():
            row[name] = switch(config, key)
    return {name: summary([r[name] for r in rows]) for name in AUTH_KEYS}


async def cluster_data(admin: Admin) -> dict[str, Any]:
    """The brokers, the ones that did not answer, the Raft members, and whether
    authentication and authorization are on."""
    try:
        brokers = await admin.cluster_list()
    except RocketqError as exc:
        return {
            "brokers": [],
            "down": [],
            "raft": [],
            "auth": {name: UNKNOWN for name in AUTH_KEYS},
            "error": f"nameserver: {exc}",
        }
    rows = [broker_row(b) for b in brokers]
    lags = raft_follower_lags(brokers)
    raft = [r for b in brokers if (r := raft_row(b, lags.get(b.broker_name))) is not None]
    down = [f"{r['broker_name']}/{r['broker_id']} ({r['addr']})" for r in rows if r["error"]]
    auth = await auth_states(admin, rows)
    return {"brokers": rows, "down": down, "raft": raft, "auth": auth, "error": None}


async def cluster_page(request: Request) -> Response:
    return render(request, "cluster.html", await cluster_data(admin_of(request)))


async def api_cluster(request: Request) -> Response:
    return JSONResponse(await cluster_data(admin_of(request)))


async def broker_data(admin: Admin, name: str, broker_id: int) -> dict[str, Any] | None:
    for b in await admin.cluster_list():
        if b.broker_name == name and b.broker_id == broker_id:
            config: dict[str, str] | None = None
            config_error = None
            if "error" not in b.runtime:
                try:
                    config = await admin.broker_config(b.addr)
                except RocketqError as exc:
                    config_error = str(exc)
            return {
                "broker": broker_row(b),
                "runtime": dict(sorted(b.runtime.items())),
                "config": config,
                "config_error": config_error,
            }
    return None


async def broker_page(request: Request) -> Response:
    name, broker_id = request.path_params["name"], request.path_params["broker_id"]
    data = await broker_data(admin_of(request), name, broker_id)
    if data is None:
        return error_response(request, 404, f"no broker {name}/{broker_id} in the cluster")
    return render(request, "broker.html", data)


async def api_broker(request: Request) -> Response:
    name, broker_id = request.path_params["name"], request.path_params["broker_id"]
    data = await broker_data(admin_of(request), name, broker_id)
    if data is None:
        return error_response(request, 404, f"no broker {name}/{broker_id} in the cluster")
    return JSONResponse(data)
