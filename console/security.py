"""The console's safety: users and their scrypt password hashes (``--users FILE``), the
login every request needs once login is on, the limit on failed logins per client address
(never per user name: failures from elsewhere never lock the real user out), the per-session
token every POST must carry (CSRF), and the credentials and TLS settings the console's own
cluster calls use."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import hmac
import ipaddress
import logging
import math
import os
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rocketq.auth.credentials import Credentials, load_credentials

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


@functools.cache
def _unknown_user_hash() -> str:
    """A hash no password matches in practice, checked for names that are not users."""
    return hash_password(secrets.token_hex(16))


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
        if stored is None:  # spend the same time as a wrong password: one scrypt
            verify_password(password, _unknown_user_hash())
            return False
        return verify_password(password, stored)

    async def check_async(self, name: str, password: str) -> bool:
        """:meth:`check` in a worker thread: scrypt takes tens of milliseconds of CPU, which
        would stall every other request if it ran on the event loop."""
        return await asyncio.to_thread(self.check, name, password)


class LoginLimiter:
    """Failed logins counted per key (a client address, :func:`login_key`): after
    ``max_failures`` failures within ``window`` seconds a key is refused until the oldest
    of them is ``window`` seconds old. At most ``max_keys`` keys are remembered (the least
    recently seen is forgotten first), each with at most ``max_failures`` times, so an
    attacker cannot grow the console's memory. ``clock`` is the monotonic seconds source."""

    def __init__(
        self,
        *,
        max_failures: int = 5,
        window: float = 60.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_failures < 1 or window <= 0 or max_keys < 1:
            raise ValueError("max_failures, window and max_keys must be positive")
        self.max_failures = max_failures
        self.window = window
        self.max_keys = max_keys
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._failures)

    def _recent(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        while times and now - times[0] >= self.window:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    def retry_after(self, *keys: str) -> float | None:
        """Seconds until every one of ``keys`` may try again; None when all may now."""
        now = self.clock()
        wait = 0.0
        for key in keys:
            times = self._recent(key, now)
            if times is not None and len(times) >= self.max_failures:
                wait = max(wait, times[0] + self.window - now)
        return wait if wait > 0 else None

    def failed(self, *keys: str) -> None:
        """Count one failed login against each of ``keys``."""
        now = self.clock()
        for key in keys:
            times = self._recent(key, now)
            if times is None:
                times = self._failures[key] = deque(maxlen=self.max_failures)
            else:
                self._failures.move_to_end(key)
            times.append(now)
            while len(self._failures) > self.max_keys:
                self._failures.popitem(last=False)

    def forget(self, key: str) -> None:
        """Clear a key's failures (a user who logged in)."""
        self._failures.pop(key, None)

    def take_back(self, key: str) -> None:
        """Uncount a key's latest failure: an attempt counted before its check (so that
        attempts made at the same time cannot pass the limit) that then succeeded."""
        times = self._failures.get(key)
        if times:
            times.pop()
            if not times:
                del self._failures[key]


def login_key(request: Request) -> str:
    """The key a login attempt counts against: its client address, an IPv6 address by its
    /64 network (one host may hold all of it). Never the user name: then anyone could lock
    the real user out by failing on purpose; a user's own address is locked only by the
    failures sent from it."""
    host = request.client.host if request.client is not None else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"address:{host[:256]}"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return f"address:{ipaddress.ip_network(f'{address}/64', strict=False)}"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return f"address:{address}"


def retry_after_header(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def safe_next(target: str) -> str:
    """Where to go after the login: a path on this site, never another site."""
    if not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


def anonymous_allowed(path: str) -> bool:
    """The only paths anyone may reach once login is on: the login page (and its POST) and
    the static style sheet and script."""
    if path == "/login":
        return True
    return path.startswith("/static/") and path.endswith((".css", ".js")) and ".." not in path


class LoginRequired:
    """ASGI middleware (inside the session middleware): with login on, every request but
    :func:`anonymous_allowed`'s needs a session logged in as one of ``users`` (a user
    taken out of the users file is out at the console's next start, whatever cookie they
    keep); the JSON API answers 401, a page sends the browser to the login page and back
    afterwards."""

    def __init__(self, app: ASGIApp, users: Users) -> None:
        self.app = app
        self.users = users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or anonymous_allowed(scope["path"]):
            await self.app(scope, receive, send)
            return
        session = scope.get("session") or {}
        if session.get("user") in self.users.hashes:
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        response: Response
        if path.startswith("/api/"):
            response = JSONResponse({"error": "log in first"}, status_code=401)
        else:
            target = path
            if scope.get("query_string") and scope.get("method") in ("GET", "HEAD"):
                target += "?" + scope["query_string"].decode("latin-1")
            response = RedirectResponse(f"/login?next={quote(target, safe='')}", 303)
        await response(scope, receive, send)


@dataclass(frozen=True)
class ClusterClient:
    """How the console's own cluster calls (its Admin and its producer) identify themselves:
    an access key and secret (else ``ROCKETQ_ACCESS_KEY``/``ROCKETQ_SECRET_KEY``, else a
    credentials file, as the SDK finds them) and TLS settings. With credentials the
    console signs every request, so it requires a login of its own users."""

    access_key: str | None = None
    secret_key: str | None = None
    credentials_file: str | None = None
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_verify_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ClusterClient:
        """From SDK client keyword settings (the CLI's credential and TLS options); empty
        strings count as not given, unknown keys are ignored."""
        fields = {f.name for f in dataclasses.fields(cls)}
        given = {k: v for k, v in settings.items() if k in fields and v != ""}
        return cls(**given)

    def credentials(self, environ: Mapping[str, str] | None = None) -> Credentials | None:
        """The credentials the console signs with; None when nothing is configured.
        Raises ValueError for half a pair or a bad credentials file."""
        return load_credentials(
            self.access_key,
            self.secret_key,
            self.credentials_file,
            environ=os.environ if environ is None else environ,
        )

    def sdk_settings(self, credentials: Credentials | None) -> dict[str, Any]:
        """The keyword arguments for the SDK's Admin and Producer: only what is set."""
        out: dict[str, Any] = {}
        if credentials is not None:
            out["access_key"] = credentials.access_key
            out["secret_key"] = credentials.secret_key
        if self.tls:
            out["tls"] = True
            out["tls_verify_hostname"] = self.tls_verify_hostname
            for key in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
                if value := getattr(self, key):
                    out[key] = value
        return out


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
