"""A real Prometheus (Debian's ``prometheus`` package, which ``make test`` installs as root)
for the monitoring tests: absent, the tests skip, and fail when ``CI`` is set."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

from tests.system_deps import require_command


def need_prometheus() -> None:
    # The HTTP API v1 and the config of Prometheus 2.
    require_command("prometheus", minimum=2, package="prometheus")


def query(url: str, expr: str) -> dict[str, Any]:
    """Prometheus' answer to an instant query (its JSON, errors included)."""
    address = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(address, timeout=10) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        doc = json.loads(exc.read() or b"{}")
    return doc


def series(url: str, expr: str) -> list[dict[str, Any]]:
    doc = query(url, expr)
    assert doc.get("status") == "success", f"{expr}: {doc.get('error', doc)}"
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def wait_for_series(url: str, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Poll until ``expr`` returns a series (deadline ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        found = series(url, expr)
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no series for {expr} after {timeout:g} s")
        time.sleep(0.2)
