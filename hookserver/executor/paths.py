"""Resolving plan directories to absolute paths that cannot leave their hierarchy root.

Python has no openat2(RESOLVE_BENEATH), so this emulates it: names are normalized (`..` and NUL refused by
`naming.normalize_cgroup_dir`), the directory is resolved with realpath (symlinks followed) and must still
lie under the realpath of its hierarchy root, the file itself must not be a symlink, and the writer opens it
with O_NOFOLLOW. A swap of a directory for a symlink between this check and the open is the remaining race;
cgroupfs itself does not allow symlinks, so that needs a fixture tree or a hostile bind mount.
"""

from __future__ import annotations

import os

from hookserver.errors import PathEscapeError
from hookserver.system.cgroupnames import normalize_cgroup_dir

__all__ = ["contained", "real_dir", "resolve_dir", "resolve_file"]


def contained(path: str, root: str) -> bool:
    """Whether `path` equals `root` or lies beneath it (both already real, absolute paths)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)


def real_dir(path: str) -> str:
    """Where `path` really leads, symlinks followed.

    An existing directory is opened (O_PATH) and the kernel's own answer read from /proc/self/fd: three
    syscalls instead of an lstat per component. A missing directory (or no /proc) falls back to realpath,
    which resolves the existing prefix; the missing rest has no '..' and so cannot climb.
    """
    try:
        fd = os.open(path, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return os.path.realpath(path)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)


def resolve_dir(real_root: str, cgroup_dir: str) -> str:
    """The real absolute directory for `cgroup_dir` under `real_root` (itself a realpath).

    Raises PathEscapeError for `..`, NUL, or a symlink that leads outside the root.
    """
    rel = normalize_cgroup_dir(cgroup_dir)
    candidate = os.path.join(real_root, rel) if rel else real_root
    real = real_dir(candidate)
    if not contained(real, real_root):
        raise PathEscapeError(
            f"cgroup dir {cgroup_dir!r} resolves to {real!r}, outside the cgroup root {real_root!r}",
            path=real, value=cgroup_dir,
        )
    return real


def resolve_file(real_dir: str, name: str) -> str:
    """`real_dir/name`, refusing a symlinked file (cgroupfs has none; a fixture or bind mount might)."""
    if "/" in name or name in ("", ".", ".."):
        raise PathEscapeError(f"cgroup file name {name!r} is not a single component", value=name)
    path = os.path.join(real_dir, name)
    if os.path.islink(path):
        raise PathEscapeError(f"cgroup file {path!r} is a symlink", path=path)
    return path
