"""A background thread with a wake event and a clean stop (RocketMQ's ServiceThread)."""

from __future__ import annotations

import abc
import threading


class ServiceThread(abc.ABC):
    """Subclasses implement ``_run``, looping until ``_stopping`` and waiting on ``_wake``."""

    name = "service"

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def halt(self) -> None:
        """Stop the thread and wait for it to end."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def wake(self) -> None:
        self._wake.set()

    @abc.abstractmethod
    def _run(self) -> None:
        """The thread's loop."""
