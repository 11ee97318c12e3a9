"""Standalone eviction by force (`--evict-standalone=kill`): freeze the pod's cgroup, SIGKILL every
process in it and its children, thaw. Without an apiserver there is no Eviction API; this is what the
kubelet's eviction would end in, minus the grace period. Every step is written to the audit.

Freezing first means no process can fork a replacement between the listing and the kill. v1 uses the
`freezer` hierarchy (`freezer.state` FROZEN/THAWED); v2 `cgroup.freeze`, and `cgroup.kill` when the
kernel has it (5.14+), which kills the whole subtree in one write. A killed task that is frozen dies when
thawed, so the thaw always runs, even after a failure.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

from hookserver.errors import ExecutorError, HookServerError
from hookserver.eviction import EvictionRequest, EvictionResult, EvictionStatus
from hookserver.executor.fileio import CgroupFiles, OsCgroupFiles, translate_os_error
from hookserver.executor.layout import CgroupLayout
from hookserver.executor.paths import real_dir, resolve_dir, resolve_file
from hookserver.store.audit import WriteRecord
from hookserver.store.state import StateStore

__all__ = ["CgroupKiller"]

log = logging.getLogger(__name__)

_FREEZE_WAIT_S = 1.0
_OWNER = "qos:evict-standalone"


class CgroupKiller:
    """Implements `hookserver.eviction.EvictionBackend` by killing the processes of the pod's cgroups."""

    kind = "kill"

    def __init__(
        self,
        layout: CgroupLayout,
        *,
        store: StateStore,
        files: CgroupFiles | None = None,
        kill: Callable[[int, int], None] = os.kill,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.layout = layout
        self.store = store
        self._files = files or OsCgroupFiles()
        self._kill = kill
        self._sleep = sleep

    def evict(self, request: EvictionRequest) -> EvictionResult:
        if not request.cgroup_dirs:
            return EvictionResult(request, EvictionStatus.FAILED, error="no cgroup directory known for the pod")
        try:
            killed, notes = self._kill_pod(request)
        except HookServerError as exc:
            return EvictionResult(request, EvictionStatus.FAILED, error=str(exc))
        if killed is None:
            return EvictionResult(request, EvictionStatus.NOT_FOUND, detail="; ".join(notes) or "cgroup gone")
        return EvictionResult(request, EvictionStatus.KILLED, detail=f"SIGKILL to {killed} process(es); " + "; ".join(notes))

    # -- steps ------------------------------------------------------------------------------------
    def _dir(self, subsystem: str, rel: str) -> str:
        return resolve_dir(real_dir(self.layout.hierarchy_root(subsystem)), rel)

    def _kill_pod(self, request: EvictionRequest) -> tuple[int | None, list[str]]:
        rel = request.cgroup_dirs[0]
        v2 = self.layout.writes_v2
        freezer = self._dir("freezer" if not v2 else "cpu", rel)
        procs_root = self._dir("cpu" if v2 else "freezer", rel)
        if not os.path.isdir(procs_root):
            procs_root = self._dir("cpu", rel)
        if not os.path.isdir(freezer) and not os.path.isdir(procs_root):
            return None, [f"cgroup {rel} does not exist"]
        notes: list[str] = []
        reason = f"{request.reason}: {request.message}"
        frozen = False
        try:
            if os.path.isdir(freezer):
                frozen = self._freeze(freezer, v2, reason, notes)
            if v2 and os.path.exists(os.path.join(procs_root, "cgroup.kill")):
                self._write(resolve_file(procs_root, "cgroup.kill"), "1", reason)
                notes.append("cgroup.kill")
                pids = _pids(procs_root)
                return len(pids), notes
            pids = _pids(procs_root)
            killed = 0
            for pid in pids:
                try:
                    self._kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    continue
                except OSError as exc:
                    notes.append(f"kill {pid}: {exc.strerror}")
            return killed, notes
        finally:
            if frozen:
                self._thaw(freezer, v2, reason)

    def _freeze(self, directory: str, v2: bool, reason: str, notes: list[str]) -> bool:
        name, value = ("cgroup.freeze", "1") if v2 else ("freezer.state", "FROZEN")
        path = resolve_file(directory, name)
        if not os.path.exists(path):
            notes.append(f"no {name}: killed without freezing")
            return False
        self._write(path, value, reason)
        deadline = time.monotonic() + _FREEZE_WAIT_S
        state_file = resolve_file(directory, "cgroup.events" if v2 else "freezer.state")
        while time.monotonic() < deadline:
            state = self._read(state_file)
            if (v2 and "frozen 1" in state) or (not v2 and state.strip() == "FROZEN"):
                notes.append("frozen")
                return True
            self._sleep(0.01)
        notes.append("freeze did not complete within 1s: killing anyway")
        return True

    def _thaw(self, directory: str, v2: bool, reason: str) -> None:
        name, value = ("cgroup.freeze", "0") if v2 else ("freezer.state", "THAWED")
        try:
            self._write(resolve_file(directory, name), value, reason)
        except ExecutorError as exc:
            log.warning("thaw of %s failed: %s", directory, exc)

    def _read(self, path: str) -> str:
        try:
            return self._files.read(path)
        except OSError:
            return ""

    def _write(self, path: str, value: str, reason: str) -> None:
        ok, error = True, ""
        try:
            self._files.write(path, value)
        except OSError as exc:
            ok, error = False, str(translate_os_error(exc, op="write", path=path, value=value))
        self.store.audit.record_write(WriteRecord(
            ts=self.store.clock(), path=path, value=value, ok=ok, owner=_OWNER, reason=reason, error=error,
        ))
        if not ok:
            raise ExecutorError(error, path=path, value=value)


def _pids(directory: str) -> list[int]:
    """Every PID in `directory` and its descendants (cgroup.procs), deepest first."""
    out: list[int] = []
    for root, _dirs, files in os.walk(directory, topdown=False):
        if "cgroup.procs" not in files:
            continue
        try:
            with open(os.path.join(root, "cgroup.procs"), encoding="ascii") as handle:
                out.extend(int(line) for line in handle if line.strip().isdigit())
        except OSError:
            continue
    return out
