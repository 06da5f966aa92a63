"""An access key and its secret, how a client signs its requests with them, and where a
client finds them (arguments, environment, a credentials file)."""

from __future__ import annotations

import json
import os
import secrets
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketq.auth.signature import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, compute_signature
from rocketq.auth.strong_signature import (
    AUDIENCE,
    METHOD,
    NONCE,
    SIGNATURE_METHOD,
    SIGNATURE_V2,
    STRONG_FIELDS,
    TIMESTAMP,
    compute_strong_signature,
)
from rocketq.remoting.command import RemotingCommand

ENV_ACCESS_KEY: Final = "ROCKETQ_ACCESS_KEY"
ENV_SECRET_KEY: Final = "ROCKETQ_SECRET_KEY"
ENV_SECURITY_TOKEN: Final = "ROCKETQ_SECURITY_TOKEN"
ENV_CREDENTIALS_FILE: Final = "ROCKETQ_CREDENTIALS_FILE"
DEFAULT_CREDENTIALS_FILE: Final = Path(".rocketq") / "credentials"
# A credentials file or JSON text larger than this is not a credentials file.
MAX_CREDENTIALS_BYTES: Final = 64 * 1024
MAX_KEY_CHARS: Final = 4096


@dataclass(frozen=True)
class Credentials:
    """An access key with its secret key (and, for temporary credentials, a security
    token). ``repr`` never shows the secret or the token."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.access_key:
            raise ValueError("the access key is empty")
        if not self.secret_key:
            raise ValueError(f"the secret key of access key {self.access_key!r} is empty")
        if len(self.access_key) > MAX_KEY_CHARS or len(self.secret_key) > MAX_KEY_CHARS:
            raise ValueError(
                f"an access key or secret key is longer than {MAX_KEY_CHARS} characters"
            )

    def sign(self, cmd: RemotingCommand) -> None:
        """Sign a request as RocketMQ's ``AclClientRPCHook`` does: add ``AccessKey`` (and
        ``SecurityToken``) to its ext fields, then ``Signature`` over all of them and the
        body. Call it last, once every header field is in place."""
        ext = cmd.ext
        if ext is None:
            ext = cmd.ext = {}
        ext[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext[SECURITY_TOKEN] = self.security_token
        for name in STRONG_FIELDS:  # a request signed before, the other way
            ext.pop(name, None)
        ext[SIGNATURE] = compute_signature(self.secret_key, ext, cmd.body)

    def sign_strong(
        self,
        cmd: RemotingCommand,
        audience: str = "",
        *,
        now_ms: int | None = None,
        nonce: str | None = None,
    ) -> None:
        """Sign a request with rocketq's strong signature (``rocketq.auth.strong_signature``:
        keys, values, code and body, stamped now, or at ``now_ms``, with a fresh random
        nonce, for the server that announced ``audience``): add ``AccessKey`` (and
        ``SecurityToken``), ``SignatureMethod``, ``Timestamp``, ``Nonce``, ``Audience``
        (unless empty) and ``SignatureV2``. For servers that announce they accept it
        (AUTH_SESSION's ``strongSignature`` and ``signatureAudience``); call it last, once
        every header field is in place, and again for each send (a server accepts a nonce
        once)."""
        ext = cmd.ext
        if ext is None:
            ext = cmd.ext = {}
        ext.pop(SIGNATURE, None)
        ext.pop(AUDIENCE, None)
        if audience:
            ext[AUDIENCE] = audience
        ext[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext[SECURITY_TOKEN] = self.security_token
        ext[SIGNATURE_METHOD] = METHOD
        ext[TIMESTAMP] = str(int(time.time() * 1000) if now_ms is None else now_ms)
        ext[NONCE] = secrets.token_urlsafe(16) if nonce is None else nonce
        ext[SIGNATURE_V2] = compute_strong_signature(
            self.secret_key, cmd.code, cmd.version, ext, cmd.body
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Credentials:
        """Credentials from RocketMQ's JSON form ``{"accessKey": "...", "secretKey": "..."}``
        (as ``innerClientAuthenticationCredentials`` writes them)."""
        if len(text) > MAX_CREDENTIALS_BYTES:
            raise ValueError(f"credentials JSON is longer than {MAX_CREDENTIALS_BYTES} bytes")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ValueError(
                f"credentials are not JSON ({exc}); "
                'write {"accessKey": "...", "secretKey": "..."}'
            ) from None
        if not isinstance(doc, dict):
            raise ValueError(
                'credentials JSON must be an object {"accessKey": ..., "secretKey": ...}'
            )
        access_key = doc.get("accessKey")
        secret_key = doc.get("secretKey")
        token = doc.get("securityToken", "")
        for name, value in (("accessKey", access_key), ("secretKey", secret_key)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"credentials JSON has no {name} (a non-empty string)")
        if not isinstance(token, str):
            raise ValueError("credentials JSON: securityToken must be a string")
        assert isinstance(access_key, str) and isinstance(secret_key, str)
        return cls(access_key, secret_key, token)


def _pair(
    access_key: str | None, secret_key: str | None, where: str, token: str = ""
) -> Credentials | None:
    if not access_key and not secret_key:
        return None
    if not secret_key:
        raise ValueError(f"{where} gives an access key but no secret key")
    if not access_key:
        raise ValueError(f"{where} gives a secret key but no access key")
    return Credentials(access_key, secret_key, token)


def _read_file(path: Path) -> Credentials | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(
            f"cannot read the credentials file {path}: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_CREDENTIALS_BYTES:
        raise ValueError(
            f"the credentials file {path} is larger than {MAX_CREDENTIALS_BYTES} bytes"
        )
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(
            f'the credentials file {path} is not TOML ({exc}); write access_key = "..." '
            'and secret_key = "..."'
        ) from None
    values: dict[str, str] = {}
    for name in ("access_key", "secret_key", "security_token"):
        value = doc.get(name, "")
        if not isinstance(value, str):
            raise ValueError(f"the credentials file {path}: {name} must be a string")
        values[name] = value
    found = _pair(
        values["access_key"],
        values["secret_key"],
        f"the credentials file {path}",
        values["security_token"],
    )
    if found is None:
        raise ValueError(f"the credentials file {path} has no access_key and secret_key")
    return found


def load_credentials(
    access_key: str | None = None,
    secret_key: str | None = None,
    credentials_file: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Credentials | None:
    """The credentials a client signs with, from the first place that has them: the
    arguments; ``ROCKETQ_ACCESS_KEY`` / ``ROCKETQ_SECRET_KEY`` (with
    ``ROCKETQ_SECURITY_TOKEN``); a TOML file (``access_key = "..."``, ``secret_key = "..."``)
    named by the argument, else by ``ROCKETQ_CREDENTIALS_FILE``, else
    ``~/.rocketq/credentials`` when it exists. None when nothing is configured.

    A place that gives only half a pair, or a named file that cannot be read, is a
    ``ValueError`` saying which half or which file.
    """
    found = _pair(access_key, secret_key, "the arguments")
    if found is not None:
        return found
    found = _pair(
        environ.get(ENV_ACCESS_KEY),
        environ.get(ENV_SECRET_KEY),
        f"the environment ({ENV_ACCESS_KEY}/{ENV_SECRET_KEY})",
        environ.get(ENV_SECURITY_TOKEN, ""),
    )
    if found is not None:
        return found
    named = credentials_file or environ.get(ENV_CREDENTIALS_FILE)
    if named:
        return _read_file(Path(named).expanduser())
    home = environ.get("HOME")
    try:
        base = Path(home) if home else Path.home()
    except RuntimeError:  # no home directory to look in
        return None
    default = base / DEFAULT_CREDENTIALS_FILE
    if default.is_file():
        return _read_file(default)
    return None
