"""The only code that opens cgroup files for writing, and the one map from OSError to executor errors.

Files are opened with O_NOFOLLOW (no symlinked file is ever followed) and without O_CREAT (a missing file
means the kernel or cgroup version lacks it). Each errno we expect maps to the most specific `ExecutorError`,
and every message names the errno, the file and the value; `ERRNO_MAP` is checked complete by a test.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

from hookserver.errors import CgroupNotFoundError, ExecutorError, PathEscapeError, UnsupportedResourceError

__all__ = ["ERRNO_MAP", "CgroupFiles", "OsCgroupFiles", "translate_os_error"]

_READ_MAX = 1 << 16

# ENOENT is special: the directory missing is CgroupNotFoundError, the file missing UnsupportedResourceError.
ERRNO_MAP: Mapping[int, type[ExecutorError]] = MappingProxyType(
    {
        errno.ENOENT: UnsupportedResourceError,
        errno.ENOTDIR: CgroupNotFoundError,
        errno.ENODEV: CgroupNotFoundError,  # the cgroup is being removed
        errno.ELOOP: PathEscapeError,  # O_NOFOLLOW met a symlink
        errno.EOPNOTSUPP: UnsupportedResourceError,
        errno.ENOTSUP: UnsupportedResourceError,
        errno.EISDIR: UnsupportedResourceError,
        errno.EINVAL: ExecutorError,  # value out of range / parent constraint
        errno.EBUSY: ExecutorError,  # memory usage above the new limit
        errno.EPERM: ExecutorError,
        errno.EACCES: ExecutorError,
        errno.EROFS: ExecutorError,
        errno.ENOSPC: ExecutorError,  # cpuset without cpus/mems, pids
        errno.ERANGE: ExecutorError,
        errno.EIO: ExecutorError,
        errno.EAGAIN: ExecutorError,
        errno.EINTR: ExecutorError,
    }
)

_HINTS: Mapping[int, str] = MappingProxyType(
    {
        errno.EINVAL: "the kernel refused the value (range, or a parent's limit is lower)",
        errno.EBUSY: "the kernel could not reclaim below the new limit (usage too high); not retried",
        errno.ENOTDIR: "a path component is not a directory",
        errno.ENODEV: "the cgroup is being removed",
        errno.ELOOP: "the file is a symlink",
        errno.EACCES: "permission denied (v1 cpuset: the value is not a subset of the parent's)",
        errno.ENOSPC: "no space (a cpuset cgroup with tasks cannot be left without cpus or mems)",
    }
)


class CgroupFiles(Protocol):
    """Reads and writes one cgroup file. Raises OSError; the executor translates it once."""

    def read(self, path: str) -> str: ...

    def write(self, path: str, data: str) -> None: ...


class OsCgroupFiles:
    """The real files: one open, one read or write, close. No buffering, no creation, no symlinks."""

    def read(self, path: str) -> str:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            return os.read(fd, _READ_MAX).decode("utf-8", errors="replace")
        finally:
            os.close(fd)

    def write(self, path: str, data: str) -> None:
        # O_TRUNC matters for fixture trees (plain files); cgroupfs ignores it, as with runc's WriteFile.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)


def translate_os_error(exc: OSError, *, op: str, path: str, value: str = "") -> ExecutorError:
    """The ExecutorError for an OSError on `path` (`op` is "read" or "write"); the caller raises it from exc."""
    code = exc.errno or 0
    name = errno.errorcode.get(code, f"errno {code}")
    cls = ERRNO_MAP.get(code, ExecutorError)
    if code == errno.ENOENT:
        cls = UnsupportedResourceError if os.path.isdir(os.path.dirname(path)) else CgroupNotFoundError
    what = {
        CgroupNotFoundError: "cgroup directory does not exist",
        UnsupportedResourceError: "file not supported here",
    }.get(cls, _HINTS.get(code, exc.strerror or "failed"))
    target = f"{path}={value!r}" if op == "write" else path
    return cls(f"{op} {target}: {name}: {what}", path=path, value=value)
