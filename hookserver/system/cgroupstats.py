"""The read side of cgroups for the collectors: CPU usage, memory, throttling, PSI and CPU limits, v1 or v2.

One reader per hierarchy version; nothing else branches on the version (the opencontainers/cgroups idea of
one factory). Directories are relative to the hierarchy root (`kubepods/besteffort/pod<uid>`), already
normalised by `hookserver.system.cgroupnames.normalize_cgroup_dir` or built from the layout. On v1 each
controller has its own mount (`cpu` and `cpuacct` are separate mounts on some hosts, co-mounted with
symlinks on others: joining per controller works for both).

A cgroup that is gone reads as None (the pod ended between listing and reading), not as an error.
Files are read through kept-open descriptors (`hookserver.system.openfiles`): one `pread` per file per
cycle instead of open, read and close.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from hookserver.errors import SystemFileError
from hookserver.system.mounts import read_cgroup_mounts
from hookserver.system.numa_usage import parse_numa_stat
from hookserver.system.openfiles import OpenFiles, default_max_open
from hookserver.system.procfs import PSI_RESOURCES, PressureLine, read_pressure
from hookserver.system.roots import SystemRoots
from hookserver.system.cpulist import parse_cpu_list

__all__ = [
    "CgroupStatReader",
    "CgroupVersion",
    "CpuLimit",
    "MemoryUsage",
    "ThrottleStat",
    "detect_cgroup_version",
]


class CgroupVersion(enum.IntEnum):
    V1 = 1
    V2 = 2


def detect_cgroup_version(roots: SystemRoots, configured: str = "auto") -> CgroupVersion:
    """`v1`/`v2` as configured; `auto` looks at the tree: a unified root has `cgroup.controllers`, a v1
    (or hybrid) root has per-controller directories. Reading the tree, not the mounts, lets tests bring one."""
    if configured == "v1":
        return CgroupVersion.V1
    if configured == "v2":
        return CgroupVersion.V2
    if os.path.exists(roots.cgroup_path("cgroup.controllers")):
        return CgroupVersion.V2
    return CgroupVersion.V1


@dataclass(frozen=True, slots=True)
class MemoryUsage:
    """Bytes. `without_cache` = anon + unevictable (koordlet's pod memory usage); `with_cache` adds the file
    LRU lists on v1 and is the kernel's own `memory.current` on v2; `cache` is the page cache charged."""

    without_cache: int
    with_cache: int
    cache: int


@dataclass(frozen=True, slots=True)
class ThrottleStat:
    nr_periods: int
    nr_throttled: int
    throttled_ns: int


@dataclass(frozen=True, slots=True)
class CpuLimit:
    """`quota_us` is -1 when unlimited. `cpuset_cpus` counts the CPUs the cgroup may run on (0: unknown)."""

    quota_us: int
    period_us: int
    cpuset_cpus: int

    @property
    def cores(self) -> float:
        """The effective limit in cores: min(quota / period, cpuset size), whichever are known."""
        limits: list[float] = []
        if self.quota_us > 0 and self.period_us > 0:
            limits.append(self.quota_us / self.period_us)
        if self.cpuset_cpus > 0:
            limits.append(float(self.cpuset_cpus))
        return min(limits) if limits else 0.0


def _int_file(read_text: Callable[[str], str | None], path: str) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise SystemFileError(f"{path}: expected an integer, got {text.strip()[:64]!r}", path=path) from None


def _kv_bytes(data: bytes | None, path: str) -> dict[bytes, bytes]:
    """`key value` lines as bytes ({} when gone): cpu.stat is read every cycle, so nothing is decoded."""
    if data is None:
        return {}
    tokens = data.split()
    if len(tokens) % 2:
        raise SystemFileError(f"{path}: expected 'key value' lines, got an odd number of fields", path=path)
    it = iter(tokens)
    return dict(zip(it, it, strict=True))


def _get_bytes(stat: dict[bytes, bytes], key: bytes, path: str) -> int:
    value = stat.get(key)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise SystemFileError(f"{path}: {key.decode()} is not an integer: {value[:32]!r}", path=path) from None


_NUMA_LINE = re.compile(rb"\nhierarchical_(anon|unevictable|file)=(\S+)")
# The kernel prints the hierarchical lines in this order (file, anon, unevictable): one anchored search
# reads all three in half the time of `_NUMA_LINE`'s scan, which stays for any other order.
_NUMA_ORDERED = re.compile(
    rb"\nhierarchical_file=(\d+)[^\n]*\nhierarchical_anon=(\d+)[^\n]*\nhierarchical_unevictable=(\d+)"
)
# The kernel lists the LRU counters as consecutive lines in this order (memory.stat on v2 since 4.x):
# one search reads what `usage` needs without the per-line scan of `_V2_LINE`, which stays for any other order.
_V2_LRU = re.compile(
    rb"(?:^|\n)inactive_anon (\d+)\nactive_anon (\d+)\ninactive_file \d+\nactive_file \d+\nunevictable (\d+)\n"
)
_V2_LINE = re.compile(rb"^(inactive_anon|active_anon|unevictable|file|active_file|inactive_file) (\S+)$", re.M)


def _numa_usage(data: bytes, path: str) -> tuple[int, int] | None:
    """(anon + unevictable, file) pages from memory.numa_stat's hierarchical lines; None when absent.

    A line is `hierarchical_anon=<pages> N0=<pages> ...`; the first line (`total=`) is never matched, so
    every match starts at a line start and cannot be part of another key. The kernel's order takes one
    anchored search (`_NUMA_ORDERED`, ~0.6 us); any other order one scan (`_NUMA_LINE`, ~1.3 us)."""
    ordered = _NUMA_ORDERED.search(data)
    if ordered is not None:
        files_, anon_, unevictable_ = ordered.groups()
        return int(anon_) + int(unevictable_), int(files_)
    found = dict(_NUMA_LINE.findall(data))
    anon, unevictable, files = found.get(b"anon"), found.get(b"unevictable"), found.get(b"file")
    if anon is None or unevictable is None or files is None:
        return None
    try:
        return int(anon) + int(unevictable), int(files)
    except ValueError:
        raise SystemFileError(f"{path}: a hierarchical page count is not an integer: {found!r}"[:300], path=path) from None


def _get(stat: dict[str, str], key: str, path: str, default: int = 0) -> int:
    value = stat.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemFileError(f"{path}: {key} is not an integer: {value[:32]!r}", path=path) from None


def _pick(text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The values of `keys` in `key value` lines, found by search instead of splitting the whole file.

    A real v1 memory.stat has ~70 lines and we need six of them; this reads only those. A key counts
    only at the start of a line (`active_anon` must not match inside `total_inactive_anon`).
    """
    out: dict[str, str] = {}
    find = text.find
    for key in keys:
        needle = key + " "
        at = find(needle)
        while at > 0 and text[at - 1] != "\n":
            at = find(needle, at + 1)
        if at < 0:
            continue
        start = at + len(needle)
        end = find("\n", start)
        out[key] = text[start:end if end >= 0 else len(text)].strip()
    return out


def _sum(stat: dict[str, str], keys: tuple[str, ...], path: str) -> int:
    """The sum of the present keys' integer values (absent keys count 0)."""
    total = 0
    for key in keys:
        value = stat.get(key)
        if value is not None:
            try:
                total += int(value)
            except ValueError:
                raise SystemFileError(f"{path}: {key} is not an integer: {value[:32]!r}", path=path) from None
    return total


_ANON = ("inactive_anon", "active_anon", "unevictable")
_FILE = ("inactive_file", "active_file")
_TOTAL_ANON = tuple(f"total_{k}" for k in _ANON)
_TOTAL_FILE = tuple(f"total_{k}" for k in _FILE)
_V1_KEYS = (*_TOTAL_ANON, *_TOTAL_FILE, "total_cache")
_V1_OWN_KEYS = (*_ANON, *_FILE, "cache")
_V2_KEYS = (*_ANON, *_FILE, "file")


def _on_cgroup_mounts(roots: SystemRoots, bases: tuple[str, ...]) -> tuple[str, ...]:
    """The bases that are (under) a cgroup mount, where a removed cgroup's files fail with ENODEV."""
    mounts = [m.mountpoint.rstrip("/") or "/" for m in read_cgroup_mounts(roots)]
    out: list[str] = []
    for base in dict.fromkeys(bases):
        try:
            real = os.path.realpath(base)
        except OSError:
            continue
        if any(real == m or real.startswith(m + "/") for m in mounts):
            out.append(base)
    return tuple(out)


def _join(base: str, rel: str) -> str:
    return f"{base}/{rel}" if rel else base


class CgroupStatReader:
    """Reads the stat files of one cgroup hierarchy (v1 or v2) under `roots.cgroup`.

    `cpu.stat` is memoised until `new_cycle()`: on v2 it holds both the usage and the throttling counters,
    which two collectors read in the same cycle. Call `close()` when done (it closes the kept descriptors).
    """

    def __init__(self, roots: SystemRoots, version: CgroupVersion, *, files: OpenFiles | None = None) -> None:
        self.roots = roots
        self.version = version
        root = roots.cgroup.rstrip("/") or "/"
        if version is CgroupVersion.V1:
            self._cpuacct = f"{root}/cpuacct"
            self._cpu = f"{root}/cpu"
            self._memory = f"{root}/memory"
            self._cpuset = f"{root}/cpuset"
        else:
            self._cpuacct = self._cpu = self._memory = self._cpuset = root
        if files is None:
            bases = (self._cpuacct, self._cpu, self._memory, self._cpuset)
            files = OpenFiles(max_open=default_max_open(), kernel_prefixes=_on_cgroup_mounts(roots, bases))
        self.files = files
        self._read = self.files.read
        self._cpu_stat: dict[str, dict[bytes, bytes]] = {}
        # rel -> (cpu usage file, cpu.stat, memory.stat, memory.current, memory.numa_stat): built once.
        self._paths: dict[str, tuple[str, str, str, str, str]] = {}
        self._read_bytes = self.files.read_bytes
        # v1: the pod/container usage reads memory.numa_stat (half the kernel's cost of memory.stat) until
        # a host shows it has none (a kernel without CONFIG_NUMA); then memory.stat, as `memory` does.
        self.numa_stat = version is CgroupVersion.V1
        self._page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def new_cycle(self) -> None:
        """Forget memoised files: the next reads see the kernel's new counters."""
        self._cpu_stat.clear()
        self.files.new_cycle()
        if len(self._paths) > 4 * max(len(self.files), 1024):
            self._paths.clear()  # pods come and go: never let the path table grow without bound

    def _paths_of(self, rel: str) -> tuple[str, str, str, str, str]:
        paths = self._paths.get(rel)
        if paths is None:
            cpu, memory = _join(self._cpu, rel), _join(self._memory, rel)
            usage = f"{_join(self._cpuacct, rel)}/cpuacct.usage" if self.version is CgroupVersion.V1 else ""
            paths = self._paths[rel] = (
                usage, f"{cpu}/cpu.stat", f"{memory}/memory.stat", f"{memory}/memory.current",
                f"{memory}/memory.numa_stat",
            )
        return paths

    def close(self) -> None:
        self.files.close()

    def exists(self, rel: str) -> bool:
        """Whether the cgroup exists (in the memory hierarchy on v1, the one every pod has)."""
        return os.path.isdir(_join(self._memory, rel))

    def _read_cpu_stat(self, rel: str) -> tuple[str, dict[bytes, bytes]]:
        path = self._paths_of(rel)[1]
        stat = self._cpu_stat.get(path)
        if stat is None:
            stat = self._cpu_stat[path] = _kv_bytes(self._read_bytes(path), path)
        return path, stat

    def cpu_usage_ns(self, rel: str) -> int | None:
        """Cumulative CPU time of the cgroup and its children, in ns."""
        if self.version is CgroupVersion.V1:
            path = self._paths_of(rel)[0]
            data = self._read_bytes(path)
            if data is None:
                return None
            try:
                return int(data)
            except ValueError:
                raise SystemFileError(f"{path}: expected an integer, got {data.strip()[:64]!r}", path=path) from None
        path, stat = self._read_cpu_stat(rel)
        if b"usage_usec" not in stat:
            return None
        return _get_bytes(stat, b"usage_usec", path) * 1000

    def usage(self, rel: str) -> tuple[int, int, int]:
        """(cumulative CPU ns, memory without cache, memory with cache), each -1 when not readable (the
        cgroup is gone): the per-cycle read of every pod and container, in one call.

        Memory is what `memory` gives, read more cheaply on v1: `memory.numa_stat`'s hierarchical anon,
        unevictable and file LRU page counts are the same kernel counters as memory.stat's total_* lines
        (checked against each other on a real v1 host), in a file the kernel builds in half the time
        (8 short lines instead of ~50). A v1 host without the file (no CONFIG_NUMA) falls back to
        memory.stat for good.
        """
        paths = self._paths.get(rel) or self._paths_of(rel)
        read = self._read_bytes
        cpu = -1
        if self.version is CgroupVersion.V1:
            data = read(paths[0])
            if data is not None:
                try:
                    cpu = int(data)
                except ValueError:
                    raise SystemFileError(
                        f"{paths[0]}: expected an integer, got {data.strip()[:64]!r}", path=paths[0]
                    ) from None
        else:
            value = self.cpu_usage_ns(rel)
            cpu = -1 if value is None else value
        if self.numa_stat:
            data = read(paths[4])
            if data:
                found = _numa_usage(data, paths[4])
                if found is not None:
                    page = self._page_size
                    without = found[0] * page
                    return cpu, without, without + found[1] * page
            if not self.exists(rel):
                return cpu, -1, -1  # the cgroup is gone, not the file
            self.numa_stat = False  # this host's memory cgroups have no (hierarchical) numa_stat
        if self.version is CgroupVersion.V2:
            return (cpu, *self._v2_memory(paths))
        mem = self.memory(rel)
        if mem is None:
            return cpu, -1, -1
        return cpu, mem.without_cache, mem.with_cache

    def _v2_memory(self, paths: tuple[str, str, str, str, str]) -> tuple[int, int]:
        """`memory` on v2 for `usage`: with memory.current, one search for the LRU lines in the kernel's
        order (`_V2_LRU`); otherwise, or in another order, one scan of memory.stat. Bytes, no dataclass."""
        path = paths[2]
        data = self._read_bytes(path)
        if not data or data.isspace():
            return -1, -1
        current_text = self._read_bytes(paths[3])
        if current_text is not None:
            lru = _V2_LRU.search(data)
            if lru is not None:
                inactive_anon, active_anon, unevictable = lru.groups()
                try:
                    return int(inactive_anon) + int(active_anon) + int(unevictable), int(current_text)
                except ValueError:
                    raise SystemFileError(
                        f"{paths[3]}: expected an integer, got {current_text.strip()[:64]!r}", path=paths[3]
                    ) from None
        found = dict(_V2_LINE.findall(data))
        try:
            without = int(found.get(b"inactive_anon", 0)) + int(found.get(b"active_anon", 0)) + int(
                found.get(b"unevictable", 0)
            )
            if current_text is not None:
                return without, int(current_text)
            files = found.get(b"file")
            file_pages = int(files) if files is not None else int(found.get(b"active_file", 0)) + int(
                found.get(b"inactive_file", 0)
            )
        except ValueError:
            raise SystemFileError(f"{path}: a memory counter is not an integer: {found!r}"[:300], path=path) from None
        return without, without + file_pages

    def memory_numa_bytes(self, rel: str) -> dict[int, int] | None:
        """The cgroup's memory per NUMA node in bytes (`memory.numa_stat`, as koordlet sums pods for the
        per-NUMA system usage); None when the file is absent (the cgroup is gone, or no CONFIG_NUMA)."""
        path = self._paths_of(rel)[4]
        data = self._read_bytes(path)
        if data is None:
            return None
        return parse_numa_stat(data.decode("ascii", "replace"), path, v2=self.version is CgroupVersion.V2,
                               page_size=self._page_size)

    def memory(self, rel: str) -> MemoryUsage | None:
        paths = self._paths_of(rel)
        path = paths[2]
        text = self._read(path)
        if text is None or not text.strip():
            return None
        if self.version is CgroupVersion.V1:
            # Hierarchical totals (total_*) include child cgroups: a pod's pages live in its containers.
            stat = _pick(text, _V1_KEYS)
            total = "total_active_anon" in stat
            if not total:
                stat = _pick(text, _V1_OWN_KEYS)
            without = _sum(stat, _TOTAL_ANON if total else _ANON, path)
            files = _sum(stat, _TOTAL_FILE if total else _FILE, path)
            return MemoryUsage(
                without_cache=without, with_cache=without + files,
                cache=_get(stat, "total_cache" if total else "cache", path, files),
            )
        stat = _pick(text, _V2_KEYS)
        without = _sum(stat, _ANON, path)
        files = _get(stat, "file", path, -1)
        if files < 0:
            files = _sum(stat, _FILE, path)
        current = _int_file(self._read, paths[3])
        return MemoryUsage(without_cache=without, with_cache=current if current is not None else without + files, cache=files)

    def throttling(self, rel: str) -> ThrottleStat | None:
        path, stat = self._read_cpu_stat(rel)
        if b"nr_periods" not in stat:
            return None
        if self.version is CgroupVersion.V1:
            throttled_ns = _get_bytes(stat, b"throttled_time", path)
        else:
            throttled_ns = _get_bytes(stat, b"throttled_usec", path) * 1000
        return ThrottleStat(
            _get_bytes(stat, b"nr_periods", path), _get_bytes(stat, b"nr_throttled", path), throttled_ns
        )

    def throttle_counts(self, rel: str) -> tuple[int, int] | None:
        """(nr_periods, nr_throttled): what the per-cycle throttled ratio needs, without the dataclass.

        v1's cpu.stat starts with these two lines and nothing else reads it in a cycle: parsed in place,
        not memoised; any other layout goes the general way."""
        if self.version is CgroupVersion.V1:
            path = (self._paths.get(rel) or self._paths_of(rel))[1]
            data = self._read_bytes(path)
            if data is None:
                return None
            head = data.split(None, 4)
            if len(head) >= 4 and head[0] == b"nr_periods" and head[2] == b"nr_throttled":
                try:
                    return int(head[1]), int(head[3])
                except ValueError:
                    pass  # the general path names the bad value
            stat = _kv_bytes(data, path)
        else:
            path, stat = self._read_cpu_stat(rel)
        periods = stat.get(b"nr_periods")
        if periods is None:
            return None
        throttled = stat.get(b"nr_throttled", b"0")
        try:
            return int(periods), int(throttled)
        except ValueError:
            raise SystemFileError(
                f"{path}: nr_periods/nr_throttled are not integers: {periods[:32]!r} {throttled[:32]!r}", path=path
            ) from None

    def pressure(self, rel: str) -> dict[str, dict[str, PressureLine]] | None:
        """Per-cgroup PSI ({resource: {degree: line}}), v2 only; None on v1 or when PSI is off."""
        if self.version is CgroupVersion.V1:
            return None
        base = _join(self._cpu, rel)
        out: dict[str, dict[str, PressureLine]] = {}
        for resource in PSI_RESOURCES:
            lines = read_pressure(f"{base}/{resource}.pressure")
            if lines is not None:
                out[resource] = lines
        return out or None

    def cpu_limit(self, rel: str) -> CpuLimit | None:
        base = _join(self._cpu, rel)
        if self.version is CgroupVersion.V1:
            quota = _int_file(self._read, f"{base}/cpu.cfs_quota_us")
            if quota is None:
                return None
            period = _int_file(self._read, f"{base}/cpu.cfs_period_us") or 100_000
            cpus_path = f"{_join(self._cpuset, rel)}/cpuset.cpus"
        else:
            max_path = f"{base}/cpu.max"
            max_text = self._read(max_path)
            if max_text is None:
                return None
            fields = max_text.split()
            try:
                quota = -1 if not fields or fields[0] == "max" else int(fields[0])
                period = int(fields[1]) if len(fields) > 1 else 100_000
            except ValueError:
                raise SystemFileError(f"{max_path}: expected '<quota|max> <period>', got {max_text.strip()[:64]!r}", path=max_path) from None
            cpus_path = f"{base}/cpuset.cpus.effective"
        cpus_text = self._read(cpus_path)
        try:
            cpus = len(parse_cpu_list(cpus_text)) if cpus_text and cpus_text.strip() else 0
        except ValueError as exc:
            raise SystemFileError(f"{cpus_path}: {exc}", path=cpus_path) from exc
        return CpuLimit(quota_us=quota, period_us=period, cpuset_cpus=cpus)
