"""HAMi-core's shared cache file (`CUDA_DEVICE_MEMORY_SHARED_CACHE`): its layout, and a reader that cannot be
led out of its directory or crashed by the file's owner.

HAMi-core (the `libvgpu.so` that GPUEnvInject preloads into a HAMi-core pod) keeps one `shared_region_t` per
container in that file, mmap'ed by every CUDA process of the container: the limits it enforces and, per
process slot, the memory and SM use it accounts. koordlet's hook points the file at
`<library dir>/<pod uid>_<container>.cache` and bind-mounts the host directory
`<library dir>/containers/<pod uid>_<container>` there, so on the host the file is
`<containers dir>/<pod uid>_<container>/<pod uid>_<container>.cache`. HAMi's own device plugin mounts the same
directory but names the file `<random uuid>.cache`; an entry without koordlet's name is read from its one
`*.cache` file, as HAMi's monitor does (`pkg/monitor/nvidia/cudevshr.go`).

The layout (x86-64/arm64 LP64, little-endian, natural alignment), from HAMi-core
`src/multiprocess/multiprocess_memory_limit.h` (Project-HAMi/HAMi-core, read at 8f3a89c, MAJOR_VERSION 1,
MINOR_VERSION 2), checked against a C compiler's `offsetof`/`sizeof` and against the Go mirror HAMi's own
monitor reads (Project-HAMi/HAMi `pkg/monitor/nvidia/v1/spec.go`):

    CUDA_DEVICE_MAX_COUNT = 16, SHARED_REGION_MAX_PROCESS_NUM = 1024,
    MULTIPROCESS_SHARED_REGION_MAGIC_FLAG = 19920718 (initialized_flag once the region is set up)

    shared_region_t (2 008 952 bytes)             shrreg_proc_slot_t (1 960 bytes)
      0  int32    initialized_flag                   0  int32  pid        (0: the process exited)
      4  uint32   major_version  (1)                 4  int32  hostpid
      8  uint32   minor_version                      8  device_memory_t used[16]   (64 bytes each:
     12  int32    sm_init_flag                              context, module, data, offset, total,
     16  size_t   owner_pid                                 3 unused; uint64 each; `total` at +32)
     24  sem_t    sem            (32 bytes)       1032  uint64 monitorused[16]
     56  uint64   device_num                      1160  device_util_t device_util[16] (48 bytes each:
     64  char     uuids[16][96]  (NUL-terminated)           dec, enc, sm, 3 unused; `sm_util` at +16)
   1600  uint64   limit[16]      (bytes)          1928  int32  status     (0 free, 1 running, 2 suspended)
   1728  uint64   sm_limit[16]   (percent)        1936  uint64 seqlock    (1.2+; `unused` before)
   1856  shrreg_proc_slot_t procs[1024]           1944  uint64 unused[2]
2008896  int32    proc_num       (slots in use)
2008900  int32    utilization_switch, recent_kernel, priority
2008912  uint64   last_kernel_time (unix seconds)
2008920  sem_t    sem_postinit   (32 bytes)

A container's use of its device `d` is what HAMi's monitor reports (`hami_vgpu_memory_used_bytes`,
`hami_container_device_utilization_ratio`): the sum over `procs[:proc_num]` whose `status` is not 0 of
`used[d].total` and `device_util[d].sm_util`. Only those two aligned 8-byte words are read per slot, each
written by HAMi-core with one atomic store or add, so the reader needs no lock (the 1.2 seqlock orders a
slot's total against its breakdown, which is not read here).

Why `pread`, not `mmap`: the file belongs to the container, and a process in it may truncate it at any time;
touching an mmap'ed page past the new end of the file raises SIGBUS, which kills the agent. A short `pread`
is only a short read (reported as a truncated file). The file is opened read-only, never written (HAMi's
monitor maps it writable to adjust limits; this reader does not).

Safety: the containers directory is opened once per scan; each entry is opened with `O_NOFOLLOW |
O_DIRECTORY` relative to it, and the cache file with `O_NOFOLLOW | O_NONBLOCK` relative to the entry and must
be a regular file (`fstat`), so a symlink (an entry, or the file) never leads out of the directory and a FIFO
never blocks the cycle. Every failure is a `VgpuCacheError` with a `kind` the collector counts.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from hookserver.errors import SystemFileError

__all__ = [
    "DEVICE_MAX",
    "MAGIC",
    "PROCESS_MAX",
    "REGION_SIZE",
    "SLOT_SIZE",
    "VgpuCacheError",
    "VgpuDevice",
    "VgpuRegion",
    "cache_file_name",
    "iter_regions",
    "list_entries",
    "parse_region",
    "read_entry",
]

MAGIC = 19920718
SUPPORTED_MAJOR = 1
DEVICE_MAX = 16
PROCESS_MAX = 1024
UUID_BYTES = 96

_HEADER = struct.Struct("<iII")  # initialized_flag, major_version, minor_version
_OFF_DEVICE_NUM = 56
_OFF_UUIDS = 64
_OFF_LIMIT = _OFF_UUIDS + DEVICE_MAX * UUID_BYTES  # 1600
_OFF_SM_LIMIT = _OFF_LIMIT + DEVICE_MAX * 8  # 1728
_OFF_PROCS = _OFF_SM_LIMIT + DEVICE_MAX * 8  # 1856
_HEAD_SIZE = _OFF_PROCS

SLOT_SIZE = 1960
_SLOT_PID = struct.Struct("<i")
_SLOT_USED_TOTAL = 8 + 32  # used[d].total at +8 + 64*d + 32
_USED_STRIDE = 64
_SLOT_SM_UTIL = 1160 + 16  # device_util[d].sm_util at +1160 + 48*d + 16
_UTIL_STRIDE = 48
_SLOT_STATUS = 1928

_OFF_TAIL = _OFF_PROCS + PROCESS_MAX * SLOT_SIZE  # 2008896
_TAIL = struct.Struct("<iiiiQ")  # proc_num, utilization_switch, recent_kernel, priority, last_kernel_time
REGION_SIZE = _OFF_TAIL + _TAIL.size + 32  # 2008952, sizeof(shared_region_t)

_U64 = struct.Struct("<Q")
_U64x16 = struct.Struct(f"<{DEVICE_MAX}Q")
_I32 = struct.Struct("<i")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class VgpuCacheError(SystemFileError):
    """A cache file that cannot be used. `kind` is what the collector counts: `vanished` (gone while read),
    `absent` (no CUDA process has created it yet), `ambiguous` (more than one cache file and none named for
    the entry), `symlink`, `not_regular`, `uninitialised` (HAMi-core has not finished setting it up), `truncated`,
    `bad_magic`, `unsupported_version`, `corrupt`, `unreadable`."""

    def __init__(self, kind: str, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message, path=path)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class VgpuDevice:
    """One device of a container's region: `index` is the container's CUDA index, `uuid` NVML's."""

    index: int
    uuid: str
    memory_used_bytes: int
    sm_util_percent: int
    memory_limit_bytes: int
    sm_limit_percent: int


@dataclass(frozen=True, slots=True)
class VgpuRegion:
    major: int
    minor: int
    devices: tuple[VgpuDevice, ...]
    processes: int  # slots in use whose status is not 0
    last_kernel_time: int
    skipped_devices: tuple[str, ...] = ()  # why a device was left out (a UUID that is not text)


def cache_file_name(entry: str) -> str:
    """The cache file koordlet's hook names for the entry `<pod uid>_<container>`."""
    return f"{entry}.cache"


def list_entries(directory: str) -> list[str]:
    """The directories and symlinks in `directory` (a symlink is listed so that `read_entry` refuses it and the
    refusal is counted; plain files are not entries); [] when the directory does not exist yet (no HAMi-core
    container has started on this node). Any other OSError is a `VgpuCacheError('unreadable')`."""
    try:
        with os.scandir(directory) as it:
            return sorted(e.name for e in it if e.is_symlink() or e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise VgpuCacheError("unreadable", f"cannot list: {exc.strerror}", path=directory) from exc


def _uuid(raw: bytes) -> str | None:
    text = raw.split(b"\x00", 1)[0]
    if not text:
        return ""
    try:
        value = text.decode("ascii")
    except UnicodeDecodeError:
        return None
    return value if value.isprintable() else None


def parse_region(head: bytes, slots: bytes, tail: bytes, *, path: str = "") -> VgpuRegion:
    """Decode the header (`head`: the first 1856 bytes), the slots in use (`slots`: `proc_num` slots from
    offset 1856) and the tail (`tail`: 24 bytes from offset 2008896). Raises `VgpuCacheError`."""
    if len(head) < _HEAD_SIZE or len(tail) < _TAIL.size:
        raise VgpuCacheError("truncated", "shorter than HAMi-core's shared region", path=path)
    flag, major, minor = _HEADER.unpack_from(head, 0)
    if flag != MAGIC:
        if flag in (0, 1):
            raise VgpuCacheError("uninitialised", f"initialized_flag {flag}: HAMi-core is still setting it up", path=path)
        raise VgpuCacheError("bad_magic", f"initialized_flag {flag}, expected {MAGIC}", path=path)
    if major != SUPPORTED_MAJOR:
        raise VgpuCacheError("unsupported_version", f"shared region version {major}.{minor}, reader knows 1.x", path=path)
    (device_num,) = _U64.unpack_from(head, _OFF_DEVICE_NUM)
    if device_num > DEVICE_MAX:
        raise VgpuCacheError("corrupt", f"device_num {device_num} > {DEVICE_MAX}", path=path)
    proc_num, _switch, _recent, _priority, last_kernel = _TAIL.unpack_from(tail, 0)
    if not 0 <= proc_num <= PROCESS_MAX:
        raise VgpuCacheError("corrupt", f"proc_num {proc_num} outside 0..{PROCESS_MAX}", path=path)
    if len(slots) < proc_num * SLOT_SIZE:
        raise VgpuCacheError("truncated", f"{len(slots)} bytes of slots for proc_num {proc_num}", path=path)
    limits = _U64x16.unpack_from(head, _OFF_LIMIT)
    sm_limits = _U64x16.unpack_from(head, _OFF_SM_LIMIT)
    memory = [0] * device_num
    sm = [0] * device_num
    active = 0
    for base in range(0, proc_num * SLOT_SIZE, SLOT_SIZE):
        if _I32.unpack_from(slots, base + _SLOT_STATUS)[0] == 0 or _SLOT_PID.unpack_from(slots, base)[0] == 0:
            continue  # a free slot, or one whose process exited (HAMi-core clears it lazily)
        active += 1
        for d in range(device_num):
            memory[d] += _U64.unpack_from(slots, base + _SLOT_USED_TOTAL + d * _USED_STRIDE)[0]
            sm[d] += _U64.unpack_from(slots, base + _SLOT_SM_UTIL + d * _UTIL_STRIDE)[0]
    devices: list[VgpuDevice] = []
    skipped: list[str] = []
    for d in range(device_num):
        start = _OFF_UUIDS + d * UUID_BYTES
        uuid = _uuid(head[start:start + UUID_BYTES])
        if uuid is None:
            skipped.append(f"device {d}: UUID is not text")
            continue
        if not uuid:
            skipped.append(f"device {d}: no UUID yet")
            continue
        devices.append(VgpuDevice(d, uuid, memory[d], sm[d], limits[d], sm_limits[d]))
    return VgpuRegion(major, minor, tuple(devices), active, last_kernel, tuple(skipped))


def _pread(fd: int, n: int, offset: int, path: str) -> bytes:
    try:
        return os.pread(fd, n, offset)
    except OSError as exc:
        raise VgpuCacheError("unreadable", f"read: {exc.strerror}", path=path) from exc


def _cache_name(dir_fd: int, entry: str, path: str) -> str:
    """koordlet's `<entry>.cache`, else the one `*.cache` file there (HAMi's own device plugin names it
    `<random uuid>.cache`; HAMi's monitor takes the one it finds). Two or more: `ambiguous`."""
    named = cache_file_name(entry)
    try:
        os.stat(named, dir_fd=dir_fd, follow_symlinks=False)
        return named
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise VgpuCacheError("unreadable", f"stat: {exc.strerror}", path=path) from exc
    try:
        names = [n for n in os.listdir(dir_fd) if n.endswith(".cache")]
    except OSError as exc:
        raise VgpuCacheError("unreadable", f"cannot list: {exc.strerror}", path=path) from exc
    if not names:
        raise VgpuCacheError("absent", "no cache file yet (no CUDA process has started)", path=path)
    if len(names) > 1:
        raise VgpuCacheError("ambiguous", f"{len(names)} cache files: {', '.join(sorted(names)[:4])}", path=path)
    return names[0]


def read_entry(directory: str, entry: str) -> VgpuRegion:
    """Read the cache file of `<directory>/<entry>` (`_cache_name`) without following a symlink at any step."""
    path = f"{directory}/{entry}/{cache_file_name(entry)}"
    try:
        dir_fd = os.open(f"{directory}/{entry}", _DIR_FLAGS)
    except FileNotFoundError as exc:
        raise VgpuCacheError("vanished", "entry directory is gone", path=path) from exc
    except OSError as exc:
        kind = "symlink" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else "unreadable"  # a link, or a file there
        raise VgpuCacheError(kind, f"entry: {exc.strerror}", path=path) from exc
    try:
        name = _cache_name(dir_fd, entry, path)
        path = f"{directory}/{entry}/{name}"
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError as exc:
            raise VgpuCacheError("vanished", "cache file is gone", path=path) from exc
        except OSError as exc:
            kind = "symlink" if exc.errno == errno.ELOOP else "unreadable"
            raise VgpuCacheError(kind, f"open: {exc.strerror}", path=path) from exc
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise VgpuCacheError("not_regular", "not a regular file", path=path)
        if st.st_size < REGION_SIZE:
            raise VgpuCacheError("truncated", f"{st.st_size} bytes, HAMi-core's region is {REGION_SIZE}", path=path)
        head = _pread(fd, _HEAD_SIZE, 0, path)
        tail = _pread(fd, _TAIL.size, _OFF_TAIL, path)
        proc_num = _I32.unpack_from(tail, 0)[0] if len(tail) >= _I32.size else 0
        slots = _pread(fd, proc_num * SLOT_SIZE, _OFF_PROCS, path) if 0 < proc_num <= PROCESS_MAX else b""
        return parse_region(head, slots, tail, path=path)
    finally:
        os.close(fd)


def iter_regions(directory: str) -> Iterator[tuple[str, VgpuRegion | VgpuCacheError]]:
    """Every entry of `directory` with its region or the error that skipped it (tools and tests)."""
    for entry in list_entries(directory):
        try:
            yield entry, read_entry(directory, entry)
        except VgpuCacheError as exc:
            yield entry, exc
