"""Resource plans: what to write, independent of cgroup version and driver.

Hooks and QoS planners produce these; only the executor turns them into files. Values are in cgroup v1
units (shares, quota in µs, bytes, -1 = unlimited); the executor converts for v2.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from hookserver.resources import Resources

__all__ = [
    "ApplyReport",
    "CgroupResource",
    "CgroupWrite",
    "CookieOp",
    "FileWrite",
    "NetCommand",
    "ResourceExecutor",
    "ResourcePlan",
    "WriteResult",
    "writes_for_resources",
]


class CgroupResource(enum.Enum):
    """A cgroup knob by its v1 name. The executor maps it to the v2 file and value."""

    CPU_SHARES = "cpu.shares"
    CPU_CFS_QUOTA = "cpu.cfs_quota_us"
    CPU_CFS_PERIOD = "cpu.cfs_period_us"
    CPU_CFS_BURST = "cpu.cfs_burst_us"
    CPU_IDLE = "cpu.idle"
    CPU_BVT_WARP_NS = "cpu.bvt_warp_ns"
    CPUSET_CPUS = "cpuset.cpus"
    CPUSET_MEMS = "cpuset.mems"
    MEMORY_LIMIT = "memory.limit_in_bytes"
    MEMORY_MIN = "memory.min"
    MEMORY_LOW = "memory.low"
    MEMORY_HIGH = "memory.high"
    # Anolis / Alinux memcg QoS files (written only where the kernel has them).
    MEMORY_WMARK_RATIO = "memory.wmark_ratio"
    MEMORY_WMARK_SCALE_FACTOR = "memory.wmark_scale_factor"
    MEMORY_WMARK_MIN_ADJ = "memory.wmark_min_adj"
    MEMORY_PRIORITY = "memory.priority"
    MEMORY_USE_PRIORITY_OOM = "memory.use_priority_oom"
    MEMORY_OOM_GROUP = "memory.oom.group"
    BLKIO_WEIGHT = "blkio.weight"
    # blkio throttles: the value is one line `maj:min value` (0 lifts the limit); v2 writes `io.max`.
    BLKIO_READ_BPS = "blkio.throttle.read_bps_device"
    BLKIO_WRITE_BPS = "blkio.throttle.write_bps_device"
    BLKIO_READ_IOPS = "blkio.throttle.read_iops_device"
    BLKIO_WRITE_IOPS = "blkio.throttle.write_iops_device"
    # iocost (Anolis v1 `blkio.cost.*`, v2 `io.weight` / root `io.cost.*`).
    BLKIO_COST_WEIGHT = "blkio.cost.weight"
    BLKIO_COST_QOS = "blkio.cost.qos"
    BLKIO_COST_MODEL = "blkio.cost.model"


@dataclass(frozen=True, slots=True)
class CgroupWrite:
    """Set `resource` of the cgroup `cgroup_dir` (relative to the hierarchy root, e.g. the CRI cgroup
    parent `/kubepods/besteffort/pod<uid>` or the systemd slice name) to `value`.

    `owner` is the hook or reconciler that asked and `reason` why: both land in the audit.
    """

    cgroup_dir: str
    resource: CgroupResource
    value: int | str
    owner: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ResourcePlan:
    """Writes grouped by level, top (e.g. QoS dir) first. With `leveled`, growing limits are written
    top-down and shrinking ones bottom-up, so a parent is never below its child meanwhile.
    `cacheable` lets the executor skip a value it wrote recently and that has not changed.
    """

    levels: tuple[tuple[CgroupWrite, ...], ...]
    leveled: bool = False
    cacheable: bool = True

    @classmethod
    def single(cls, writes: Sequence[CgroupWrite], *, cacheable: bool = True) -> ResourcePlan:
        return cls(levels=(tuple(writes),), leveled=False, cacheable=cacheable)

    def all_writes(self) -> list[CgroupWrite]:
        return [w for level in self.levels for w in level]


_GONE_ERRORS = ("CgroupNotFoundError", "UnsupportedResourceError")  # how the executor reports such a write


@dataclass(frozen=True, slots=True)
class WriteResult:
    """One write attempt. `value` is the text meant for the file, `previous` what it held before and
    `held` what the kernel shows after the write (read back where it may clamp or round; else "")."""

    write: CgroupWrite
    path: str
    value: str
    ok: bool
    skipped: bool = False
    error: str = ""
    previous: str = ""
    held: str = ""

    @property
    def gone(self) -> bool:
        """The write met no cgroup (removed, not made yet) or no such file there (its controller not handed down):
        nothing to correct, unlike a value the kernel refused."""
        return self.error.startswith(_GONE_ERRORS)


@dataclass(frozen=True, slots=True)
class ApplyReport:
    results: tuple[WriteResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def errors(self) -> list[WriteResult]:
        return [r for r in self.results if not r.ok]


class ResourceExecutor(Protocol):
    """The single write choke point. `apply` never raises for a failed file: it reports it.

    It does raise PathEscapeError (before writing anything) when any write in the plan resolves
    outside the cgroup root, so a crafted plan is refused whole.
    """

    def apply(self, plan: ResourcePlan) -> ApplyReport: ...


def writes_for_resources(
    cgroup_dir: str, resources: Resources, *, owner: str, reason: str = ""
) -> list[CgroupWrite]:
    """The writes that carry a `Resources` value into one cgroup (shares, quota, memory, cpuset, bvt, idle)."""
    pairs: list[tuple[CgroupResource, int | str | None]] = [
        (CgroupResource.CPU_SHARES, resources.cpu_shares),
        (CgroupResource.CPU_CFS_PERIOD, resources.cpu_period_us),
        (CgroupResource.CPU_CFS_QUOTA, resources.cpu_quota_us),
        (CgroupResource.MEMORY_LIMIT, resources.memory_limit_bytes),
        (CgroupResource.CPUSET_CPUS, resources.cpuset_cpus),
        (CgroupResource.CPU_BVT_WARP_NS, resources.cpu_bvt_warp_ns),
        (CgroupResource.CPU_IDLE, resources.cpu_idle),
    ]
    return [
        CgroupWrite(cgroup_dir=cgroup_dir, resource=res, value=value, owner=owner, reason=reason)
        for res, value in pairs
        if value is not None and value != ""
    ]


def pod_level_writes(
    pod_dir: str, resources: Resources, *, sandbox_dir: str = "", owner: str, reason: str = ""
) -> list[CgroupWrite]:
    """PreRunPodSandbox's values as writes. Every value goes to the pod cgroup except `cpuset_cpus`, which is the
    sandbox (pause) container's, as in koordlet's pod response: it goes to `sandbox_dir` when the caller can
    name that cgroup, and nowhere otherwise (a pod-level cpuset would fence in every container of the pod)."""
    writes = writes_for_resources(pod_dir, resources, owner=owner, reason=reason)
    if resources.cpuset_cpus is None:
        return writes
    writes = [w for w in writes if w.resource is not CgroupResource.CPUSET_CPUS]
    if sandbox_dir and resources.cpuset_cpus:
        writes.append(CgroupWrite(cgroup_dir=sandbox_dir, resource=CgroupResource.CPUSET_CPUS,
                                  value=resources.cpuset_cpus, owner=owner, reason=reason))
    return writes


@dataclass(frozen=True, slots=True)
class FileWrite:
    """A node file that is not a cgroup, carried out by `executor.sysfiles.SystemFileExecutor`: write
    `value` to `root`/`path` (op "write"), or create / remove the directory `path` (a resctrl group).

    `compare`: "text" (whitespace-trimmed equality), "int", "schemata" (every `RES:dom=val` of the value is
    already in the file), or "always" (a tasks file: writing a pid moves it, reading shows all of them).
    `original` and `original_key` (section, key) drive the originals store (see executor/sysfiles.py).
    Root "proc" is `<proc-root>` itself, for per-process files (`<pid>/oom_score_adj`); "net_cls" the cgroup v1
    net_cls hierarchy (a pod's `net_cls.classid`, which no `ResourcePlan` resource covers).
    """

    root: Literal["proc_sys", "sys", "resctrl", "proc", "net_cls"]
    path: str
    value: str = ""
    op: Literal["write", "mkdir", "rmdir"] = "write"
    compare: Literal["text", "int", "schemata", "always"] = "text"
    owner: str = ""
    reason: str = ""
    original: Literal["", "record", "restore"] = ""
    original_key: tuple[str, str] = ("", "")

    def describe(self) -> dict[str, str]:
        return {"root": self.root, "path": self.path, "value": self.value, "op": self.op, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class NetCommand:
    """One `tc` command on a network interface (`args` after `tc`, e.g. `("class", "add", "dev", "eth0", ...)`),
    carried out by `executor.netcmd.TcExecutor`. The interface's traffic-control tree has no file to write, so a
    plan names the commands that build it; the planner reads the tree first and plans only what differs.

    `original` and `original_key` drive the originals store as for `FileWrite`: "record" saves `original_value`
    (what the interface had before the agent's first change) before the command runs, "restore" forgets it
    once the command went through.
    """

    args: tuple[str, ...]
    owner: str = ""
    reason: str = ""
    original: Literal["", "record", "restore"] = ""
    original_key: tuple[str, str] = ("", "")
    original_value: str = ""

    def describe(self) -> dict[str, str]:
        return {"command": "tc " + " ".join(self.args), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class CookieOp:
    """One core-scheduling change (`hookserver.system.coresched`), carried out by
    `executor.coresched.CookieExecutor`: "create" a new cookie for `pid` and give it to `to_pids`, "assign"
    `pid`'s cookie to `to_pids`, or "clear" `to_pids` back to the default cookie. `group` is the core-sched group
    the cookie stands for (shown in the audit)."""

    kind: Literal["create", "assign", "clear"]
    pid: int = 0
    to_pids: tuple[int, ...] = ()
    group: str = ""
    owner: str = ""
    reason: str = ""

    def describe(self) -> dict[str, str]:
        return {"op": self.kind, "pid": str(self.pid), "to": ",".join(map(str, self.to_pids)), "group": self.group,
                "reason": self.reason}
