"""Last-written value per cgroup file, so the reconciler's re-applies cost nothing while nothing changed.

Like koordlet's executor cache (reference §5.9): a cacheable write is skipped when the same value was
written to the same file less than `force_update_seconds` ago; after that it is written again (a kubelet
or admin may have changed the file behind our back). Failed writes are never cached. The clock is injected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from hookserver.errors import PathEscapeError
from hookserver.system.cgroupnames import normalize_cgroup_dir

__all__ = ["WriteCache"]

T = TypeVar("T")


class WriteCache:
    """Thread-safe map (cgroup dir, resource) -> (value, written_at, file text). Bounded: oldest entries go first.

    The file text is what the file was left holding in its own unit (v2 `cpu.weight` 20 for the plan's shares
    512), so a skipped write is audited with the value the file has, never the plan's v1 number.

    The key is the plan's cgroup dir as given (not the resolved file), so a lookup costs no path work; the
    same dir spelt two ways is two entries, which costs one extra read-before-write, never a wrong skip."""

    def __init__(self, *, force_update_seconds: float, clock: Callable[[], float], capacity: int = 65536) -> None:
        self._ttl = force_update_seconds
        self._clock = clock
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[str, float, str]] = {}

    def fresh(self, cgroup_dir: str, resource: str, value: str) -> bool:
        """Whether `value` was written to this file within the force-update window."""
        return self.fresh_text(cgroup_dir, resource, value) is not None

    def fresh_text(self, cgroup_dir: str, resource: str, value: str) -> str | None:
        """The file text left by a write of `value` within the force-update window, or None when not fresh."""
        with self._lock:
            entry = self._entries.get((cgroup_dir, resource))
        if entry is None:
            return None
        cached, at, text = entry
        return text if cached == value and self._clock() - at < self._ttl else None

    def unverified(self, keys: Sequence[tuple[str, str, str]], items: Sequence[T]) -> list[T]:
        """The `items` whose (dir, resource, value) in `keys` is not fresh."""
        now = self._clock()
        ttl = self._ttl
        out: list[T] = []
        with self._lock:
            get = self._entries.get
            for (cgroup_dir, resource, value), item in zip(keys, items, strict=True):
                entry = get((cgroup_dir, resource))
                if entry is None or entry[0] != value or now - entry[1] >= ttl:
                    out.append(item)
        return out

    def remember(self, cgroup_dir: str, resource: str, value: str, text: str = "") -> None:
        """`value` (plan units, what `fresh` compares) went to the file, which now holds `text` (default: value)."""
        now = self._clock()
        with self._lock:
            key = (cgroup_dir, resource)
            self._entries.pop(key, None)
            self._entries[key] = (value, now, text or value)
            if len(self._entries) > self._capacity:
                del self._entries[next(iter(self._entries))]

    def forget(self, cgroup_dir: str, resource: str) -> None:
        with self._lock:
            self._entries.pop((cgroup_dir, resource), None)

    def forget_under(self, cgroup_dirs: Collection[str]) -> int:
        """Drop the entries of these dirs and of every dir below them (both compared normalized)."""
        gone = {_normalized(d) for d in cgroup_dirs}
        gone.discard("")
        if not gone:
            return 0
        with self._lock:
            keys = list(self._entries)
        dead = [key for key in keys if _under_any(key[0], gone)]
        with self._lock:
            for key in dead:
                self._entries.pop(key, None)
        return len(dead)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _normalized(cgroup_dir: str) -> str:
    """The normalized dir, or "" for one that is not a safe path (it was never written, so never cached)."""
    try:
        return normalize_cgroup_dir(cgroup_dir)
    except PathEscapeError:
        return ""


def _under_any(cgroup_dir: str, dirs: set[str]) -> bool:
    parts = _normalized(cgroup_dir).split("/")
    prefix = ""
    for part in parts:
        prefix = f"{prefix}/{part}" if prefix else part
        if prefix in dirs:
            return True
    return False
