"""Kept-open file descriptors for the cgroup stat files the collectors re-read every cycle.

A 1 s cycle on a 500-pod node reads ~3000 small kernel files. `open` + `read` + `close` is three system
calls and a path walk each time; a descriptor kept open and re-read with `os.pread(fd, n, 0)` is one
(cgroup and proc files regenerate their content on every read at offset 0). What keeps that correct:

* a cgroup that is removed makes reads of its open files fail with ENODEV (kernfs), ESTALE or ENOENT:
  the descriptor is closed and the path opened afresh once, so a directory recreated under the same name
  is read from its new files, and one that is gone reads as None, as `files.read_text` does; the other
  kept files of a directory found gone are closed at once (a removed cgroup must not be held open). A file on an
  ordinary filesystem (a fixture tree) stays readable after it is deleted, so there each read also checks
  the link count (`fstat`): 0 means deleted, handled like ENODEV. Paths under `kernel_prefixes` (cgroup
  mounts, where ENODEV is reliable) skip that check;
* every `sweep_every` cycles, descriptors not read for `idle_cycles` cycles are closed (the pod ended, the
  target list moved on), and the rest outside `kernel_prefixes` are checked against the path's current
  inode: a file replaced under the same name (a recreated directory on a filesystem that does not report
  ENODEV) is reopened. Kernel files skip that `stat`: a removed cgroup's descriptors read ENODEV from the
  moment it goes, recreated or not (tests/system: a real v1 cgroup removed and recreated between two
  reads), and stat-ing 3000 cgroup files cost ~25 ms every sweep on a 500-pod node;
* at most `max_open` descriptors are kept (sized from RLIMIT_NOFILE by the caller); beyond that, paths
  are read the old way, open-read-close, so the agent never runs out of descriptors for its sockets.

Not thread-safe: one owner (the collectors' single worker thread).
"""

from __future__ import annotations

import errno
import os
import resource

from hookserver.errors import SystemFileError
from hookserver.system.files import MAX_READ_BYTES, read_text

__all__ = ["OpenFiles", "default_max_open"]

# "Not there (any more)": the cgroup or its controller went away.
_GONE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ESRCH, errno.ESTALE})
_CHUNK = 1 << 16


def default_max_open(share: float = 0.5, cap: int = 16384) -> int:
    """A share of the soft RLIMIT_NOFILE (the rest stays for sockets and everything else), at most `cap`."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(0, min(cap, int(soft * share) - 64))


class _Entry:
    __slots__ = ("check_links", "dev", "fd", "ino", "used")

    def __init__(self, fd: int, dev: int, ino: int, used: int, check_links: bool) -> None:
        self.fd = fd
        self.dev = dev
        self.ino = ino
        self.used = used
        self.check_links = check_links


class OpenFiles:
    def __init__(
        self, *, max_open: int = 4096, sweep_every: int = 10, idle_cycles: int = 3, kernel_prefixes: tuple[str, ...] = ()
    ) -> None:
        self.max_open = max_open
        self.kernel_prefixes = tuple(p.rstrip("/") + "/" for p in kernel_prefixes)
        self.sweep_every = max(1, sweep_every)
        self.idle_cycles = max(1, idle_cycles)
        self._entries: dict[str, _Entry] = {}
        self._by_dir: dict[str, set[str]] = {}
        self._cycle = 0
        self.opened = 0
        self.reopened = 0
        self.closed_idle = 0
        self.uncached_reads = 0

    def __len__(self) -> int:
        return len(self._entries)

    def read(self, path: str) -> str | None:
        """The file's text, or None when it (or its cgroup) is gone. Other errors raise SystemFileError."""
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    def read_bytes(self, path: str) -> bytes | None:
        """`read` without the decode: the per-cycle parsers (`int(b"12")`, regexes) work on bytes."""
        entry = self._entries.get(path)
        if entry is None:
            if len(self._entries) >= self.max_open:
                self.uncached_reads += 1
                text = read_text(path)
                return None if text is None else text.encode("utf-8", errors="replace")
            entry = self._open(path)
            if entry is None:
                return None
        entry.used = self._cycle
        try:
            if entry.check_links and os.fstat(entry.fd).st_nlink == 0:
                raise OSError(errno.ENODEV, "deleted")
            data = os.pread(entry.fd, _CHUNK, 0)
            if len(data) == _CHUNK:
                data = self._read_rest(entry.fd, data, path)
        except OSError as exc:
            self._drop(path)
            if exc.errno not in _GONE and exc.errno != errno.EBADF:
                raise _error(path, exc) from exc
            # Removed (and maybe recreated) under us: one fresh open decides which.
            self.reopened += 1
            entry = self._open(path)
            if entry is None:
                self._drop_dir(path)
                return None
            try:
                data = os.pread(entry.fd, _CHUNK, 0)
            except OSError as again:
                self._drop(path)
                if again.errno in _GONE:
                    return None
                raise _error(path, again) from again
        return data

    def new_cycle(self) -> None:
        """Call once per collect cycle: every `sweep_every` cycles, idle and replaced files are closed."""
        self._cycle += 1
        if self._cycle % self.sweep_every == 0:
            self.sweep()

    def sweep(self) -> None:
        oldest = self._cycle - self.idle_cycles
        for path, entry in list(self._entries.items()):
            if entry.used < oldest:
                self._drop(path)
                self.closed_idle += 1
                continue
            if not entry.check_links:
                continue  # a kernel file: ENODEV on read already catches a removed (or recreated) cgroup
            try:
                st = os.stat(path)
            except OSError:
                self._drop(path)
                continue
            if st.st_ino != entry.ino or st.st_dev != entry.dev:
                self._drop(path)  # replaced under the same name: the next read opens the new file

    def close(self) -> None:
        for path in list(self._entries):
            self._drop(path)

    def __del__(self) -> None:
        # A reader dropped without close() (tests, a rebuilt scheduler) must not leak its descriptors.
        self.close()

    # -- internals -------------------------------------------------------------------------------------
    def _open(self, path: str) -> _Entry | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in _GONE:
                return None
            raise _error(path, exc) from exc
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _GONE:
                return None
            raise _error(path, exc) from exc
        check = not path.startswith(self.kernel_prefixes) if self.kernel_prefixes else True
        entry = self._entries[path] = _Entry(fd, st.st_dev, st.st_ino, self._cycle, check)
        self._by_dir.setdefault(os.path.dirname(path), set()).add(path)
        self.opened += 1
        return entry

    def _read_rest(self, fd: int, first: bytes, path: str) -> bytes:
        parts = [first]
        size = len(first)
        while True:
            more = os.pread(fd, _CHUNK, size)
            if not more:
                break
            parts.append(more)
            size += len(more)
            if size > MAX_READ_BYTES:
                raise SystemFileError(f"{path} is larger than {MAX_READ_BYTES} bytes", path=path)
        return b"".join(parts)

    def _drop(self, path: str) -> None:
        entry = self._entries.pop(path, None)
        if entry is not None:
            directory = os.path.dirname(path)
            siblings = self._by_dir.get(directory)
            if siblings is not None:
                siblings.discard(path)
                if not siblings:
                    del self._by_dir[directory]
            try:
                os.close(entry.fd)
            except OSError:
                pass  # already invalid (EBADF): nothing left to release

    def _drop_dir(self, path: str) -> None:
        """`path` is gone: so is every other kept file of its directory."""
        for sibling in list(self._by_dir.get(os.path.dirname(path), ())):
            self._drop(sibling)


def _error(path: str, exc: OSError) -> SystemFileError:
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return SystemFileError(f"cannot read {path}: {name} ({exc.strerror})", path=path)
