"""A warm heap for the NRI Synchronize's large, short-lived buffers.

A sync chunk is one ttrpc message of up to 4 MiB (2.7 MB at 500 pods). It arrives in pieces of up to
256 KiB, is joined into one buffer, and is decoded into a protobuf arena of about its own size; all of it
is freed once the chunk is answered. glibc serves an allocation over its mmap threshold (128 KiB until
it adapts) with a fresh `mmap`, and every page of a fresh mapping costs a page fault the first time it is
touched. A plugin that has just connected (the runtime syncs it at once, holding its plugin lock) took
about 2,000 faults for a 500-pod sync before it could decide anything. Measured on the 2-CPU VM through
containerd's NRI library (`bench_nri_go`'s harness, 500 pods, timestamps in the plugin), the last piece to
the whole frame took 1.5 ms and the decode 3.5-4.0 ms; with 16-32 MiB reserved, 0.4 ms and 1.9-2.9 ms, and
the runtime's whole sync 2-4 ms shorter (44.7 -> 40.7-42.3 ms, median of 3, same rounds); 8 MiB measured the
same as 16 at 500 pods (ten syncs), and 16 a little better for 4 MiB chunks (2,500 pods, within the VM's noise).

`reserve_heap` sets glibc's mmap threshold to the reserve's size, so those buffers come from the heap, and
its trim threshold to twice that, so freed heap is kept rather than handed back and faulted in again; then
it touches the reserve once (allocate, fill, free), in the calling thread's arena: the event loop's, which
reads and decodes every frame. glibc adapts its thresholds the same way on its own after the first large
buffer is freed (to that buffer's size, and twice that); this only does it before the first sync, and to
a size set here rather than to whatever came first. The cost is resident memory: the reserve stays
mapped, `hook.heap_reserve_mib` (8; the standalone daemon's RSS at start is 79 MB without it; 0 leaves glibc's
own behaviour). Without glibc (musl) nothing is done, and the status says why.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass

__all__ = ["HeapReserve", "MAX_RESERVE_BYTES", "MIN_RESERVE_BYTES", "reserve_heap"]

log = logging.getLogger(__name__)

# mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc refuses an mmap threshold over HEAP_MAX_SIZE / 2 on 64-bit builds.
MAX_RESERVE_BYTES = 32 << 20
MIN_RESERVE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class HeapReserve:
    """What `reserve_heap` did, for the log and `hookctl status`."""

    reserved_bytes: int  # touched once and kept (0 when not applied)
    mmap_threshold_bytes: int  # allocations below this come from the heap (0: glibc's own, adaptive)
    trim_threshold_bytes: int  # free heap kept up to this before it is handed back (0: glibc's own)
    detail: str  # "" when applied, else why not

    @property
    def applied(self) -> bool:
        return self.reserved_bytes > 0

    def status(self) -> dict[str, object]:
        return {
            "applied": self.applied,
            "reserved_mib": round(self.reserved_bytes / (1 << 20), 1),
            "mmap_threshold_mib": round(self.mmap_threshold_bytes / (1 << 20), 1),
            "trim_threshold_mib": round(self.trim_threshold_bytes / (1 << 20), 1),
            "detail": self.detail,
        }


def _glibc() -> ctypes.CDLL | None:
    """The C library the process already runs on: its own symbols (`CDLL(None)`), else `libc.so.6` by name.
    Never `ctypes.util.find_library`, which runs `ldconfig -p` (and a compiler as a fallback) in a child
    process: a node agent spawns nothing, and the soak's write tracer caught that child's /dev/null."""
    for name in (None, "libc.so.6"):
        try:
            libc = ctypes.CDLL(name)
            libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (and the mallopt parameters used here)
        except (OSError, AttributeError):
            continue
        return libc
    return None


def reserve_heap(size_bytes: int) -> HeapReserve:
    """Keep `size_bytes` of heap warm for large buffers (see the module doc). 0 does nothing."""
    if size_bytes <= 0:
        return HeapReserve(0, 0, 0, "off (hook.heap_reserve_mib is 0)")
    if size_bytes > MAX_RESERVE_BYTES:
        raise ValueError(f"heap reserve {size_bytes} bytes is over glibc's limit of {MAX_RESERVE_BYTES}")
    if size_bytes < MIN_RESERVE_BYTES:
        raise ValueError(f"heap reserve {size_bytes} bytes is under {MIN_RESERVE_BYTES} (1 MiB, the setting's unit)")
    libc = _glibc()
    if libc is None:
        log.info("heap reserve: not glibc, left to the allocator")
        return HeapReserve(0, 0, 0, "not glibc: left to the allocator")
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    trim = 2 * size_bytes
    if not (libc.mallopt(_M_MMAP_THRESHOLD, size_bytes) and libc.mallopt(_M_TRIM_THRESHOLD, trim)):
        log.warning("heap reserve: glibc refused mallopt (mmap threshold %d, trim %d bytes)", size_bytes, trim)
        return HeapReserve(0, 0, 0, "glibc refused mallopt")
    # Below the new mmap threshold, so from the heap; freed at the top, under the trim threshold, so kept.
    block = libc.malloc(size_bytes - 4096)
    if not block:
        return HeapReserve(0, size_bytes, trim, "malloc of the reserve failed")
    try:
        ctypes.memset(block, 0, size_bytes - 4096)
    finally:
        libc.free(block)
    log.info("heap reserve: %d MiB touched and kept for NRI messages (allocations under %d MiB from the heap, "
             "free heap kept up to %d MiB)", size_bytes >> 20, size_bytes >> 20, trim >> 20)
    return HeapReserve(size_bytes, size_bytes, trim, "")
