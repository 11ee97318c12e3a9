"""Host directories a new container's bind mount needs before the runtime mounts it.

HAMi-core's vGPU monitor (`HamiCoreVGPUMonitor`) bind-mounts a per-container host directory
(`<library dir>/containers/<pod uid>_<container>`) over the library's directory, so the shared cache file
HAMi-core writes in the container lands where the node's monitor reads it. koordlet creates that directory
inside its hook (remove, create, chmod 0777: every user in the container must be able to write the cache);
a bind mount of a missing source fails the container's creation, so the NRI door creates it here, after the
hooks decided and before it answers. Unlike koordlet this never removes an existing directory: the path is
derived from a request, and a recursive delete driven by a request is not worth a fresher cache file (HAMi-core
re-initialises a cache whose processes are gone).

Every path is checked before anything is created: it must be absolute, without `..`, one component directly
under `under`, and `under` must resolve (symlinks followed) to itself, so the mkdir cannot pass through a link;
a final component that already exists as a symlink is refused before its mode is touched. Errors are
`ExecutorError`s naming the path.
"""

from __future__ import annotations

import os
import posixpath

from hookserver.errors import ExecutorError, PathEscapeError

__all__ = ["ensure_host_dir"]


def ensure_host_dir(path: str, *, under: str, mode: int = 0o777) -> None:
    """Create directory `path` (and missing parents up to `under`) with `mode`; an existing one gets `mode`."""
    if not path.startswith("/") or not under.startswith("/") or "\x00" in path:
        raise PathEscapeError(f"host directory {path!r} is not an absolute path", path=path)
    if ".." in path.split("/") or posixpath.normpath(path) != path.rstrip("/"):
        raise PathEscapeError(f"host directory {path!r} is not a normalised path", path=path)
    root = posixpath.normpath(under)
    path = path.rstrip("/")
    if posixpath.dirname(path) != root:
        raise PathEscapeError(f"host directory {path!r} is not directly under {root}", path=path)
    try:
        os.makedirs(root, mode=0o755, exist_ok=True)
        if os.path.realpath(root) != root:
            raise PathEscapeError(f"{root} resolves to {os.path.realpath(root)!r} (a symlink)", path=path)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        if os.path.islink(path) or not os.path.isdir(path):
            raise PathEscapeError(f"host directory {path!r} exists and is not a directory", path=path)
        os.chmod(path, mode)  # mkdir's mode is masked by the umask; 0777 is the point
    except OSError as exc:
        raise ExecutorError(f"cannot create host directory {path}: {exc.strerror or exc}", path=path) from exc
