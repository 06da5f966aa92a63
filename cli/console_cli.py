"""``rocketq console``: the web console (console/) served by uvicorn, over HTTPS with a
certificate; its own cluster calls signed and over TLS as every client command's are
(:func:`rocketq.cli.options.secured` adds those options in ``cli/main.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from rocketq.cli.options import fail, security_settings


def console_cmd(
    namesrv: Annotated[
        str, typer.Option("--namesrv", "-n", envvar="NAMESRV_ADDR", help="Nameserver address(es).")
    ] = "127.0.0.1:9876",
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8080,
    allowed_hosts: Annotated[
        list[str],
        typer.Option(
            "--allowed-hosts",
            help="More host names the console answers to (repeatable; *.example.com, or *).",
        ),
    ] = [],  # noqa: B006 - typer reads the default
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
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            exists=True,
            dir_okay=False,
            help="Serve HTTPS with this certificate chain (PEM); needs --tls-key.",
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key", exists=True, dir_okay=False, help="The HTTPS certificate's key (PEM)."
        ),
    ] = None,
    listen_fd: Annotated[
        list[str],
        typer.Option(
            "--listen-fd",
            metavar="console=FD",
            help="Serve on the listening socket open at file descriptor FD, handed down by "
            "the process that started this one, instead of binding --bind and --port.",
        ),
    ] = [],  # noqa: B006 - typer reads the default
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

    from rocketq.common.ports import parse_listen_fds
    from rocketq.console.app import serve
    from rocketq.console.security import ClusterClient

    if (tls_cert is None) != (tls_key is None):
        raise fail("give both --tls-cert and --tls-key to serve HTTPS, or neither", 2)
    try:
        sock = parse_listen_fds(listen_fd, ("console",)).get("console")
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    if sock is not None:
        port = sock.getsockname()[1]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    host = f"[{bind}]" if ":" in bind else bind
    scheme = "https" if tls_cert is not None else "http"
    typer.echo(f"rocketq console on {scheme}://{host}:{port}/ (nameserver {namesrv})")
    try:
        serve(
            namesrv,
            users,
            bind=bind,
            port=port,
            allowed_hosts=allowed_hosts,
            tls_cert=tls_cert,
            tls_key=tls_key,
            cluster_client=ClusterClient.from_settings(security_settings()),
            secret=os.environ.get("ROCKETQ_CONSOLE_SECRET"),
            sock=sock,
        )
    except (OSError, ValueError) as exc:
        raise fail(str(exc)) from None
