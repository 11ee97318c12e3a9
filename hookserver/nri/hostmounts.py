"""Before the NRI door answers a CreateContainer with a bind mount whose host directory a hook asked for
(`ContainerMount.create_under`, HAMi-core's vGPU monitor cache), the directory is created: a bind mount of a
missing source fails the container's creation in the runtime. A directory that cannot be created (a path
refused by `hookserver.executor.hostdirs`, a read-only or full disk) drops that mount only, said in the log:
the container is created without the monitor's directory rather than not at all (fail open). Mounts without
the flag pass through untouched (the same tuple, so the encoded reply stays memoized by identity).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hookserver.errors import ExecutorError
from hookserver.executor.hostdirs import ensure_host_dir
from hookserver.hooks.outcome import ContainerMount

__all__ = ["prepare_mounts"]

log = logging.getLogger(__name__)


def prepare_mounts(
    mounts: tuple[ContainerMount, ...], *, ensure: Callable[..., None] = ensure_host_dir
) -> tuple[ContainerMount, ...]:
    """`mounts`, their host directories created where asked; a mount whose directory failed is left out."""
    if not any(m.create_under for m in mounts):
        return mounts
    kept: list[ContainerMount] = []
    for m in mounts:
        if m.create_under:
            try:
                ensure(m.source, under=m.create_under)
            except ExecutorError as exc:
                log.warning("nri: bind mount %s -> %s left out: %s", m.source, m.destination, exc)
                continue
        kept.append(m)
    return tuple(kept)
