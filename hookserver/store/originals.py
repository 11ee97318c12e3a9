"""What the node held before this agent first changed it, kept in the state dir so a restarted agent, or
`hookserver cleanup` run after the agent is gone, can put it back.

One JSON file (`node-originals.json`) of sections, each a map of key -> the file's text before our first
write: `sysctl` ("vm.min_free_kbytes"), `cgroup` ("cpu:kubepods/besteffort/cpu.cfs_quota_us") and
`resctrl_groups` (groups we created, value "created") and `oom_score_adj` ("<pid>@<start ticks>": a process's
score before OOMScoreAdj first changed it; see `hookserver.system.processes`) and `resctrl_pod_groups` (the
pod-level `koordlet-<uid>` groups we created, value "created") and `tc` (interface -> the kind of root qdisc it had
before TCNetworkQoS put its htb there) and `systemd_units` ("<unit>/<Property>": a systemd unit property's value before
the agent first kept its own there, `hookserver.systemd`). A key is recorded once (the first write) and kept
until the value is restored (`forget`). Every change is written atomically (temporary file, fsync, rename,
fsync of the directory), so a crash leaves either the old or the new file, never half of one, plus at worst a
temporary file named after the dead process, which the next load removes. A corrupt
file is moved aside (`.corrupt`) with a warning and treated as empty: an agent must start, and the operator
is told which originals were lost.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.system.staletmp import remove_stale_tmp

__all__ = ["ORIGINALS_FILE", "SECTIONS", "NodeOriginals"]

log = logging.getLogger(__name__)

ORIGINALS_FILE = "node-originals.json"
SECTIONS = ("sysctl", "cgroup", "resctrl_groups", "oom_score_adj", "resctrl_pod_groups", "tc", "systemd_units")
_MAX_BYTES = 1 << 20
# `_persist`'s temporary file; one left by a killed agent is removed at the next load.
_TMP = re.compile(re.escape(ORIGINALS_FILE) + r"\.tmp\.(?P<pid>[0-9]+)\.[0-9]+")


class NodeOriginals:
    """Thread-safe; `state_dir=""` keeps everything in memory (tests, dry runs without a state dir)."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, ORIGINALS_FILE) if state_dir else ""
        self._lock = threading.Lock()
        self.problem = ""
        self.tmp_removed: list[str] = []
        self._data: dict[str, dict[str, str]] = {s: {} for s in SECTIONS}
        self._load()

    def _load(self) -> None:
        if not self.path:
            return
        self.tmp_removed = remove_stale_tmp(os.path.dirname(self.path) or ".", _TMP)
        if not os.path.exists(self.path):
            return
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read(_MAX_BYTES + 1)
            if len(raw) > _MAX_BYTES:
                raise ValueError(f"larger than {_MAX_BYTES} bytes")
            doc = json.loads(raw.decode("utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("top level is not an object")
            for section in SECTIONS:
                values = doc.get(section, {})
                if not isinstance(values, dict):
                    raise ValueError(f"{section} is not an object")
                self._data[section] = {str(k): str(v) for k, v in values.items()}
        except (OSError, ValueError) as exc:
            aside = self.path + ".corrupt"
            self.problem = f"{self.path}: unreadable ({exc}); moved to {aside}; originals recorded there are not restored"
            log.warning("%s", self.problem)
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            self._data = {s: {} for s in SECTIONS}

    def _persist(self) -> None:
        """Atomic: write a temporary file, fsync it, rename it over the old one, fsync the directory."""
        if not self.path:
            return
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        tmp = f"{self.path}.tmp.{os.getpid()}.{threading.get_ident()}"
        data = json.dumps(self._data, indent=1, sort_keys=True).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def record(self, section: str, key: str, value: str) -> bool:
        """Remember `value` for `key` unless one is already kept (the first write's original wins).
        True when it was recorded now. Raises OSError when the state dir cannot be written: the caller
        must then not change the node, or the original would be lost."""
        with self._lock:
            values = self._data[section]
            if key in values:
                return False
            values[key] = value
            try:
                self._persist()
            except OSError:
                del values[key]
                raise
            return True

    def forget(self, section: str, key: str) -> None:
        with self._lock:
            if self._data[section].pop(key, None) is not None:
                self._persist()

    def get(self, section: str, key: str) -> str | None:
        with self._lock:
            return self._data[section].get(key)

    def section(self, section: str) -> Mapping[str, str]:
        with self._lock:
            return MappingProxyType(dict(self._data[section]))

    def describe(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {s: dict(v) for s, v in self._data.items()}
