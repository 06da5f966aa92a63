"""What the CLI's sub-apps share: the replication modes and master roles a local cluster
can run, the nameserver address clients use when none is given, ``--set KEY=VALUE``
settings, and the error exit."""

from __future__ import annotations

import enum
from typing import Final

import typer

# RocketMQ's nameserver port: `rocketq cluster up` puts its first nameserver there when it
# is free, and `rocketq send|consume|admin` look there when neither -n nor NAMESRV_ADDR
# says otherwise.
DEFAULT_NAMESRV_PORT: Final = 9876
DEFAULT_NAMESRV: Final = f"127.0.0.1:{DEFAULT_NAMESRV_PORT}"


class Replication(enum.StrEnum):
    NONE = "none"
    HA = "ha"
    RAFT = "raft"


class MasterRole(enum.StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"


def fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def parse_settings(values: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="'--set'")
        out[key.strip()] = value.strip()
    return out
