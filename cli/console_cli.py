"""``rocketq console``: the web console (console/) served by uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from rocketq.cli.options import fail


def console_cmd(
    namesrv: Annotated[
        str, typer.Option("--namesrv", "-n", envvar="NAMESRV_ADDR", help="Nameserver address(es).")
    ] = "127.0.0.1:9876",
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8080,
    users: Annotated[
        Path | None,
        typer.Option(
            "--users",
            exists=True,
            dir_okay=False,
            help="Turns login on: one 'name:scrypt-hash' per line (see --hash-password).",
        ),
    ] = None,
    hash_password: Annotated[
        str | None,
        typer.Option(
            "--hash-password",
            metavar="NAME",
            help="Prompt for NAME's password, print the users-file line, and exit.",
        ),
    ] = None,
) -> None:
    """The web console: cluster, topics and more in the browser (RocketMQ Dashboard)."""
    from rocketq.cluster.console_launch import console_missing

    if (missing := console_missing()) is not None:
        raise fail(missing)
    from rocketq.console.security import hash_password as make_hash

    if hash_password is not None:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
        typer.echo(f"{hash_password}:{make_hash(password)}")
        return

    import logging

    import uvicorn

    from rocketq.console.app import create_app

    try:
        app = create_app(namesrv, users, secret=os.environ.get("ROCKETQ_CONSOLE_SECRET"))
    except (OSError, ValueError) as exc:
        raise fail(str(exc)) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    host = f"[{bind}]" if ":" in bind else bind
    typer.echo(f"rocketq console on http://{host}:{port}/ (nameserver {namesrv})")
    uvicorn.run(app, host=bind, port=port, log_level="info")
