"""Writes to node files that are not cgroups: sysctls under `/proc/sys`, the resctrl filesystem and
per-process files under `/proc/<pid>` (oom_score_adj).

The cgroup executor's rules, for two more roots: every path is relative to a configured root and must stay
beneath it (no `..`, no symlinked file, O_NOFOLLOW), each write is read-before-write (a file that already
holds the value is not rewritten), every attempt is audited, and a failed file is reported, never raised.

Originals: a write marked `original="record"` first saves what the file holds in `NodeOriginals` (the state
dir), once, before the node changes; if that save fails the write is not made (we would not know how to
undo it). `original="restore"` forgets the saved value once the write went through. `mkdir` of a resctrl
group records the group as created, `rmdir` forgets it.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hookserver.executor.plan import FileWrite
from hookserver.store.audit import WriteRecord
from hookserver.store.originals import NodeOriginals
from hookserver.store.state import StateStore
from hookserver.system.resctrl import schemata_holds

__all__ = ["FileResult", "SystemFileExecutor"]

log = logging.getLogger(__name__)

_READ_MAX = 1 << 16
# A per-process file ("proc" root) of a process that exited: ENOENT at open, ESRCH once its task is reaped.
_PROCESS_GONE = (errno.ENOENT, errno.ESRCH)


@dataclass(frozen=True, slots=True)
class FileResult:
    write: FileWrite
    path: str
    ok: bool
    skipped: bool = False
    error: str = ""
    previous: str = ""
    errno: int = 0


def _holds(compare: str, current: str, value: str) -> bool:
    if compare == "always":
        return False
    if compare == "int":
        try:
            return int(current.split()[0]) == int(value)
        except (ValueError, IndexError):
            return False
    if compare == "schemata":
        return schemata_holds(current, value)
    return current.strip() == value.strip()


class SystemFileExecutor:
    """`apply(writes)` in order; `roots` maps "proc_sys", "sys", "resctrl" and "proc" to absolute directories."""

    def __init__(
        self, roots: Mapping[str, str], *, store: StateStore, originals: NodeOriginals,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.roots = dict(roots)
        self.store = store
        self.originals = originals
        self._clock = clock or store.clock

    def resolve(self, write: FileWrite) -> str:
        """The absolute path, refusing `..`, absolute paths and anything that resolves outside the root."""
        root = self.roots.get(write.root)
        if not root:
            raise ValueError(f"no {write.root} root configured")
        if write.path.startswith("/"):
            raise ValueError(f"path {write.path!r} must be relative to the {write.root} root")
        parts = write.path.rstrip("/").split("/")
        if not write.path.strip("/") or any(p in ("", ".", "..") or "\x00" in p for p in parts):
            raise ValueError(f"path {write.path!r} is not a plain relative path")
        real_root = os.path.realpath(root)
        path = os.path.join(real_root, *parts)
        parent = os.path.realpath(os.path.dirname(path))
        if parent != real_root and not parent.startswith(real_root.rstrip("/") + "/"):
            raise ValueError(f"{write.path!r} resolves outside {real_root}")
        if os.path.islink(path):
            raise ValueError(f"{path} is a symlink")
        return path

    def apply(self, writes: Sequence[FileWrite]) -> list[FileResult]:
        return [self._one(w) for w in writes]

    def _one(self, write: FileWrite) -> FileResult:
        try:
            path = self.resolve(write)
        except ValueError as exc:
            return self._record(FileResult(write, write.path, ok=False, error=f"refused: {exc}"))
        if write.op == "mkdir":
            return self._record(self._mkdir(write, path))
        if write.op == "rmdir":
            return self._record(self._rmdir(write, path))
        try:
            current = _read(path)
        except OSError as exc:
            if write.root == "proc" and exc.errno in _PROCESS_GONE:
                return self._record(FileResult(write, path, ok=True, skipped=True, error="process exited"))
            return self._record(FileResult(write, path, ok=False, error=_os_error("read", path, exc), errno=exc.errno or 0))
        previous = current.strip()
        if _holds(write.compare, current, write.value):
            if write.original == "restore":
                self.originals.forget(*write.original_key)
            return self._record(FileResult(write, path, ok=True, skipped=True, previous=previous))
        if write.original == "record":
            try:
                self.originals.record(write.original_key[0], write.original_key[1], previous)
            except OSError as exc:
                return self._record(FileResult(
                    write, path, ok=False, previous=previous,
                    error=f"not written: cannot record the original in the state dir: {exc}",
                ))
        try:
            _write(path, write.value)
        except OSError as exc:
            if write.root == "proc" and exc.errno in _PROCESS_GONE:
                # The process exited between the read and the write: nothing left to change.
                return self._record(FileResult(write, path, ok=True, skipped=True, previous=previous,
                                               error="process exited"))
            if exc.errno == errno.ESRCH and os.path.basename(path) == "tasks":
                # The task exited between the read and the write: nothing to move.
                return self._record(FileResult(write, path, ok=True, skipped=True, previous=previous,
                                               error="task exited (ESRCH)"))
            return self._record(FileResult(
                write, path, ok=False, previous=previous, error=_os_error("write", path, exc, write.value),
                errno=exc.errno or 0,
            ))
        if write.original == "restore":
            self.originals.forget(*write.original_key)
        return self._record(FileResult(write, path, ok=True, previous=previous))

    def _mkdir(self, write: FileWrite, path: str) -> FileResult:
        if os.path.isdir(path):
            return FileResult(write, path, ok=True, skipped=True)
        try:
            if write.original == "record":
                self.originals.record(*write.original_key, "created")
            os.mkdir(path)
        except OSError as exc:
            return FileResult(write, path, ok=False, error=_os_error("mkdir", path, exc), errno=exc.errno or 0)
        return FileResult(write, path, ok=True)

    def _rmdir(self, write: FileWrite, path: str) -> FileResult:
        if not os.path.isdir(path):
            if write.original == "restore":
                self.originals.forget(*write.original_key)
            return FileResult(write, path, ok=True, skipped=True)
        try:
            os.rmdir(path)
        except OSError as exc:
            return FileResult(write, path, ok=False, error=_os_error("rmdir", path, exc), errno=exc.errno or 0)
        if write.original == "restore":
            self.originals.forget(*write.original_key)
        return FileResult(write, path, ok=True)

    def _record(self, result: FileResult) -> FileResult:
        w = result.write
        shown = w.value if w.op == "write" else w.op
        self.store.audit.record_write(WriteRecord(
            ts=self._clock(), path=result.path, value=shown, ok=result.ok, owner=w.owner, reason=w.reason,
            previous=result.previous, skipped=result.skipped, error=result.error,
        ))
        if not result.ok:
            log.debug("system file write failed: %s", result.error)
        return result


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.read(fd, _READ_MAX).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _write(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def _os_error(op: str, path: str, exc: OSError, value: str = "") -> str:
    name = errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    target = f"{path}={value!r}" if value else path
    return f"{op} {target}: {name}: {exc.strerror or exc}"
