"""Before the NRI door answers a CreateContainer with bind mounts, their host sources must exist: runc fails
the container's creation on a bind mount of a missing source ("error mounting /tmp/vgpulock ... no such file
or directory", seen through a real containerd 1.7). So:

* a mount whose host directory a hook asked for (`ContainerMount.create_under`: HAMi-core's vGPU monitor cache
  and its lock directory) gets the directory created; one that cannot be created (a path refused by
  `hookserver.executor.hostdirs`, a read-only or full disk) is left out;
* any other bind mount whose source is not there (the HAMi-core library not installed on this node) is left
  out.

Either way only that mount goes, said in the log: the container is created without it rather than not at all
(fail open). When every mount is kept the same tuple comes back, so the encoded reply stays memoized by
identity.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from hookserver.errors import ExecutorError
from hookserver.executor.hostdirs import ensure_host_dir
from hookserver.hooks.outcome import ContainerMount

__all__ = ["prepare_mounts"]

log = logging.getLogger(__name__)


def prepare_mounts(
    mounts: tuple[ContainerMount, ...],
    *,
    ensure: Callable[..., None] = ensure_host_dir,
    exists: Callable[[str], bool] = os.path.exists,
) -> tuple[ContainerMount, ...]:
    """`mounts`, their host directories created where asked; a bind mount whose source is missing (or whose
    directory could not be created) is left out."""
    if not mounts:
        return mounts
    kept: list[ContainerMount] = []
    for m in mounts:
        if m.create_under:
            try:
                ensure(m.source, under=m.create_under)
            except ExecutorError as exc:
                log.warning("nri: bind mount %s -> %s left out: %s", m.source, m.destination, exc)
                continue
        elif m.type == "bind" and not exists(m.source):
            log.warning("nri: bind mount %s -> %s left out: the source does not exist on this node "
                        "(the container would fail to start)", m.source, m.destination)
            continue
        kept.append(m)
    return mounts if len(kept) == len(mounts) else tuple(kept)
