"""What the CLI's sub-apps share: the replication modes and master roles a local cluster
can run, the nameserver address clients use when none is given, ``--set KEY=VALUE``
settings, the error exit, and the credential and TLS options of every command that talks to
a cluster (:func:`secured`)."""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any, Final, TypeVar, get_type_hints

import typer

R = TypeVar("R")

# RocketMQ's nameserver port: `rocketq cluster up` puts its first nameserver there when it
# is free, and `rocketq send|consume|admin` look there when neither -n nor NAMESRV_ADDR
# says otherwise.
DEFAULT_NAMESRV_PORT: Final = 9876
# The port RocketMQ 5's proxy serves its clients on: `cluster up --grpc`'s first endpoint.
DEFAULT_GRPC_PORT: Final = 8081
# RocketMQ's broker listenPort, and rocketmq-dashboard's port: what `cluster up` asks for
# first for its first broker and its console.
DEFAULT_BROKER_PORT: Final = 10911
DEFAULT_CONSOLE_PORT: Final = 8080
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


# -- credentials and TLS ------------------------------------------------------------------

_SECURITY: ContextVar[dict[str, Any] | None] = ContextVar("rocketq_cli_security", default=None)

SECURITY_OPTIONS: Final[tuple[tuple[str, Any, Any], ...]] = (
    (
        "access_key",
        str | None,
        typer.Option(
            "--access-key",
            envvar="ROCKETQ_ACCESS_KEY",
            help="Access key to sign requests with.",
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "secret_key",
        str | None,
        typer.Option(
            "--secret-key",
            envvar="ROCKETQ_SECRET_KEY",
            help="Its secret key.",
            show_default=False,
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "credentials_file",
        str | None,
        typer.Option(
            "--credentials-file",
            envvar="ROCKETQ_CREDENTIALS_FILE",
            help="TOML file of access_key and secret_key (default: ~/.rocketq/credentials "
            "when it exists).",
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "tls",
        bool,
        typer.Option(
            "--tls",
            envvar="ROCKETQ_TLS",
            help="Connect over TLS.",
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "tls_ca_file",
        str,
        typer.Option(
            "--tls-ca-file",
            envvar="ROCKETQ_TLS_CA_FILE",
            help="CA certificates (PEM) the servers' certificates must chain to.",
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "tls_cert_file",
        str,
        typer.Option(
            "--tls-cert-file",
            envvar="ROCKETQ_TLS_CERT_FILE",
            help="Client certificate (PEM), for servers that ask.",
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "tls_key_file",
        str,
        typer.Option(
            "--tls-key-file",
            envvar="ROCKETQ_TLS_KEY_FILE",
            help="The client certificate's key (PEM).",
            rich_help_panel="Credentials and TLS",
        ),
    ),
    (
        "tls_verify_hostname",
        bool,
        typer.Option(
            "--tls-verify-hostname/--tls-no-verify-hostname",
            help="Check that a server's certificate names the address connected to.",
            rich_help_panel="Credentials and TLS",
        ),
    ),
)
"""The credential and TLS options of every command that talks to a cluster: (parameter
name, type, typer option)."""

_SECURITY_DEFAULTS: Final[dict[str, Any]] = {
    "access_key": None,
    "secret_key": None,
    "credentials_file": None,
    "tls": False,
    "tls_ca_file": "",
    "tls_cert_file": "",
    "tls_key_file": "",
    "tls_verify_hostname": True,
}


def security_settings() -> dict[str, Any]:
    """The credential and TLS settings of the command running, as SDK client keyword
    settings (``Admin(namesrv, **security_settings())``); the defaults outside a command."""
    return {**_SECURITY_DEFAULTS, **(_SECURITY.get() or {})}


def secured(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` (a typer command) with the credential and TLS options added; while it runs,
    :func:`security_settings` gives their values."""
    if getattr(fn, "__rocketq_secured__", False):
        return fn
    signature = inspect.signature(fn, eval_str=True)
    hints = get_type_hints(fn, include_extras=True)
    names = [name for name, _, _ in SECURITY_OPTIONS]
    taken = [name for name in names if name in signature.parameters]
    if taken:
        raise TypeError(f"{fn.__name__} already has parameters {taken}")
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=_SECURITY_DEFAULTS[name],
            annotation=Annotated[kind, option],
        )
        for name, kind, option in SECURITY_OPTIONS
    ]

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> R:
        values = {name: kwargs.pop(name, _SECURITY_DEFAULTS[name]) for name in names}
        token = _SECURITY.set(values)
        try:
            return fn(*args, **kwargs)
        finally:
            _SECURITY.reset(token)

    params = list(signature.parameters.values())
    # Keyword-only parameters go after the others; typer passes everything by keyword.
    params = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        else p
        for p in params
    ]
    command.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    command.__annotations__ = {**hints, **{p.name: p.annotation for p in extra}}
    command.__rocketq_secured__ = True  # type: ignore[attr-defined]
    return command


def secure_commands(app: typer.Typer) -> None:
    """Add the credential and TLS options to every command of ``app`` and of its sub-apps."""
    for info in app.registered_commands:
        if info.callback is not None:
            info.callback = secured(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            secure_commands(group.typer_instance)
