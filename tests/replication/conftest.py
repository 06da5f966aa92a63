from __future__ import annotations

# The store fixtures, for tests that put Raft over a real store.
from tests.storage.conftest import store_factory  # noqa: F401
