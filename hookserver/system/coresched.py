"""Linux core scheduling (`prctl(PR_SCHED_CORE, ...)`, kernel 5.14+ with CONFIG_SCHED_CORE): tasks run on the
two hyperthreads of one core at the same time only when they hold the same cookie, so a BE pod never shares a
core with an LS pod it does not trust. Cookie 0 is the default every task starts with.

The kernel's operations (Documentation/admin-guide/hw-vuln/core-scheduling.rst):
  GET        the cookie of a task (an opaque id, 0 = default)
  CREATE     a new cookie for a task, its thread group, or its process group
  SHARE_TO   push the calling thread's cookie to a task / thread group
  SHARE_FROM pull a task's cookie to the calling thread

So giving process B the cookie of process A is: a helper thread pulls A's cookie (SHARE_FROM) and pushes it to
B's thread group (SHARE_TO), then exits and its cookie with it; clearing is a helper thread with the default
cookie pushing it. The agent's own threads keep cookie 0 (koordlet: the agent is a SYSTEM pod).

`CoreSchedKernel` is what the reconciler's reader and executor need; tests pass a fake one. Every call raises
OSError with the kernel's errno: EINVAL on a kernel without core scheduling, ESRCH for a task that exited.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ["CoreSchedKernel", "LibcCoreSched", "unavailable_reason"]

PR_SCHED_CORE = 62
GET, CREATE, SHARE_TO, SHARE_FROM = 0, 1, 2, 3
PIDTYPE_PID, PIDTYPE_TGID = 0, 1


class CoreSchedKernel(Protocol):
    def get(self, pid: int) -> int:
        """The cookie of task `pid` (0: the default)."""

    def create(self, pid: int) -> None:
        """A new cookie for `pid`'s whole thread group."""

    def assign(self, from_pid: int, to_pids: Sequence[int]) -> list[int]:
        """Give `from_pid`'s cookie to each of `to_pids`' thread groups; the pids that could not take it."""

    def clear(self, pids: Sequence[int]) -> list[int]:
        """Reset each thread group to the default cookie; the pids that could not be reset."""


class LibcCoreSched:
    """The real kernel, through libc's prctl."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)

    def _prctl(self, op: int, pid: int, pidtype: int, addr: object = None) -> None:
        if self._libc.prctl(PR_SCHED_CORE, op, pid, pidtype, addr) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"prctl(PR_SCHED_CORE, {op}, {pid}): {os.strerror(code)}")

    def get(self, pid: int) -> int:
        cookie = ctypes.c_ulong(0)
        self._prctl(GET, pid, PIDTYPE_PID, ctypes.byref(cookie))
        return int(cookie.value)

    def create(self, pid: int) -> None:
        self._prctl(CREATE, pid, PIDTYPE_TGID)

    def assign(self, from_pid: int, to_pids: Sequence[int]) -> list[int]:
        def work() -> list[int]:
            self._prctl(SHARE_FROM, from_pid, PIDTYPE_PID)
            return self._push(to_pids)
        return _in_helper_thread(work, list(to_pids))

    def clear(self, pids: Sequence[int]) -> list[int]:
        return _in_helper_thread(lambda: self._push(pids), list(pids))

    def _push(self, pids: Sequence[int]) -> list[int]:
        failed: list[int] = []
        for pid in pids:
            try:
                self._prctl(SHARE_TO, pid, PIDTYPE_TGID)
            except OSError:
                failed.append(pid)
        return failed


def _in_helper_thread(work: Callable[[], list[int]], all_pids: list[int]) -> list[int]:
    """Run `work` on a fresh thread (it starts with the agent's default cookie and takes any other one to its
    end), so no agent thread ever keeps a pod's cookie. A failure before the pushes fails every pid."""
    out: list[list[int]] = []

    def run() -> None:
        try:
            out.append(work())
        except OSError:
            out.append(all_pids)

    thread = threading.Thread(target=run, name="core-sched-helper", daemon=True)
    thread.start()
    thread.join()
    return out[0] if out else all_pids


def unavailable_reason(kernel: CoreSchedKernel, sys_root: str) -> str:
    """Why core scheduling cannot work here ("" when it can): no PR_SCHED_CORE in the kernel, or no SMT (one
    thread per core: there is no sibling to isolate from)."""
    try:
        kernel.get(0)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return "this kernel has no core scheduling (prctl PR_SCHED_CORE answers EINVAL)"
        return f"prctl PR_SCHED_CORE: {exc.strerror or exc}"
    try:
        with open(os.path.join(sys_root, "devices", "system", "cpu", "smt", "active"), encoding="ascii") as handle:
            if handle.read().strip() == "0":
                return "the node has no SMT (one thread per core): nothing to isolate"
    except OSError:
        pass
    return ""
