"""A fake core-scheduling kernel for tests: cookies by pid, as prctl(PR_SCHED_CORE) keeps them (a process's
threads are one pid here), counting the calls, with pids that "exited" and an "unsupported" mode (EINVAL)."""

from __future__ import annotations

import errno
from collections.abc import Sequence


class FakeCoreSched:
    def __init__(self, cookies: dict[int, int] | None = None, *, supported: bool = True) -> None:
        self.cookies = dict(cookies or {})
        self.supported = supported
        self.exited: set[int] = set()
        self.calls: list[tuple[str, int]] = []
        self._next = 0x1000

    def _check(self, pid: int) -> None:
        if not self.supported:
            raise OSError(errno.EINVAL, "Invalid argument")
        if pid in self.exited:
            raise OSError(errno.ESRCH, "No such process")

    def get(self, pid: int) -> int:
        self._check(pid)
        return self.cookies.get(pid, 0)

    def create(self, pid: int) -> None:
        self._check(pid)
        self.calls.append(("create", pid))
        self._next += 1
        self.cookies[pid] = self._next

    def assign(self, from_pid: int, to_pids: Sequence[int]) -> list[int]:
        self._check(from_pid)
        self.calls.append(("assign", from_pid))
        failed = [p for p in to_pids if p in self.exited]
        for pid in to_pids:
            if pid not in self.exited:
                self.cookies[pid] = self.cookies.get(from_pid, 0)
        return failed

    def clear(self, pids: Sequence[int]) -> list[int]:
        self.calls.append(("clear", len(pids)))
        for pid in pids:
            self.cookies[pid] = 0
        return []
