"""Standalone NodeSLO from `--slo-file`, reloaded when the file changes.

The file is polled (mtime, size, inode) rather than watched with inotify: it works the same on a
ConfigMap volume, whose updates swap a symlink, and it needs no extra dependency. A file that is
missing, unreadable or invalid keeps the previous NodeSLO in force and is reported in `hookctl slo`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from hookserver.aio.periodic import run_every
from hookserver.errors import ConfigError
from hookserver.informer.slo_state import SLOState
from hookserver.slo import read_slo_file

__all__ = ["SLOFileSource"]

log = logging.getLogger(__name__)

_Signature = tuple[int, int, int, int]


class SLOFileSource:
    name = "slo-file"

    def __init__(self, path: str, *, slo: SLOState, poll_s: float) -> None:
        self.path = path
        self._slo = slo
        self._poll_s = poll_s
        self._signature: _Signature | None = None
        self._missing = False  # "not found" already said: a missing file is reported once, not every poll
        self.loads = 0
        self.errors = 0
        self.last_error = ""

    def _stat(self) -> _Signature | None:
        try:
            st = os.stat(self.path)  # follows symlinks: a ConfigMap volume swap changes the inode
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)

    def load_if_changed(self) -> bool:
        """Reload when the file's signature moved. True when a new document was applied."""
        signature = self._stat()
        if signature == self._signature and signature is not None:
            return False
        if signature is None:
            if not self._missing:
                self._record(f"file {self.path}: not found; keeping the current NodeSLO")
                self._missing = True
            self._signature = None
            return False
        self._missing = False
        self._signature = signature
        try:
            document = read_slo_file(self.path)
        except ConfigError as exc:
            self._record(str(exc))
            return False
        self._slo.set_document(document, input_name=f"file {self.path}")
        self.loads += 1
        self.last_error = ""
        log.info("NodeSLO loaded from %s (%s)", self.path, document.kind)
        return True

    def _record(self, message: str) -> None:
        self.errors += 1
        self.last_error = message
        self._slo.set_error(message)

    async def _tick(self) -> None:
        await asyncio.to_thread(self.load_if_changed)

    async def run(self, stop: asyncio.Event) -> None:
        await run_every(self._poll_s, self._tick, stop, name=f"informer slo-file {self.path}")

    def healthy(self) -> bool:
        return True  # a bad file is reported, but the store is not stale: the last good NodeSLO applies

    def status(self) -> dict[str, Any]:
        return {
            "resource": self.name, "path": self.path, "loads": self.loads, "errors": self.errors,
            "last_error": self.last_error, "stale": False,
        }
