"""Config loading for every component, and the store's config.

A component's config is one frozen dataclass with RocketMQ's names in snake_case and its
defaults. :func:`load_config` builds one from four layers, later ones winning::

    defaults < TOML file < environment (ROCKETQ_<KEY>) < overrides (CLI flags)

Supported field types are ``bool``, ``int``, ``float``, ``str`` and ``Literal[...]``, and
``int | None`` (etc.) with the default None: unset, which a file writes by leaving the key
out; what unset means is the config's own rule (metadata ``unset`` says it in messages, e.g.
``"listen_port + 1"``). A field may declare checks in its metadata: ``min`` and ``max``
(numbers), ``multiple_of`` (ints) and ``check`` (a function from the value to a reason
string, or None when fine); ``secret`` keeps a bad value out of the message.
Every problem raises :class:`~cluster.errors.ConfigError` naming where the value came
from, the key, the bad value and what would be accepted.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import ipaddress
import json
import math
import os
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from rocketq.common.exceptions import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")

ENV_PREFIX: Final = "ROCKETQ_"
# The clients' variables (the SDK and the CLI read them: credentials and TLS) and
# ROCKETQ_PURE (every process runs the pure package: rocketq/__init__.py), which a server
# started from the same shell inherits: never a server's keys, never an error.
CLIENT_ENV: Final = frozenset(
    {
        "ROCKETQ_ACCESS_KEY",
        "ROCKETQ_SECRET_KEY",
        "ROCKETQ_SECURITY_TOKEN",
        "ROCKETQ_CREDENTIALS_FILE",
        "ROCKETQ_TLS",
        "ROCKETQ_TLS_CA_FILE",
        "ROCKETQ_TLS_CERT_FILE",
        "ROCKETQ_TLS_KEY_FILE",
        "ROCKETQ_CONSOLE_SECRET",
        "ROCKETQ_PURE",
    }
)
_TRUE: Final = frozenset({"true", "1", "yes"})
_FALSE: Final = frozenset({"false", "0", "no"})


class _InvalidValueError(Exception):
    """A value a field cannot take; carries the reason, the caller adds where it came from."""


@dataclass(frozen=True, slots=True)
class _Spec:
    """What one config field accepts, read from its type hint and metadata."""

    name: str
    kind: type | None  # bool, int, float or str; None for a Literal
    choices: tuple[object, ...]  # a Literal's values
    default: object  # dataclasses.MISSING when the field is required
    meta: Mapping[str, object]
    optional: bool = False  # ``X | None``: None is "unset"


@functools.cache
def _specs(cls: type[Any]) -> dict[str, _Spec]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    specs: dict[str, _Spec] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = (
            typing.get_origin(hint) in (types.UnionType, typing.Union)
            and len(args) == 2
            and type(None) in args
            and f.default is None
        )
        if optional:
            hint = args[0] if args[1] is type(None) else args[1]
        if typing.get_origin(hint) is Literal and not optional:
            kind, choices = None, typing.get_args(hint)
        elif hint in (bool, int, float, str):
            kind, choices = hint, ()
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported config type {hints[f.name]!r}")
        specs[f.name] = _Spec(f.name, kind, choices, f.default, f.metadata, optional)
    return specs


def _show(value: object) -> str:
    """A value as it would be written in TOML, for messages and :func:`dump_toml`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return repr(value)


def _expected(spec: _Spec, *, text: bool) -> str:
    if spec.kind is None:
        what = "must be one of " + ", ".join(str(c) for c in spec.choices)
    elif spec.kind is bool:
        what = "must be one of true, false, 1, 0, yes, no" if text else "must be true or false"
    else:
        what = {int: "must be an integer", float: "must be a number", str: "must be a string"}[
            spec.kind
        ]
    if spec.optional:
        unset = spec.meta.get("unset")
        what += f" (unset by default: {unset})" if unset else " (unset by default)"
    elif spec.default is not dataclasses.MISSING:
        what += f" (default {_show(spec.default)})"
    return what


def _convert(spec: _Spec, value: object, *, text: bool) -> object:
    """``value`` as the field's type; strings are parsed when ``text`` (env and flags)."""
    if value is None and spec.optional:
        return None
    if text and isinstance(value, str) and spec.kind is not str:
        return _parse(spec, value)
    if spec.kind is None:
        if value not in spec.choices or isinstance(value, bool):
            raise _InvalidValueError(_expected(spec, text=False))
        return value
    if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) != (spec.kind is bool) or not isinstance(value, spec.kind):
        raise _InvalidValueError(_expected(spec, text=False))
    return value


def _parse(spec: _Spec, raw: str) -> object:
    word = raw.strip()
    if spec.kind is None:
        for choice in spec.choices:
            if str(choice) == word:
                return choice
    elif spec.kind is bool:
        if word.lower() in _TRUE:
            return True
        if word.lower() in _FALSE:
            return False
    elif spec.kind is int or spec.kind is float:
        try:
            return spec.kind(word)
        except ValueError:
            pass
    raise _InvalidValueError(_expected(spec, text=True))


def _check(spec: _Spec, value: object) -> None:
    """The field's metadata checks: finite floats, ``min``/``max``, ``multiple_of``, ``check``."""
    meta = spec.meta
    if value is None:
        return  # unset (only an optional field gets here with None)
    if isinstance(value, float) and not math.isfinite(value):
        raise _InvalidValueError("must be a finite number")
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = meta.get("min"), meta.get("max")
        too_low = isinstance(low, int | float) and value < low
        too_high = isinstance(high, int | float) and value > high
        if too_low or too_high:
            if low is not None and high is not None:
                raise _InvalidValueError(f"must be between {low} and {high}")
            limit = f"at least {low}" if too_low else f"at most {high}"
            raise _InvalidValueError(f"must be {limit}")
        step = meta.get("multiple_of")
        if isinstance(step, int) and isinstance(value, int) and value % step:
            hint = max(value - value % step, step)
            raise _InvalidValueError(f"must be a multiple of {step}, e.g. {hint}")
    check = meta.get("check")
    if callable(check):
        reason = check(value)
        if reason:
            raise _InvalidValueError(str(reason))


def _accept(spec: _Spec, value: object, where: str, *, text: bool) -> object:
    """The checked value, or a ConfigError saying ``where = value: what to write instead``."""
    try:
        converted = _convert(spec, value, text=text)
        _check(spec, converted)
    except _InvalidValueError as exc:
        shown = "(hidden)" if spec.meta.get("secret") else _show(value)
        raise ConfigError(f"{where} = {shown}: {exc}") from None
    return converted


def _unknown(where: str, key: str, known: list[str], render: Callable[[str], str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=3)
    if close:
        hint = "did you mean " + " or ".join(render(c) for c in close) + "?"
    else:
        hint = "remove it; known keys: " + ", ".join(render(k) for k in known)
    return ConfigError(f"{where}: unknown key {key!r}; {hint}")


def _read_file(path: str | os.PathLike[str], section: str | None) -> tuple[str, dict[str, Any]]:
    """(label for messages, the table holding this config's keys)."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{name}: config file not found; check the path") from None
    except OSError as exc:
        raise ConfigError(
            f"{name}: cannot read config file ({exc.strerror}); check the path and permissions"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: invalid TOML: {exc}; fix the syntax there") from None
    except RecursionError:
        raise ConfigError(f"{name}: invalid TOML: values nested too deep") from None
    except ValueError as exc:  # tomllib's limit on an integer's digits
        raise ConfigError(f"{name}: invalid TOML: {exc}") from None
    if section is None:
        return name, doc
    table = doc.get(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{name}: {section!r} must be a table; write it as [{section}]")
    return f"{name} [{section}]", table


def load_config(
    cls: type[T],
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
    section: str | None = None,
    strict_env: bool = True,
) -> T:
    """Build ``cls`` from its defaults, a TOML file, the environment and overrides.

    ``section`` names the file's table holding the keys (other tables are then ignored);
    without it the keys are top-level and any other key is an error. ``env`` defaults to
    ``os.environ``; ``ROCKETQ_<KEY>`` sets ``key``. With ``strict_env`` an unknown
    ``ROCKETQ_*`` variable is an error; pass False when one environment feeds several
    configs. ``overrides`` are CLI flags by field name (dashes allowed); None means unset.
    """
    (cfg,) = load_configs(
        (cls,), path, env=env, overrides=overrides, section=section, strict_env=strict_env
    )
    return typing.cast(T, cfg)


def load_configs(
    classes: tuple[type[Any], ...],
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
    section: str | None = None,
    strict_env: bool = True,
) -> tuple[Any, ...]:
    """Several configs from one file, environment and set of flags (a broker's broker.toml
    holds broker and store keys side by side). Each key goes to every config that has it;
    a key none of them has is an error."""
    all_specs: list[dict[str, _Spec]] = [_specs(typing.cast(Any, cls)) for cls in classes]
    merged: dict[str, _Spec] = {}
    for specs in all_specs:
        merged.update(specs)
    known = list(merged)
    values: dict[str, object] = {}

    if path is not None:
        label, table = _read_file(path, section)
        for key, value in table.items():
            if key not in merged:
                raise _unknown(label, key, known, lambda k: k)
            values[key] = _accept(merged[key], value, f"{label}: {key}", text=False)

    environ = os.environ if env is None else env
    for var, raw in environ.items():
        if not var.startswith(ENV_PREFIX) or var in CLIENT_ENV:
            continue
        key = var[len(ENV_PREFIX) :].lower()
        where = f"environment variable {var}"
        if key not in merged or var != ENV_PREFIX + key.upper():
            if strict_env:
                raise _unknown(where, key, known, lambda k: ENV_PREFIX + k.upper())
            continue
        values[key] = _accept(merged[key], raw, where, text=True)

    for name, value in (overrides or {}).items():
        if value is None:
            continue
        key = name.replace("-", "_")
        where = "flag --" + key.replace("_", "-")
        if key not in merged:
            raise _unknown(where, key, known, lambda k: "--" + k.replace("_", "-"))
        values[key] = _accept(merged[key], value, where, text=True)

    built = []
    for cls, specs in zip(classes, all_specs, strict=True):
        for key, spec in specs.items():
            if spec.default is dataclasses.MISSING and key not in values:
                raise ConfigError(
                    f"{cls.__name__}: {key} is required; set it in the config file, "
                    f"as {ENV_PREFIX}{key.upper()} or with --{key.replace('_', '-')}"
                )
        built.append(cls(**{k: v for k, v in values.items() if k in specs}))
    return tuple(built)


def validate_config(cfg: DataclassInstance) -> None:
    """Check every field's type and metadata; call it from a config's ``__post_init__``."""
    for key, spec in _specs(type(cfg)).items():
        _accept(spec, getattr(cfg, key), f"{type(cfg).__name__}: {key}", text=False)


def config_to_dict(cfg: DataclassInstance) -> dict[str, object]:
    """The config's fields by name, in declaration order."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def dump_toml(cfg: DataclassInstance, *, section: str | None = None) -> str:
    """The config as TOML that :func:`load_config` reads back (under ``[section]`` if given);
    an unset (None) key is left out."""
    lines = [f"[{section}]"] if section is not None else []
    for key, value in config_to_dict(cfg).items():
        if value is None:
            continue
        if not isinstance(value, bool | int | float | str):
            raise TypeError(f"{type(cfg).__name__}.{key}: cannot write {value!r} as TOML")
        lines.append(f"{key} = {_show(value)}")
    return "\n".join(lines) + "\n"


def _check_delete_when(value: object) -> str | None:
    parts = [part.strip() for part in str(value).split(";")]
    if all(p.isascii() and p.isdigit() and int(p) <= 23 for p in parts):
        return None
    return 'must be hours of the day 0-23 separated by ";", e.g. "04" or "01;04;23"'


def _check_store_host(value: object) -> str | None:
    host, sep, port = str(value).rpartition(":")
    try:
        ipaddress.IPv4Address(host)
        ok = bool(sep) and port.isascii() and port.isdigit() and 0 < int(port) < 65536
    except ValueError:
        ok = False
    return None if ok else 'must be an IPv4 address and port "a.b.c.d:port", e.g. "10.0.0.5:10911"'


_MIB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerBoundsConfig:
    """What a server process bounds, so that no input stops it: its remoting port's
    connections, idle time, buffered bytes and requests in flight, and its metrics HTTP
    server's workers and time per request. RocketMQ's NettyServerConfig names where it has
    them; the nameserver's and the broker's configs both start with these keys.

    Over a bound the connection is closed (or the request refused with SYSTEM_BUSY), the
    reason is logged at most once a minute per remote address and counted in
    ``rocketq_remoting_rejected_total{reason}`` (``rocketq_metrics_http_rejected_total``
    for the HTTP port)."""

    # Connections the remoting port holds at once; another is closed as soon as it is
    # accepted (rocketq's key; each one costs a file descriptor and its buffers).
    server_max_connections: int = field(default=1000, metadata={"min": 1})
    # Connections from one remote IP at once; another is closed as soon as it is accepted
    # (rocketq's key; RocketMQ has no such cap. A client process keeps one connection per
    # server, so 200 is far above normal use yet keeps one host from taking them all).
    server_max_connections_per_address: int = field(default=200, metadata={"min": 1})
    # A connection with no whole frame received or sent for this many seconds and no
    # request in flight (a held pull is one) is closed; clients heartbeat every 30 s
    # (RocketMQ's serverChannelMaxIdleTimeSeconds; 0: never).
    server_channel_max_idle_time_seconds: float = field(default=120.0, metadata={"min": 0})
    # Largest frame accepted, in bytes: a longer length prefix closes the connection, so a
    # partial frame never holds more (RocketMQ's com.rocketmq.remoting.frameMaxLength).
    server_frame_max_length: int = field(
        default=16 * _MIB, metadata={"min": 4096, "max": 2**31 - 1}
    )
    # Largest header in a frame, in bytes: a longer one closes the connection before it is
    # decoded (rocketq's key). RocketMQ's headers are a few KiB (message properties are at
    # most 32 KiB, up to six times that as JSON escapes); a header costs decoding time on
    # the event loop in proportion to its length.
    server_header_max_length: int = field(
        default=256 * 1024, metadata={"min": 1024, "max": 2**24 - 1}
    )
    # Seconds a frame may take to arrive once its first bytes have; a slower one closes
    # the connection (rocketq's key; 0: no limit).
    server_frame_read_timeout_seconds: float = field(default=60.0, metadata={"min": 0})
    # Bytes of partial frames buffered across all connections; over it, the connections
    # whose frames began longest ago are closed until it fits (rocketq's key).
    server_max_buffered_bytes: int = field(default=64 * _MIB, metadata={"min": 4096})
    # Requests one connection may have in flight (received, not yet answered: held pulls,
    # sends waiting for a slave); more are answered SYSTEM_BUSY (rocketq's key).
    server_max_requests_in_flight_per_connection: int = field(default=4096, metadata={"min": 1})
    # Bytes of request frames one connection has handed to handlers that have not answered
    # yet (a register body waiting for its decode, a send waiting for a slave); past it
    # the server stops reading that connection until they fall below half (rocketq's key;
    # at least server_frame_max_length).
    server_max_in_flight_bytes_per_connection: int = field(
        default=64 * _MIB, metadata={"min": 4096}
    )
    # The same across all connections; past it, a connection that hands a handler a frame
    # over 64 KiB, or whose handler holds a request, is paused until the total falls below
    # half (rocketq's key; at least server_max_in_flight_bytes_per_connection).
    server_max_in_flight_bytes: int = field(default=256 * _MIB, metadata={"min": 4096})
    # Bytes of answers queued for a peer past which the server stops reading that peer's
    # requests until they drain below write_buffer_low_water_mark (RocketMQ's
    # writeBufferHighWaterMark and writeBufferLowWaterMark).
    write_buffer_high_water_mark: int = field(default=4 * _MIB, metadata={"min": 1})
    write_buffer_low_water_mark: int = field(default=1 * _MIB, metadata={"min": 0})
    # Bytes of answers queued for a peer that does not read them past which its
    # connection is closed (rocketq's key; at least write_buffer_high_water_mark).
    server_max_write_buffer_bytes: int = field(default=64 * _MIB, metadata={"min": 1})
    # Threads answering the metrics HTTP port; a request while all are busy is closed.
    metrics_http_workers: int = field(default=4, metadata={"min": 1, "max": 64})
    # Seconds an HTTP request may take to arrive, and each answer to be written; a
    # slower peer is cut off.
    metrics_http_timeout_seconds: float = field(default=10.0, metadata={"min": 0.01})

    def __post_init__(self) -> None:
        validate_config(self)
        check_server_bounds(self)


def _check_json_keys(*keys: str) -> Callable[[object], str | None]:
    """A check that a value is empty or a JSON object with string values for ``keys``."""

    def check(value: object) -> str | None:
        text = str(value).strip()
        if not text:
            return None
        example = "{" + ", ".join(f'"{k}": "..."' for k in keys) + "}"
        try:
            parsed = json.loads(text)
        except ValueError:
            return f"must be JSON like {example}"
        if not isinstance(parsed, dict) or not all(
            isinstance(parsed.get(k), str) and parsed.get(k) for k in keys
        ):
            return f"must be JSON like {example}, every value a non-empty string"
        return None

    return check


@dataclass(frozen=True, slots=True)
class ServerSecurityConfig(ServerBoundsConfig):
    """Who may use a server and how its ports are encrypted: RocketMQ 5.3's AuthConfig
    keys and RocketMQ's TLS settings (``tls.server.*``, ``tls.client.*``) in snake_case.
    The nameserver's and the broker's configs both carry them."""

    # Requests must carry an AccessKey and a valid Signature (RocketMQ's
    # authenticationEnabled).
    authentication_enabled: bool = False
    # Authenticated users may do only what their ACL policies allow; super users anything
    # (RocketMQ's authorizationEnabled).
    authorization_enabled: bool = False
    # A super user created at start when no user of that name exists, so that a cluster
    # with auth on always has someone who may manage it; RocketMQ's JSON form
    # {"username": "...", "password": "..."}; the password is the user's secret key.
    init_authentication_user: str = field(
        default="",
        metadata={"check": _check_json_keys("username", "password"), "secret": True},
    )
    # The credentials this server signs its own requests with (a broker's registrations,
    # a slave's HA link and replica sync, Raft between members): every node configured
    # with the same credentials treats them as a super user. JSON
    # {"accessKey": "...", "secretKey": "..."} (RocketMQ's
    # innerClientAuthenticationCredentials).
    inner_client_authentication_credentials: str = field(
        default="",
        metadata={"check": _check_json_keys("accessKey", "secretKey"), "secret": True},
    )
    # Seconds a signed request's time may lie from the server's clock either way: a v2
    # request whose x-mq-date-time is further off (or absent) is refused, and so is a
    # strong remoting signature's timestamp (AWS SigV4 allows 15 minutes).
    authentication_signature_window_seconds: float = field(default=900.0, metadata={"min": 1})
    # Refuse RocketMQ's legacy remoting signature (values only, no time): only requests
    # signed with rocketq's strong signature (keys, values, a timestamp and a nonce) pass.
    # Stock 4.x clients sign the legacy way, so they are refused too.
    authentication_require_strong_signature: bool = False
    # stateful: a connection's sender is verified at its first signed request and
    # remembered there (for stateful_authentication_cache_expired_second, and until the
    # users or ACLs change), so later requests on it are not verified again (RocketMQ's
    # StatefulAuthenticationStrategy; rocketq's default, for throughput). stateless: every
    # request's signature is verified (RocketMQ's default).
    authentication_strategy: Literal["stateful", "stateless"] = "stateful"
    # Seconds a verified sender is remembered on its connection (RocketMQ's
    # statefulAuthenticationCacheExpiredSecond).
    stateful_authentication_cache_expired_second: int = field(default=60, metadata={"min": 1})
    # An ACL 1.0 plain_acl.yml whose accounts become users and ACL policies at load, for
    # clusters coming from RocketMQ 4.x ("": none).
    acl_v1_file: str = ""
    # TLS on the remoting port: disabled (plaintext only), permissive (TLS and plaintext on
    # one port, told apart by the first byte) or enforcing (TLS only) (tls.server.mode;
    # RocketMQ defaults to permissive with a self-signed certificate, rocketq to disabled
    # until a certificate is given).
    tls_server_mode: Literal["disabled", "permissive", "enforcing"] = "disabled"
    # The server's certificate chain and private key, PEM (tls.server.certPath/keyPath).
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""
    # CA certificates a client certificate must chain to (tls.server.trustCertPath).
    tls_server_trust_cert_path: str = ""
    # Whether clients must show a certificate (tls.server.need.client.auth).
    tls_server_need_client_auth: Literal["none", "optional", "require"] = "none"
    # This server's own connections (to nameservers, to the HA master, between Raft
    # members) use TLS (tls.enable / tls.client.*).
    tls_client_enable: bool = False
    # The certificate and key this server shows when a peer requires one (mTLS).
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    # CA certificates a peer's certificate must chain to ("": the system's).
    tls_client_trust_cert_path: str = ""
    # Whether a peer's certificate must name the host connected to.
    tls_client_verify_hostname: bool = True
    # A glob a client certificate's subject common name or one of its DNS or URI subject
    # alternative names must match for the certificate to prove a cluster node (the HA and
    # Raft ports, registrations); "" : no certificate proves a node, the inner
    # credentials' signature is required. A certificate that chains to the trusted CA but
    # does not match is a user's certificate at most.
    tls_node_name_pattern: str = ""
    # Seconds between checks of the certificate files; changed files are loaded for new
    # connections while open ones keep theirs (RocketMQ watches them likewise).
    tls_cert_reload_interval_seconds: float = field(default=5.0, metadata={"min": 0.05})
    # The metrics port serves HTTPS with the server certificate.
    metrics_tls_enable: bool = False
    # A bearer token the metrics port's /metrics asks for ("": none), as Prometheus'
    # exporters take one (scrape config ``authorization: {credentials: ...}``).
    metrics_bearer_token: str = field(default="", metadata={"secret": True})
    # Basic auth for the metrics port's /metrics, JSON {"username": "...", "password":
    # "..."} ("": none); Prometheus scrapes it with ``basic_auth``.
    metrics_basic_auth: str = field(
        default="",
        metadata={"check": _check_json_keys("username", "password"), "secret": True},
    )

    def __post_init__(self) -> None:
        validate_config(self)
        check_server_bounds(self)
        check_server_security(self)


def check_server_security(cfg: ServerSecurityConfig) -> None:
    """The checks between the keys of :class:`ServerSecurityConfig` (call it from the
    ``__post_init__`` of a config built on it)."""
    name = type(cfg).__name__
    tls_on = cfg.tls_server_mode != "disabled" or cfg.metrics_tls_enable
    if tls_on and not (cfg.tls_server_cert_path and cfg.tls_server_key_path):
        raise ConfigError(
            f"{name}: TLS is on (tls_server_mode = {cfg.tls_server_mode!r}, metrics_tls_enable"
            f" = {cfg.metrics_tls_enable}) but tls_server_cert_path and tls_server_key_path "
            "are not both set; give the PEM certificate chain and key"
        )
    if cfg.tls_server_need_client_auth != "none" and not cfg.tls_server_trust_cert_path:
        raise ConfigError(
            f"{name}: tls_server_need_client_auth = {cfg.tls_server_need_client_auth!r} needs "
            "tls_server_trust_cert_path, the CA certificates client certificates chain to"
        )
    if bool(cfg.tls_client_cert_path) != bool(cfg.tls_client_key_path):
        raise ConfigError(
            f"{name}: tls_client_cert_path and tls_client_key_path go together; set both or neither"
        )


def check_server_bounds(cfg: ServerBoundsConfig) -> None:
    """The checks between the keys of :class:`ServerBoundsConfig` (call it from the
    ``__post_init__`` of a config built on it)."""
    name = type(cfg).__name__
    if cfg.write_buffer_low_water_mark > cfg.write_buffer_high_water_mark:
        raise ConfigError(
            f"{name}: write_buffer_low_water_mark = {cfg.write_buffer_low_water_mark} is "
            f"above write_buffer_high_water_mark = {cfg.write_buffer_high_water_mark}; "
            "set it lower"
        )
    if cfg.server_max_write_buffer_bytes < cfg.write_buffer_high_water_mark:
        raise ConfigError(
            f"{name}: server_max_write_buffer_bytes = {cfg.server_max_write_buffer_bytes} "
            f"is below write_buffer_high_water_mark = {cfg.write_buffer_high_water_mark}; "
            "set it at least as high"
        )
    if cfg.server_max_buffered_bytes < cfg.server_frame_max_length:
        raise ConfigError(
            f"{name}: server_max_buffered_bytes = {cfg.server_max_buffered_bytes} is below "
            f"server_frame_max_length = {cfg.server_frame_max_length}; one frame must fit"
        )
    per_connection = cfg.server_max_in_flight_bytes_per_connection
    if per_connection < cfg.server_frame_max_length:
        raise ConfigError(
            f"{name}: server_max_in_flight_bytes_per_connection = {per_connection} is below "
            f"server_frame_max_length = {cfg.server_frame_max_length}; one frame must fit"
        )
    if cfg.server_max_in_flight_bytes < per_connection:
        raise ConfigError(
            f"{name}: server_max_in_flight_bytes = {cfg.server_max_in_flight_bytes} is below "
            f"server_max_in_flight_bytes_per_connection = {per_connection}; set it at least "
            "as high"
        )


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The message store's settings (RocketMQ's ``MessageStoreConfig``)."""

    # Root of all store files.
    store_path_root_dir: str = str(Path.home() / "store")
    # CommitLog segment directory; empty means <root>/commitlog.
    store_path_commit_log: str = ""
    # ConsumeQueue directory; empty means <root>/consumequeue.
    store_path_consume_queue: str = ""
    # Index file directory; empty means <root>/index.
    store_path_index: str = ""
    # Size of one CommitLog segment in bytes (1 GiB).
    mapped_file_size_commit_log: int = field(default=1073741824, metadata={"min": 4096})
    # Size of one ConsumeQueue segment: 300000 entries of 20 bytes.
    mapped_file_size_consume_queue: int = field(
        default=300000 * 20, metadata={"min": 20, "multiple_of": 20}
    )
    # Largest message body accepted, in bytes (4 MiB).
    max_message_size: int = field(default=4194304, metadata={"min": 1})
    # Whether a send waits for fsync (SYNC_FLUSH) or returns once in the page cache.
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = "ASYNC_FLUSH"
    # How long a SYNC_FLUSH send waits for its flush, in ms.
    sync_flush_timeout: int = field(default=5000, metadata={"min": 1})
    # Period of the CommitLog flush thread, in ms.
    flush_interval_commit_log: int = field(default=500, metadata={"min": 0})
    # Dirty pages the CommitLog needs before a periodic flush.
    flush_commit_log_least_pages: int = field(default=4, metadata={"min": 0})
    # After this many ms the CommitLog is flushed whatever its dirty pages.
    flush_commit_log_thorough_interval: int = field(default=10000, metadata={"min": 0})
    # Period of the ConsumeQueue flush thread, in ms.
    flush_interval_consume_queue: int = field(default=1000, metadata={"min": 0})
    # Dirty pages a ConsumeQueue needs before a periodic flush.
    flush_consume_queue_least_pages: int = field(default=2, metadata={"min": 0})
    # After this many ms ConsumeQueues are flushed whatever their dirty pages.
    flush_consume_queue_thorough_interval: int = field(default=60000, metadata={"min": 0})
    # Period of the index files' fsync, in ms (rocketq's key: RocketMQ fsyncs an index file
    # only when it is full). Each fsync write-protects the pages of the random hash slots,
    # and the next write to each faults, so a short period costs CPU on every message.
    flush_interval_index: int = field(default=10000, metadata={"min": 0})
    # Whether messages are indexed by key for query-by-key.
    message_index_enable: bool = True
    # Hash slots per index file.
    max_hash_slot_num: int = field(default=5000000, metadata={"min": 1})
    # Index entries per index file.
    max_index_num: int = field(default=20000000, metadata={"min": 1})
    # Most messages one query-by-key returns.
    default_query_max_num: int = field(default=32, metadata={"min": 0})
    # Hours a CommitLog segment is kept after its last write.
    file_reserved_time: int = field(default=72, metadata={"min": 0})
    # Hours of the day when expired files are deleted, e.g. "04" or "01;04;23".
    delete_when: str = field(default="04", metadata={"check": _check_delete_when})
    # Disk usage percent above which expired files are deleted at any hour.
    disk_max_used_space_ratio: int = field(default=75, metadata={"min": 10, "max": 95})
    # Disk usage ratio above which the oldest files are deleted even if not expired.
    disk_space_clean_forcibly_ratio: float = field(default=0.85, metadata={"min": 0.1, "max": 1.0})
    # Disk usage ratio above which writes are refused.
    disk_space_warning_level_ratio: float = field(default=0.90, metadata={"min": 0.1, "max": 1.0})
    # Pause between two CommitLog segment deletions, in ms.
    delete_commit_log_files_interval: int = field(default=100, metadata={"min": 0})
    # Pause between two ConsumeQueue segment deletions, in ms.
    delete_consume_queue_files_interval: int = field(default=100, metadata={"min": 0})
    # A segment still referenced this many ms after its deletion began is destroyed anyway.
    destroy_mapped_file_interval_forcibly: int = field(default=120000, metadata={"min": 0})
    # Period of the retention (clean expired files) task, in ms.
    clean_resource_interval: int = field(default=10000, metadata={"min": 0})
    # Whether recovery verifies each record's CRC.
    check_crc_on_recover: bool = True
    # Bytes of page cache a thread allocates ahead of the CommitLog writer under
    # ASYNC_FLUSH (RocketMQ's warmMapedFileEnable, as a distance; 0 turns it off).
    warm_mapped_file_ahead: int = field(default=8 * 1024 * 1024, metadata={"min": 0})
    # Most bytes one pull returns from memory.
    max_transfer_bytes_on_message_in_memory: int = field(default=262144, metadata={"min": 1})
    # Most messages one pull returns from memory.
    max_transfer_count_on_message_in_memory: int = field(default=32, metadata={"min": 1})
    # A write holding the CommitLog lock longer than this many ms marks the page cache busy.
    os_page_cache_busy_timeout_mills: int = field(default=1000, metadata={"min": 0})
    # Address written into records and message ids: IPv4 "a.b.c.d:port".
    store_host: str = field(default="127.0.0.1:10911", metadata={"check": _check_store_host})

    def __post_init__(self) -> None:
        validate_config(self)

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return self.store_path_consume_queue or os.path.join(
            self.store_path_root_dir, "consumequeue"
        )

    @property
    def index_dir(self) -> str:
        return self.store_path_index or os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @property
    def delete_hours(self) -> tuple[int, ...]:
        """The hours of the day (0-23) in ``delete_when``."""
        return tuple(int(part) for part in self.delete_when.split(";"))
