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

A source found (or made) is taken as there for `CONFIRMED_FOR_S` (1 s) before it is looked at again: the same
few host paths (the library, the lock directory) come with every HAMi-core container, and the six system calls
of creating-or-confirming a directory were most of what injection added to a CreateContainer (26 us of 42 at
the p50, measured in `make bench`). A path removed by hand inside that second costs that container its start
(runc's error) once; the next look puts it back.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from hookserver.errors import ExecutorError
from hookserver.executor.hostdirs import ensure_host_dir
from hookserver.hooks.outcome import ContainerMount

__all__ = ["CONFIRMED_FOR_S", "forget_confirmed", "prepare_mounts"]

log = logging.getLogger(__name__)

CONFIRMED_FOR_S = 1.0
_MAX_CONFIRMED = 4096  # per-container cache directories are each seen once: the table is cleared past this
_confirmed: dict[tuple[str, str], float] = {}  # (create_under or "", source) -> when it was last found there


def prepare_mounts(
    mounts: tuple[ContainerMount, ...],
    *,
    ensure: Callable[..., None] = ensure_host_dir,
    exists: Callable[[str], bool] = os.path.exists,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ContainerMount, ...]:
    """`mounts`, their host directories created where asked; a bind mount whose source is missing (or whose
    directory could not be created) is left out."""
    if not mounts:
        return mounts
    now = clock()
    kept: list[ContainerMount] = []
    for m in mounts:
        key = (m.create_under, m.source)
        seen = _confirmed.get(key)
        if seen is not None and now - seen < CONFIRMED_FOR_S:
            kept.append(m)
            continue
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
        if len(_confirmed) >= _MAX_CONFIRMED:
            _confirmed.clear()
        _confirmed[key] = now
        kept.append(m)
    return mounts if len(kept) == len(mounts) else tuple(kept)


def forget_confirmed() -> None:
    """Look at every source again on the next call (tests; a long-lived process never needs it)."""
    _confirmed.clear()
