"""Which systemd unit a cgroup directory is, and which unit property holds what the agent wrote in one of its files.

Why: systemd owns the kubelet's slices and the runtime's container scopes under the systemd driver, and on a
`daemon-reload`, a `systemctl set-property` or the start of a sibling unit it writes every cgroup file of those
units from the units' properties again. A value that lives only in the file is lost then; the same value kept as
the unit's property is what systemd writes back. The names and types are systemd's D-Bus properties
(org.freedesktop.systemd1.Slice/Scope, systemd 252, as `systemctl show` lists them). A file with no property
(`cpu.idle`, `cpu.max.burst`, `io.max`, bvt, ...) maps to nothing and keeps the reactive path.

systemd 252 keeps `CPUQuotaPerSecUSec` in its runtime drop-in as a whole percentage (`CPUQuota=12%`, the per-second
value divided by 10000, truncated; newer versions write two decimals): on the VM tier's systemd 252 a quota of
12350 µs per 100 ms came back from a daemon-reload as 12000. Only whole percents survive every version, so
`systemd_quota_us` rounds the quota to the nearest whole percent of a CPU (1000 µs per 100 ms), and the executor
writes that one on systemd units: the file, the property and the reloaded drop-in agree (no churn).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = [
    "INFINITY",
    "MIRRORED_FILES",
    "UnitProperty",
    "cpu_mask",
    "properties_for",
    "property_from_text",
    "systemd_quota_us",
    "unit_of",
]

INFINITY = (1 << 64) - 1  # systemd's USEC_INFINITY / CGROUP_LIMIT_MAX on the wire
_QUOTA_STEP_PER_SEC_US = 10_000  # CPUQuota= is written as a whole percentage (systemd 252): 1 % = 10000 µs/s
_QUOTA_MIN_US = 1000  # systemd and the kernel: at least 1 ms per period
_UNIT = re.compile(r"^(kubepods(-[A-Za-z0-9_]+)*\.slice|(cri-containerd|crio|docker)-[0-9a-f]{12,64}\.scope)$")
_MEMORY_V2 = {"memory.max": "MemoryMax", "memory.high": "MemoryHigh", "memory.low": "MemoryLow",
              "memory.min": "MemoryMin"}
# The files `properties_for` maps (v2 and v1 names): anything else is no systemd property's.
MIRRORED_FILES = frozenset({*_MEMORY_V2, "cpu.weight", "cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us",
                            "cpu.shares", "memory.limit_in_bytes", "cpuset.cpus", "cpuset.mems", "io.weight",
                            "blkio.weight"})


@dataclass(frozen=True, slots=True)
class UnitProperty:
    """One unit property: its D-Bus name, signature (`t` or `ay`) and value."""

    name: str
    signature: str
    value: int | bytes

    def to_text(self) -> str:
        """A JSON form for the state dir (node-originals.json)."""
        value = self.value.hex() if isinstance(self.value, bytes) else self.value
        return json.dumps([self.name, self.signature, value])


def property_from_text(text: str) -> UnitProperty:
    """`UnitProperty.to_text` back; ValueError on anything else."""
    try:
        name, signature, value = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a unit property record: {text!r}") from exc
    if signature == "ay" and isinstance(value, str):
        return UnitProperty(str(name), "ay", bytes.fromhex(value))
    if signature == "t" and isinstance(value, int) and 0 <= value <= INFINITY:
        return UnitProperty(str(name), "t", value)
    raise ValueError(f"not a unit property record: {text!r}")


def unit_of(cgroup_dir: str) -> str:
    """The systemd unit a kubelet/runtime cgroup directory is (`kubepods-besteffort-pod<uid>.slice`,
    `cri-containerd-<id>.scope`), or "" for a directory no systemd unit owns."""
    name = cgroup_dir.rstrip("/").rpartition("/")[2]
    return name if _UNIT.match(name) else ""


def systemd_quota_us(quota_us: int, period_us: int) -> int:
    """The CFS quota per period that systemd keeps for `quota_us` (CPUQuota= in whole percents) and writes back
    after a reload; -1 (unlimited) and a bad period stay as they are."""
    if quota_us < 0 or period_us <= 0:
        return quota_us
    per_sec = _per_sec(quota_us, period_us)
    return max(per_sec * period_us // 1_000_000, _QUOTA_MIN_US)


def _per_sec(quota_us: int, period_us: int) -> int:
    """Per second, to the nearest whole percent of a CPU (halves up; integers only, no float rounding surprises)."""
    step = _QUOTA_STEP_PER_SEC_US * period_us
    return (quota_us * 1_000_000 * 2 + step) // (2 * step) * _QUOTA_STEP_PER_SEC_US


def cpu_mask(cpus: str) -> bytes:
    """A cpuset list ("0-3,8") as systemd's AllowedCPUs bitmask: byte i bit j is CPU 8i+j."""
    ids: set[int] = set()
    for part in cpus.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if first < 0 or last < first or last > 1 << 16:
            raise ValueError(f"bad cpu list {cpus!r}")
        ids.update(range(first, last + 1))
    mask = bytearray((max(ids) // 8 + 1) if ids else 0)
    for cpu in ids:
        mask[cpu // 8] |= 1 << (cpu % 8)
    return bytes(mask)


def _limit(text: str) -> int:
    token = text.strip()
    if token in ("max", "-1"):
        return INFINITY
    number = int(token)
    # v1 shows "no limit" as a huge page-aligned number (PAGE_COUNTER_MAX pages).
    return INFINITY if number >= 1 << 62 else number


def properties_for(file: str, text: str, *, period_us: int = 100_000) -> tuple[UnitProperty, ...]:
    """The unit properties that hold `text` written to `file` (v1 or v2 name); () for a file systemd has no
    property for, or text that does not parse (the file write stands; only its mirror is skipped).
    `period_us`: the CFS period for a v1 `cpu.cfs_quota_us` (v2's `cpu.max` carries its own)."""
    try:
        return _properties(file, text.strip(), period_us)
    except ValueError:
        return ()


def _properties(file: str, text: str, period_us: int) -> tuple[UnitProperty, ...]:
    if file in _MEMORY_V2:
        return (UnitProperty(_MEMORY_V2[file], "t", _limit(text)),)
    if file == "cpu.weight":
        return (UnitProperty("CPUWeight", "t", int(text)),)
    if file == "cpu.max":
        quota, _, period = text.partition(" ")
        period_us = int(period) if period else period_us
        return _quota(-1 if quota == "max" else int(quota), period_us)
    if file == "cpu.cfs_quota_us":
        return _quota(int(text), period_us)
    if file == "cpu.cfs_period_us":
        return (UnitProperty("CPUQuotaPeriodUSec", "t", int(text)),)
    if file == "cpu.shares":
        return (UnitProperty("CPUShares", "t", int(text)),)
    if file == "memory.limit_in_bytes":
        return (UnitProperty("MemoryLimit", "t", _limit(text)),)
    if file == "cpuset.cpus":
        return (UnitProperty("AllowedCPUs", "ay", cpu_mask(text)),)
    if file == "cpuset.mems":
        return (UnitProperty("AllowedMemoryNodes", "ay", cpu_mask(text)),)
    if file == "io.weight":
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "default":
                return (UnitProperty("IOWeight", "t", int(value)),)
        return ()
    if file == "blkio.weight":
        return (UnitProperty("BlockIOWeight", "t", int(text)),)
    return ()


def _quota(quota_us: int, period_us: int) -> tuple[UnitProperty, ...]:
    if period_us <= 0:
        raise ValueError(f"bad CFS period {period_us}")
    per_sec = INFINITY if quota_us < 0 else _per_sec(quota_us, period_us)
    return (UnitProperty("CPUQuotaPerSecUSec", "t", per_sec), UnitProperty("CPUQuotaPeriodUSec", "t", period_us))
