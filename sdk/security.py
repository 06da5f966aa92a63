"""Who a client is and how it reaches the cluster: the credentials it signs every request
with and the TLS it connects over, as the settings every SDK client shares
(:class:`SecurityConfig`: ``access_key``, ``secret_key``, ``credentials_file``, ``tls``,
``tls_ca_file``, ``tls_cert_file``, ``tls_key_file``, ``tls_verify_hostname``).

Credentials come from the first place that has them (``rocketq.auth.credentials``): the
settings, then the ``ROCKETQ_ACCESS_KEY`` / ``ROCKETQ_SECRET_KEY`` environment variables,
then a TOML credentials file (``credentials_file``, else ``ROCKETQ_CREDENTIALS_FILE``, else
``~/.rocketq/credentials`` when it exists). With credentials, every request to a nameserver
or a broker is signed: with rocketq's strong signature (``rocketq.auth.strong_signature``:
keys, values, code and body, a timestamp and a nonce) where the server announces it, else
with ``AccessKey`` and ``Signature`` as RocketMQ's ACL clients sign them; a
server that refuses a request answers ``NO_PERMISSION``, raised as
:class:`~rocketq.common.exceptions.NoPermissionError`.

TLS likewise: a client not told ``tls`` (None) connects over TLS when ``ROCKETQ_TLS`` is
``true``, ``1``, ``yes`` or ``on``, and a TLS file not given comes from
``ROCKETQ_TLS_CA_FILE``, ``ROCKETQ_TLS_CERT_FILE`` or ``ROCKETQ_TLS_KEY_FILE`` (as the
``rocketq`` CLI reads them); ``tls=False`` given is plaintext whatever the environment
says. This one place serves the producer, the consumers, ``Admin`` and the Spark data
source.

Everything is checked when the client is made: half a key pair, an unreadable credentials
file, or a CA, certificate or key file that is missing or does not load is a
:class:`~rocketq.common.exceptions.ConfigError` naming it.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.auth.credentials import Credentials, load_credentials
from rocketq.common.exceptions import ConfigError
from rocketq.remoting.tls import ClientSecurity, client_context

SECURITY_SETTINGS: Final = (
    "access_key",
    "secret_key",
    "credentials_file",
    "tls",
    "tls_ca_file",
    "tls_cert_file",
    "tls_key_file",
    "tls_verify_hostname",
)
"""The names of the settings every client takes for credentials and TLS."""

TLS_ENV: Final = "ROCKETQ_TLS"
"""The environment variable that turns TLS on for a client not told ``tls``."""
TLS_FILE_ENV: Final = {
    "tls_ca_file": "ROCKETQ_TLS_CA_FILE",
    "tls_cert_file": "ROCKETQ_TLS_CERT_FILE",
    "tls_key_file": "ROCKETQ_TLS_KEY_FILE",
}
"""The environment variables a TLS file setting not given is read from."""
_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("", "0", "false", "no", "off")


def tls_from_env(owner: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``ROCKETQ_TLS`` turns TLS on (unset or empty: off).

    Raises:
        ConfigError: A value that is neither true (1, true, yes, on) nor false.
    """
    env = os.environ if environ is None else environ
    raw = env.get(TLS_ENV, "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(
        f"{owner}: {TLS_ENV}={raw!r} is neither true (1, true, yes, on) nor false "
        "(0, false, no, off)"
    )


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """The credential and TLS settings every client takes (the producer's, the consumers'
    and the admin's configs include them).

    Attributes:
        access_key: The access key requests are signed with; None: from
            ``ROCKETQ_ACCESS_KEY`` or the credentials file.
        secret_key: Its secret key (never shown by ``repr``); None: from
            ``ROCKETQ_SECRET_KEY`` or the credentials file.
        credentials_file: A TOML file with ``access_key = "..."`` and
            ``secret_key = "..."``; None: ``ROCKETQ_CREDENTIALS_FILE``, else
            ``~/.rocketq/credentials`` when it exists.
        tls: Connect to nameservers and brokers over TLS; None: as ``ROCKETQ_TLS`` says
            (off when unset).
        tls_ca_file: The CA certificates (PEM) a server's certificate must chain to; empty:
            ``ROCKETQ_TLS_CA_FILE``, else the system's.
        tls_cert_file: A client certificate (PEM) for servers that ask for one (mTLS);
            empty: ``ROCKETQ_TLS_CERT_FILE``, else none.
        tls_key_file: The private key of ``tls_cert_file``; empty: ``ROCKETQ_TLS_KEY_FILE``.
        tls_verify_hostname: Check that a server's certificate names the host connected
            to (its address as the nameserver gives it, usually an IP address).
    """

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    credentials_file: str | None = None
    tls: bool | None = None
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_verify_hostname: bool = True


def security_settings(config: object) -> dict[str, Any]:
    """The credential and TLS settings of a client's config, as keyword settings for
    another client (a tracing consumer's trace producer signs as its consumer does)."""
    return {name: getattr(config, name) for name in SECURITY_SETTINGS}


def resolve_credentials(config: object, owner: str) -> Credentials | None:
    """The credentials a client of kind ``owner`` signs with (None: it does not sign).

    Raises:
        ConfigError: Half a key pair, or a credentials file that cannot be read.
    """
    try:
        return load_credentials(
            getattr(config, "access_key", None),
            getattr(config, "secret_key", None),
            getattr(config, "credentials_file", None),
        )
    except ValueError as exc:
        raise ConfigError(f"{owner}: {exc}") from None


def _readable(path: str, setting: str, owner: str) -> None:
    if not os.path.isfile(path):
        raise ConfigError(f"{owner}: {setting} {path!r} does not exist or is not a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{owner}: {setting} {path!r} is not readable")


def tls_settings(
    config: object, owner: str, environ: Mapping[str, str] | None = None
) -> tuple[bool, dict[str, str]]:
    """Whether a client of kind ``owner`` uses TLS and its CA, certificate and key files
    (empty: none), from its config, then the environment (see the module's text).

    Raises:
        ConfigError: A TLS file set without TLS (given, or from the environment when TLS
            was left to it), or a bad ``ROCKETQ_TLS``.
    """
    env = os.environ if environ is None else environ
    given = {
        name: str(getattr(config, name, "") or "")
        for name in ("tls_ca_file", "tls_cert_file", "tls_key_file")
    }
    asked = getattr(config, "tls", None)
    tls = bool(asked) if asked is not None else tls_from_env(owner, env)
    from_env = {
        name: env.get(var, "").strip() for name, var in TLS_FILE_ENV.items() if not given[name]
    }
    if not tls:
        set_here = [name for name, path in given.items() if path]
        if set_here:
            raise ConfigError(
                f"{owner}: {', '.join(set_here)} set but tls is off; pass tls=True to connect "
                "over TLS"
            )
        in_env = [TLS_FILE_ENV[name] for name, path in from_env.items() if path]
        if in_env and asked is None:
            raise ConfigError(
                f"{owner}: {', '.join(in_env)} set but TLS is off; set {TLS_ENV}=true (or pass "
                "tls=True) to connect over TLS, or unset them"
            )
        return False, {}
    return True, {name: given[name] or from_env.get(name, "") for name in given}


def tls_context(config: object, owner: str) -> ssl.SSLContext | None:
    """The TLS context a client of kind ``owner`` connects with (None: plaintext), from
    :func:`tls_settings`.

    Raises:
        ConfigError: A TLS file set without TLS, or missing, or not a certificate or key.
    """
    tls, files = tls_settings(config, owner)
    if not tls:
        return None
    for name, path in files.items():
        if path:
            _readable(path, name, owner)
    if bool(files["tls_cert_file"]) != bool(files["tls_key_file"]):
        raise ConfigError(
            f"{owner}: a client certificate needs both tls_cert_file and tls_key_file"
        )
    try:
        return client_context(
            files["tls_ca_file"],
            files["tls_cert_file"],
            files["tls_key_file"],
            bool(getattr(config, "tls_verify_hostname", True)),
        )
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        names = ", ".join(f"{n}={p!r}" for n, p in files.items() if p) or "the system CAs"
        raise ConfigError(f"{owner}: the TLS files do not load ({names}): {exc}") from None


def client_security(config: object, owner: str) -> ClientSecurity | None:
    """What a client of kind ``owner`` adds to its connections: TLS and request signing as
    its config and the environment ask (None: neither).

    Raises:
        ConfigError: See :func:`resolve_credentials` and :func:`tls_context`.
    """
    context = tls_context(config, owner)
    credentials = resolve_credentials(config, owner)
    if context is None and credentials is None:
        return None
    if credentials is None:
        return ClientSecurity(ssl=context)
    # Sessions: where a server remembers the verified sender (stateful authentication),
    # requests after the first carry the access key alone. The strong signature goes to
    # servers that announce it, RocketMQ's to the others.
    return ClientSecurity(
        ssl=context,
        sign=credentials.sign,
        access_key=credentials.access_key,
        sessions=True,
        sign_strong=credentials.sign_strong,
    )
