"""Small, safe readers for /proc, /sys and cgroup files.

Callers build the absolute path from `SystemRoots` (`roots.proc_path(...)`, `roots.cgroup_path(...)`) so tests
can point every read at a fixture tree. A file that is gone (the pod or process went away between listing and
reading) is a normal event on a node, so it reads as `None` / `{}` instead of raising; a file whose content does
not parse raises `SystemFileError` naming the file and the text, so bad data is never silently turned into 0.
"""

from __future__ import annotations

import errno
import logging
import os

from hookserver.errors import SystemFileError

__all__ = ["MAX_READ_BYTES", "exists", "is_dir", "read_int", "read_kv", "read_text", "subdirs"]

logger = logging.getLogger(__name__)

# Cgroup and proc files we read are small; the cap stops a mis-pointed root (a device, a huge file) from
# costing memory on the collector's loop.
MAX_READ_BYTES = 1 << 20

# errnos that mean "not there (any more)": the pod, process or controller went away, or the kernel lacks it.
_GONE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ESRCH})
_CHUNK = 1 << 16


def read_text(path: str, *, max_bytes: int = MAX_READ_BYTES) -> str | None:
    """The file's text, or None when it (or its directory) does not exist.

    Unbuffered `os.open`/`os.read` in 64 KiB chunks: the collectors read thousands of these small kernel
    files a second, and a buffered `open().read(n)` costs about five times as much (it also allocates `n`
    bytes up front). Other OS errors (EACCES, EIO...) raise `SystemFileError` with the path: those mean
    something is misconfigured and should be seen, not turned into a missing sample.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise _read_error(path, exc) from exc
    try:
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise SystemFileError(f"{path} is larger than {max_bytes} bytes", path=path)
            if len(chunk) < _CHUNK:
                break  # cgroup, proc and sysfs files hand over everything they have in one short read
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise _read_error(path, exc) from exc
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _read_error(path: str, exc: OSError) -> SystemFileError:
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return SystemFileError(f"cannot read {path}: {name} ({exc.strerror})", path=path)


def read_int(path: str) -> int | None:
    """The single integer a file holds (`cpu.shares`, `memory.usage_in_bytes`), or None when missing.

    Content that is not one integer (for example v2's `max`) raises `SystemFileError`; use `read_text` for
    files that may hold a keyword.
    """
    text = read_text(path)
    if text is None:
        return None
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError as exc:
        raise SystemFileError(f"{path}: expected an integer, got {stripped[:64]!r}", path=path) from exc


def read_kv(path: str) -> dict[str, int]:
    """`key value` lines (`memory.stat`, `cpu.stat`, `/proc/vmstat`) as a dict; {} when the file is missing.

    A trailing ':' on the key is dropped (`/proc/meminfo` style; the unit after the value is ignored).
    Lines whose value is not an integer are skipped and logged at DEBUG: kernels add fields, and one odd
    line must not cost every other sample.
    """
    text = read_text(path)
    if text is None:
        return {}
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2:
            logger.debug("%s:%d: no value in %r", path, lineno, line)
            continue
        try:
            out[parts[0].rstrip(":")] = int(parts[1])
        except ValueError:
            logger.debug("%s:%d: value is not an integer in %r", path, lineno, line)
    return out


def exists(path: str) -> bool:
    """Whether a path exists (follows symlinks). Here so callers never need `os` for system paths."""
    return os.path.exists(path)


def is_dir(path: str) -> bool:
    """Whether a path is a directory (follows symlinks)."""
    return os.path.isdir(path)


def subdirs(path: str) -> list[str] | None:
    """The names of the directories in `path` (a cgroup's children), sorted; None when `path` is not a readable
    directory (a cgroup that is gone)."""
    try:
        with os.scandir(path) as entries:
            return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        return None
