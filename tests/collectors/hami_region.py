"""Build HAMi-core shared cache files byte for byte, for the hami_vgpu tests and bench.

The layout is written here a second time, on purpose independently of `hookserver.system.hami_cache`: struct
format strings field by field, in the order of HAMi-core's `src/multiprocess/multiprocess_memory_limit.h`
(Project-HAMi/HAMi-core), each size checked against the C compiler's `sizeof` (the tests assert the total,
2 008 952 bytes). Fields the reader does not use are filled with distinct non-zero values, so a reader that
reads the wrong offset gets a wrong number, not a lucky zero.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = 19920718
DEVICES = 16
PROCS = 1024

# shared_region_t up to procs: initialized_flag, major, minor, sm_init_flag, owner_pid (size_t), sem_t (32),
# device_num, uuids[16][96], limit[16], sm_limit[16].
HEADER_FMT = "<iIIiQ32sQ" + f"{DEVICES * 96}s" + f"{DEVICES}Q" + f"{DEVICES}Q"
# shrreg_proc_slot_t: pid, hostpid, used[16] (8 x u64 each), monitorused[16], device_util[16] (6 x u64 each),
# status (int32, then 4 bytes of padding), seqlock, unused[2].
SLOT_FMT = "<ii" + f"{DEVICES * 8}Q" + f"{DEVICES}Q" + f"{DEVICES * 6}Q" + "i4xQ2Q"
# proc_num, utilization_switch, recent_kernel, priority, last_kernel_time, sem_postinit (32).
TAIL_FMT = "<iiiiQ32s"
HEADER_SIZE = struct.calcsize(HEADER_FMT)
SLOT_SIZE = struct.calcsize(SLOT_FMT)
TAIL_OFFSET = HEADER_SIZE + PROCS * SLOT_SIZE
REGION_SIZE = TAIL_OFFSET + struct.calcsize(TAIL_FMT)
GiB = 1 << 30
MiB = 1 << 20


@dataclass
class Proc:
    """One process slot: `used` and `sm` by device index (the container's CUDA index)."""

    pid: int
    used: dict[int, int] = field(default_factory=dict)
    sm: dict[int, int] = field(default_factory=dict)
    status: int = 1
    hostpid: int = 0
    seqlock: int = 0


def pack_region(
    uuids: list[str],
    *,
    limits: list[int] | None = None,
    sm_limits: list[int] | None = None,
    procs: list[Proc] | None = None,
    magic: int = MAGIC,
    major: int = 1,
    minor: int = 2,
    device_num: int | None = None,
    proc_num: int | None = None,
    last_kernel_time: int = 1_700_000_000,
    raw_uuids: bytes | None = None,
) -> bytes:
    procs = procs or []
    n = len(uuids) if device_num is None else device_num
    uuid_bytes = raw_uuids if raw_uuids is not None else b"".join(u.encode().ljust(96, b"\0") for u in uuids)
    lim = (limits or []) + [0] * (DEVICES - len(limits or []))
    sml = (sm_limits or []) + [0] * (DEVICES - len(sm_limits or []))
    buf = bytearray(REGION_SIZE)
    struct.pack_into(
        HEADER_FMT, buf, 0, magic, major, minor, 1, 4242, b"\x07" * 32, n, uuid_bytes.ljust(DEVICES * 96, b"\0"),
        *lim, *sml,
    )
    for i, p in enumerate(procs):
        used: list[int] = []
        util: list[int] = []
        for d in range(DEVICES):
            total = p.used.get(d, 0)
            # context, module, data, offset, total, unused x3: the breakdown is noise the reader must skip.
            used += [total // 4 + 11, total // 4 + 13, total // 2 + 17, 19, total, 23, 29, 31]
            util += [37, 41, p.sm.get(d, 0), 43, 47, 53]
        monitor = [p.used.get(d, 0) + 59 for d in range(DEVICES)]
        struct.pack_into(SLOT_FMT, buf, HEADER_SIZE + i * SLOT_SIZE, p.pid, p.hostpid, *used, *monitor, *util,
                         p.status, p.seqlock, 61, 67)
    struct.pack_into(TAIL_FMT, buf, TAIL_OFFSET, len(procs) if proc_num is None else proc_num, 1, 2, 0,
                     last_kernel_time, b"\x09" * 32)
    return bytes(buf)


def write_entry(directory: Path, pod_uid: str, container: str, data: bytes, *, sparse: bool = False) -> Path:
    """Write `data` where GPUEnvInject's mount puts it: `<dir>/<uid>_<container>/<uid>_<container>.cache`.
    `sparse` writes only the blocks that are not zero, as HAMi-core's ftruncate'd file is on disk (the bench's
    100 files then take kilobytes, not 200 MB)."""
    entry = directory / f"{pod_uid}_{container}"
    entry.mkdir(parents=True, exist_ok=True)
    path = entry / f"{pod_uid}_{container}.cache"
    if not sparse:
        path.write_bytes(data)
        return path
    block = 4096
    with path.open("wb") as f:
        f.truncate(len(data))
        for start in range(0, len(data), block):
            chunk = data[start:start + block]
            if chunk.count(0) != len(chunk):
                f.seek(start)
                f.write(chunk)
    return path
