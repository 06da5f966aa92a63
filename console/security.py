"""The console's safety: users and their scrypt password hashes (``--users FILE``), the
login check for changes, and the per-session token every POST must carry (CSRF)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from starlette.requests import Request

log = logging.getLogger("rocketq.console")

# hashlib.scrypt's cost: n=2**14, r=8, p=1 (the interactive-login setting of the paper).
SCRYPT_N: Final = 2**14
SCRYPT_R: Final = 8
SCRYPT_P: Final = 1
HASH_PREFIX: Final = "scrypt"
CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "x-csrf-token"
ANONYMOUS: Final = "anonymous"


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$<salt hex>$<hash hex>``: the form a users file holds after ``name:``."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P)
    return f"{HASH_PREFIX}${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        prefix, n, r, p, salt, digest = stored.split("$")
        if prefix != HASH_PREFIX:
            return False
        got = hashlib.scrypt(
            password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p)
        )
    except ValueError:
        return False
    return hmac.compare_digest(got.hex(), digest)


@dataclass(frozen=True)
class Users:
    """name -> scrypt hash, from a file of ``name:hash`` lines (``#`` starts a comment)."""

    hashes: dict[str, str]

    @classmethod
    def load(cls, path: str | Path) -> Users:
        hashes = {}
        for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, stored = line.partition(":")
            if not sep or not name or not stored.startswith(HASH_PREFIX + "$"):
                raise ValueError(
                    f"{path}:{number}: expected 'name:scrypt$...'; make one with "
                    "`rocketq console --hash-password NAME`"
                )
            hashes[name] = stored
        return cls(hashes)

    def check(self, name: str, password: str) -> bool:
        stored = self.hashes.get(name)
        if stored is None:  # spend the same time as a wrong password
            verify_password(password, hash_password("", salt=b"0" * 16))
            return False
        return verify_password(password, stored)


def csrf_token(request: Request) -> str:
    """The session's token, made on first use."""
    token = request.session.get(CSRF_FIELD)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session[CSRF_FIELD] = token
    return token


async def csrf_ok(request: Request) -> bool:
    """Whether a POST carries the session's token (header, or form field)."""
    expected = request.session.get(CSRF_FIELD)
    if not isinstance(expected, str):
        return False
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    return sent is not None and hmac.compare_digest(sent, expected)


def current_user(request: Request) -> str | None:
    user = request.session.get("user")
    return user if isinstance(user, str) else None


def actor(request: Request) -> str:
    """Who a change is logged as: the logged-in user, or "anonymous" without login."""
    return current_user(request) or ANONYMOUS


def audit(request: Request, action: str, **details: object) -> None:
    """One log line per change, with the user."""
    text = " ".join(f"{k}={v!r}" for k, v in details.items())
    log.info("change by %s: %s %s", actor(request), action, text)
