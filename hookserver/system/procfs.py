"""Readers for the node-wide /proc files the collectors need: /proc/stat, /proc/meminfo, PSI, /proc/<pid>/cgroup.

Parsers are pure functions on text (tests feed them strings and fixture files); readers join the path under
`SystemRoots.proc` and read through `hookserver.system.files`, so a missing file is `None`, never a crash,
and a file that does not parse raises `SystemFileError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookserver.errors import SystemFileError
from hookserver.system.files import read_text
from hookserver.system.roots import SystemRoots

__all__ = [
    "PSI_RESOURCES",
    "CpuTicks",
    "MemInfo",
    "PressureLine",
    "parse_meminfo",
    "parse_pid_cgroup",
    "parse_pressure",
    "parse_proc_stat",
    "read_cpu_ticks",
    "read_meminfo",
    "read_pid_cgroup",
    "read_pressure",
]

PSI_RESOURCES = ("cpu", "memory", "io")


@dataclass(frozen=True, slots=True)
class CpuTicks:
    """The aggregate `cpu` line of /proc/stat. `busy` = user+nice+system+irq+softirq+steal (guest time is
    already inside user/nice); `total` = busy + idle + iowait. `ncpu` counts the per-CPU lines (online CPUs).
    Cores in use over an interval = Δbusy / Δtotal × ncpu, which needs no wall clock and no USER_HZ."""

    busy: int
    total: int
    ncpu: int


def parse_proc_stat(text: str, path: str = "/proc/stat") -> CpuTicks:
    agg: list[int] | None = None
    ncpu = 0
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        fields = line.split()
        if fields[0] == "cpu":
            try:
                agg = [int(x) for x in fields[1:]]
            except ValueError as exc:
                raise SystemFileError(f"{path}: cpu line has a non-integer field: {line[:80]!r}", path=path) from exc
        elif fields[0][3:].isdigit():
            ncpu += 1
    if agg is None or len(agg) < 4:
        raise SystemFileError(f"{path}: no aggregate 'cpu' line with at least 4 fields", path=path)
    agg += [0] * (8 - len(agg))
    user, nice, system, idle, iowait, irq, softirq, steal = agg[:8]
    busy = user + nice + system + irq + softirq + steal
    return CpuTicks(busy=busy, total=busy + idle + iowait, ncpu=max(ncpu, 1))


def read_cpu_ticks(roots: SystemRoots) -> CpuTicks | None:
    path = roots.proc_path("stat")
    text = read_text(path)
    return None if text is None else parse_proc_stat(text, path)


@dataclass(frozen=True, slots=True)
class MemInfo:
    """/proc/meminfo in bytes. `used` = total − available: koordlet's node memory usage (no page cache)."""

    total: int
    free: int
    available: int
    buffers: int
    cached: int

    @property
    def used(self) -> int:
        return max(self.total - self.available, 0)

    @property
    def used_with_page_cache(self) -> int:
        return max(self.total - self.free, 0)

    @property
    def page_cache(self) -> int:
        return self.buffers + self.cached


def parse_meminfo(text: str, path: str = "/proc/meminfo") -> MemInfo:
    """`Key:   123 kB` lines (also per-NUMA `Node 0 Key: 123 kB`). Values in kB become bytes."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        key = head.split()[-1] if head.strip() else head
        try:
            number = int(parts[0])
        except ValueError:
            continue
        values[key] = number * 1024 if len(parts) > 1 and parts[1] == "kB" else number
    if "MemTotal" not in values or "MemFree" not in values:
        raise SystemFileError(f"{path}: MemTotal or MemFree missing", path=path)
    free = values["MemFree"]
    buffers = values.get("Buffers", 0)
    cached = values.get("Cached", values.get("FilePages", 0))
    # Kernels before 3.14 have no MemAvailable: free + buffers + cache is the classic estimate.
    available = values.get("MemAvailable", free + buffers + cached)
    return MemInfo(total=values["MemTotal"], free=free, available=available, buffers=buffers, cached=cached)


def read_meminfo(roots: SystemRoots) -> MemInfo | None:
    path = roots.proc_path("meminfo")
    text = read_text(path)
    return None if text is None else parse_meminfo(text, path)


@dataclass(frozen=True, slots=True)
class PressureLine:
    """One `some`/`full` line of a PSI file: percentages over 10/60/300 s, and total stall µs."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int


def parse_pressure(text: str, path: str) -> dict[str, PressureLine]:
    """`some avg10=0.12 avg60=0.05 avg300=0.01 total=1234` (and `full ...`) -> {'some': ..., 'full': ...}."""
    out: dict[str, PressureLine] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        degree = fields[0]
        if degree not in ("some", "full"):
            raise SystemFileError(f"{path}: unexpected PSI line {line[:80]!r}", path=path)
        kv: dict[str, str] = {}
        for item in fields[1:]:
            name, sep, value = item.partition("=")
            if sep:
                kv[name] = value
        try:
            out[degree] = PressureLine(
                avg10=float(kv["avg10"]), avg60=float(kv["avg60"]), avg300=float(kv["avg300"]), total_us=int(kv["total"])
            )
        except (KeyError, ValueError) as exc:
            raise SystemFileError(f"{path}: malformed PSI line {line[:80]!r}", path=path) from exc
    return out


def read_pressure(path: str) -> dict[str, PressureLine] | None:
    """A PSI file (`/proc/pressure/cpu`, `<cgroup>/memory.pressure`), or None when absent."""
    text = read_text(path)
    return None if text is None else parse_pressure(text, path)


def parse_pid_cgroup(text: str) -> list[tuple[str, str]]:
    """/proc/<pid>/cgroup lines `id:controllers:path` -> [(controllers, path)]; v2's line has controllers ''."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out


def read_pid_cgroup(roots: SystemRoots, pid: int) -> list[tuple[str, str]]:
    """The cgroups of a process; [] when it has exited."""
    text = read_text(roots.proc_path(str(pid), "cgroup"))
    return [] if text is None else parse_pid_cgroup(text)
