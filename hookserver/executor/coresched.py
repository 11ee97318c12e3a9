"""Carries out a plan's core-scheduling changes (`CookieOp`) through the kernel's prctl
(`hookserver.system.coresched`): every change audited (path `core-sched <group>`), a failure reported, never
raised. A task that exited meanwhile is not a failure: processes come and go between the read and the write.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import dataclass

from hookserver.executor.plan import CookieOp
from hookserver.store.audit import WriteRecord
from hookserver.store.state import StateStore
from hookserver.system.coresched import CoreSchedKernel

__all__ = ["CookieExecutor", "CookieResult"]


@dataclass(frozen=True, slots=True)
class CookieResult:
    op: CookieOp
    ok: bool
    failed_pids: tuple[int, ...] = ()
    error: str = ""


class CookieExecutor:
    def __init__(self, kernel: CoreSchedKernel, *, store: StateStore) -> None:
        self.kernel = kernel
        self.store = store

    def apply(self, ops: Sequence[CookieOp]) -> list[CookieResult]:
        return [self._record(self._one(op)) for op in ops]

    def _one(self, op: CookieOp) -> CookieResult:
        try:
            if op.kind == "create":
                self.kernel.create(op.pid)
                failed = self.kernel.assign(op.pid, op.to_pids) if op.to_pids else []
            elif op.kind == "assign":
                failed = self.kernel.assign(op.pid, op.to_pids)
            else:
                failed = self.kernel.clear(op.to_pids)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return CookieResult(op, ok=True, error=f"pid {op.pid} exited")
            return CookieResult(op, ok=False, error=str(exc))
        if failed:
            return CookieResult(op, ok=False, failed_pids=tuple(failed),
                                error=f"{len(failed)} of {len(op.to_pids)} processes did not take it (exited?)")
        return CookieResult(op, ok=True)

    def _record(self, result: CookieResult) -> CookieResult:
        op = result.op
        self.store.audit.record_write(WriteRecord(
            ts=self.store.clock(), path=f"core-sched {op.group or '(default)'}",
            value=f"{op.kind} {op.pid or ''}->{','.join(map(str, op.to_pids))}".strip(), ok=result.ok,
            owner=op.owner, reason=op.reason, error=result.error,
        ))
        return result
