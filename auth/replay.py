"""The replay window of strong signatures: a signed request is accepted once, and only near
the time it was signed.

A strong signature carries a timestamp and a nonce (:mod:`rocketq.auth.strong_signature`).
The server refuses a timestamp more than ``window`` away from its own clock, and a nonce of
the same access key it has accepted before, remembering each accepted (access key, nonce)
until its timestamp leaves the window: after that the timestamp alone refuses a replay.

What is remembered is bounded, whatever the traffic: only signatures that verified are
remembered (nobody without a secret key can add any), each as a 16-byte digest, at most
``capacity`` of them. When a new one would exceed that, the one with the oldest timestamp
is forgotten and its access key's *floor* rises to that timestamp: from then on, that
access key's timestamps at or below its floor are refused too ("older than what this
server remembers"). No replay is ever accepted (every forgotten nonce's timestamp is at or
below its key's floor). Under a flood of signed requests the window shrinks towards the
newest timestamps instead of memory growing; clients whose clocks are right keep working,
and a user who floods (with timestamps old or new) raises no other user's floor above that
user's own past timestamps.
"""

from __future__ import annotations

import hashlib
import heapq
from typing import Final

# The most nonces remembered per server (about 200 bytes each: some 20 MB at most).
NONCES_KEPT: Final = 100_000
_NO_FLOOR: Final = -(1 << 63)


def _digest(access_key: str, nonce: str) -> bytes:
    key = access_key.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(
        len(key).to_bytes(4, "big") + key + nonce.encode("utf-8", "surrogatepass"),
        digest_size=16,
    ).digest()


class _KeyState:
    """One access key's floor and how many of its nonces are remembered."""

    __slots__ = ("floor_ms", "kept")

    def __init__(self) -> None:
        self.floor_ms = _NO_FLOOR
        self.kept = 0


class ReplayWindow:
    """The nonces accepted within the window, per access key (see the module)."""

    def __init__(self, window_seconds: float, capacity: int = NONCES_KEPT) -> None:
        if window_seconds <= 0:
            raise ValueError(f"a replay window of {window_seconds} s: it must be positive")
        if capacity < 1:
            raise ValueError(f"a nonce capacity of {capacity}: it must be at least 1")
        self.window_ms = int(window_seconds * 1000)
        self.capacity = capacity
        self._seen: set[bytes] = set()
        # A heap, oldest timestamp first; digests are unique, so states are never compared.
        self._by_time: list[tuple[int, bytes, _KeyState]] = []
        self._keys: dict[str, _KeyState] = {}
        self._keys_checked = 0  # how many key states there were when last pruned

    def __len__(self) -> int:
        return len(self._seen)

    def floor_ms(self, access_key: str) -> int | None:
        """The access key's floor (its timestamps at or below it are refused), or None."""
        state = self._keys.get(access_key)
        return None if state is None or state.floor_ms == _NO_FLOOR else state.floor_ms

    def timely(self, access_key: str, timestamp_ms: int, now_ms: int) -> str | None:
        """Why a signature of ``access_key`` made at ``timestamp_ms`` is refused at
        ``now_ms`` whatever its nonce (outside the window, or older than what is
        remembered of that key), else None."""
        skew = timestamp_ms - now_ms
        if abs(skew) > self.window_ms:
            side = "ahead of" if skew > 0 else "behind"
            return (
                f"was signed {abs(skew) / 1000:.0f} s {side} this server's clock, outside "
                f"its {self.window_ms / 1000:g} s window (authentication_signature_window_"
                "seconds; check the client's clock)"
            )
        state = self._keys.get(access_key)
        if state is not None and timestamp_ms <= state.floor_ms:
            return (
                f"was signed {(now_ms - timestamp_ms) / 1000:.1f} s ago, no later than the "
                "oldest signature of that access key this server still remembers (it is "
                "receiving many signed requests); sign it again"
            )
        return None

    def admit(self, access_key: str, nonce: str, timestamp_ms: int, now_ms: int) -> str | None:
        """Accept a verified signature's nonce (remember it), or say why it is refused: its
        time (see :meth:`timely`) or its nonce seen before from that access key."""
        self._forget_before(now_ms - self.window_ms)
        why = self.timely(access_key, timestamp_ms, now_ms)
        if why is not None:
            return why
        key = _digest(access_key, nonce)
        if key in self._seen:
            return "reuses a Nonce this server has already accepted (a replayed request)"
        if len(self._seen) >= self.capacity:
            oldest, forgotten, owner = heapq.heappop(self._by_time)
            self._seen.discard(forgotten)
            owner.kept -= 1
            owner.floor_ms = max(owner.floor_ms, oldest)
            why = self.timely(access_key, timestamp_ms, now_ms)
            if why is not None:
                return why
        state = self._keys.get(access_key)
        if state is None:
            state = self._keys[access_key] = _KeyState()
        state.kept += 1
        self._seen.add(key)
        heapq.heappush(self._by_time, (timestamp_ms, key, state))
        return None

    def _forget_before(self, limit_ms: int) -> None:
        """Forget the nonces whose timestamps are before ``limit_ms`` (the window refuses
        them anyway), and, now and then, the keys with nothing remembered and a floor
        the window has passed."""
        by_time = self._by_time
        while by_time and by_time[0][0] < limit_ms:
            _, key, owner = heapq.heappop(by_time)
            self._seen.discard(key)
            owner.kept -= 1
        keys = self._keys
        if len(keys) > 2 * self._keys_checked + 64:
            for name in [n for n, s in keys.items() if not s.kept and s.floor_ms < limit_ms]:
                del keys[name]
            self._keys_checked = len(keys)
