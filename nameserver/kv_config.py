"""KV config: namespace -> key -> value, persisted as JSON (RocketMQ's kvConfig.json)."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from rocketq.common.exceptions import ConfigError
from rocketq.common.file_modes import private_dir, tighten

log = logging.getLogger(__name__)


class KVConfigManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        # Puts and deletes run on worker threads: one change and its write at a time.
        self._lock = threading.Lock()

    def load(self) -> None:
        if not self.path.exists():
            return
        tighten(self.path, "KV config")  # an older version wrote it 0644
        try:
            doc = json.loads(self.path.read_text())
            table = doc.get("configTable", doc) if isinstance(doc, dict) else None
            if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
                raise ValueError("expected {namespace: {key: value}}")
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{self.path}: cannot read the KV config ({exc}); fix or remove the file"
            ) from None
        self.table = {ns: {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self.table.setdefault(namespace, {})[key] = value
            self._persist()
        log.info("KV config put: %s %s = %s", namespace, key, value)

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str]:
        """Every key and value of a namespace (a copy; empty if there is none)."""
        return dict(self.table.get(namespace, {}))

    def delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            kv = self.table.get(namespace)
            if kv is None or key not in kv:
                return False
            del kv[key]
            if not kv:
                del self.table[namespace]
            self._persist()
            return True

    def _persist(self) -> None:
        """Write to a temp file, fsync, rename: a crash leaves the old or the new file."""
        private_dir(self.path.parent)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        data = json.dumps({"configTable": self.table}, indent=2, sort_keys=True).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
