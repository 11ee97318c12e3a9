"""Runs the `tc` commands of a QoS plan (`NetCommand`), the network counterpart of `sysfiles`: every attempt
is audited (path `tc <args>`), a failure is reported, never raised, and originals are recorded before the
first change so that `hookserver cleanup` can undo it.

A command the kernel cannot carry out at all (a classifier or qdisc this kernel was built without: "not
found", "Operation not supported") is not tried again for `retry_unsupported_s`: the planner would ask for it
every round, and the audit would fill with the same failure once a second. It is still reported each time,
as skipped with the kernel's words.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hookserver.executor.plan import NetCommand
from hookserver.store.audit import WriteRecord
from hookserver.store.originals import NodeOriginals
from hookserver.store.state import StateStore
from hookserver.system.tc import Runner, run_tc

__all__ = ["CommandResult", "TcExecutor"]

log = logging.getLogger(__name__)

_UNSUPPORTED = ("not found", "Operation not supported", "No such file or directory")
_NOTHING_TO_UNDO = ("handle of zero", "Cannot find device", "No such file or directory")


@dataclass(frozen=True, slots=True)
class CommandResult:
    command: NetCommand
    ok: bool
    skipped: bool = False
    error: str = ""


class TcExecutor:
    """`apply(commands)` in order. `netns` runs every command in that network namespace (`tc -n`); `on_change`
    is called after a batch that ran anything (the wiring passes the reader's `invalidate`)."""

    def __init__(
        self, *, store: StateStore, originals: NodeOriginals, tc: str = "tc", netns: str = "",
        run: Runner = run_tc, timeout_s: float = 5.0, retry_unsupported_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic, on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.originals = originals
        self.tc = tc
        self.netns = netns
        self._run = run
        self.timeout_s = timeout_s
        self.retry_unsupported_s = retry_unsupported_s
        self._clock = clock
        self._unsupported: dict[tuple[str, ...], tuple[float, str]] = {}
        # Called after commands ran (the reader's cached tree is then out of date).
        self._on_change = on_change

    def argv(self, command: NetCommand) -> list[str]:
        return [self.tc, *(("-n", self.netns) if self.netns else ()), *command.args]

    def apply(self, commands: Sequence[NetCommand]) -> list[CommandResult]:
        results = [self._one(c) for c in commands]
        if any(not r.skipped for r in results):
            self._on_change()
        return results

    def _one(self, command: NetCommand) -> CommandResult:
        now = self._clock()
        known = self._unsupported.get(command.args)
        if known is not None and now - known[0] < self.retry_unsupported_s:
            return self._record(CommandResult(command, ok=False, skipped=True, error=f"unsupported here: {known[1]}"))
        if command.original == "record":
            try:
                self.originals.record(*command.original_key, command.original_value)
            except OSError as exc:
                return self._record(CommandResult(
                    command, ok=False, error=f"not run: cannot record the original in the state dir: {exc}"))
        status, output = self._run(self.argv(command), self.timeout_s)
        if status != 0 and command.original == "restore" and any(word in output for word in _NOTHING_TO_UNDO):
            # What the undo would remove is not there (the interface is gone, or its qdisc was replaced since).
            self.originals.forget(*command.original_key)
            return self._record(CommandResult(command, ok=True, skipped=True, error=output.splitlines()[0]))
        if status != 0:
            reason = output.splitlines()[0] if output else f"exit status {status}"
            if any(word in output for word in _UNSUPPORTED):
                self._unsupported[command.args] = (now, reason)
            return self._record(CommandResult(command, ok=False, error=f"exit {status}: {reason}"))
        self._unsupported.pop(command.args, None)
        if command.original == "restore":
            self.originals.forget(*command.original_key)
        return self._record(CommandResult(command, ok=True))

    def _record(self, result: CommandResult) -> CommandResult:
        c = result.command
        self.store.audit.record_write(WriteRecord(
            ts=self.store.clock(), path="tc " + " ".join(c.args), value="", ok=result.ok, owner=c.owner,
            reason=c.reason, skipped=result.skipped, error=result.error,
        ))
        if not result.ok and not result.skipped:
            log.debug("tc command failed: %s", result.error)
        return result
