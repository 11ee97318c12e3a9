"""`resourceQOSStrategy`: per-class CPU, memory, resctrl, blkio and network QoS.

Every class starts disabled. Values that apply once a feature is enabled differ per class (reference §5.5,
§5.8, §7): group identity LSR 2 / LS 2 / BE −1 / SYSTEM 0, BE wmarkMinAdj 50 against −25, BE L3 cache
0–30 % against 0–100 %. So a class's defaults are laid under whatever the input gives for that class,
before validation, and a partial class (`beClass: {memoryQOS: {enable: true}}`) keeps its own defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from hookserver.slo._base import SLOModel, canonical_json
from hookserver.slo.merge import merge_json

__all__ = [
    "BlkIOQOS",
    "BlockCfg",
    "CPUQOS",
    "IOCfg",
    "MemoryQOS",
    "NetworkQOS",
    "ResctrlQOS",
    "ResourceQOS",
    "ResourceQOSPolicies",
    "ResourceQOSStrategy",
    "class_defaults",
]


class CPUQOS(SLOModel):
    enable: bool = False
    group_identity: int | None = Field(default=None, ge=-1, le=2, alias="groupIdentity")
    sched_idle: int | None = Field(default=None, ge=0, le=1, alias="schedIdle")
    core_expeller: bool | None = Field(default=None, alias="coreExpeller")


class MemoryQOS(SLOModel):
    enable: bool = False
    min_limit_percent: int = Field(default=0, ge=0, le=100, alias="minLimitPercent")
    low_limit_percent: int = Field(default=0, ge=0, le=100, alias="lowLimitPercent")
    throttling_percent: int = Field(default=0, ge=0, le=100, alias="throttlingPercent")
    wmark_ratio: int = Field(default=0, ge=0, le=100, alias="wmarkRatio")
    wmark_scale_permill: int = Field(default=0, ge=0, le=1000, alias="wmarkScalePermill")
    wmark_min_adj: int = Field(default=0, ge=-25, le=50, alias="wmarkMinAdj")
    priority_enable: int = Field(default=0, ge=0, le=1, alias="priorityEnable")
    priority: int = Field(default=0, ge=0, le=12)
    oom_kill_group: int = Field(default=0, ge=0, le=1, alias="oomKillGroup")


class ResctrlQOS(SLOModel):
    enable: bool = False
    cat_range_start_percent: int = Field(default=0, ge=0, le=100, alias="catRangeStartPercent")
    cat_range_end_percent: int = Field(default=100, ge=0, le=100, alias="catRangeEndPercent")
    mba_percent: int = Field(default=100, ge=0, le=100, alias="mbaPercent")

    @model_validator(mode="after")
    def _range(self) -> ResctrlQOS:
        if self.cat_range_start_percent > self.cat_range_end_percent:
            raise ValueError(
                f"catRangeStartPercent ({self.cat_range_start_percent}) must not exceed "
                f"catRangeEndPercent ({self.cat_range_end_percent})"
            )
        return self


# What the kernel takes for each IOCfg value (inclusive; None: no upper bound).
_IO_RANGES: tuple[tuple[str, str, int, int | None], ...] = (
    ("io_weight_percent", "ioWeightPercent", 1, 100),
    ("read_iops", "readIOPS", 0, None), ("write_iops", "writeIOPS", 0, None),
    ("read_bps", "readBPS", 0, None), ("write_bps", "writeBPS", 0, None),
    ("read_latency", "readLatency", 0, None), ("write_latency", "writeLatency", 0, None),
    ("read_latency_percent", "readLatencyPercent", 0, 100), ("write_latency_percent", "writeLatencyPercent", 0, 100),
)


class IOCfg(SLOModel):
    """Per-device throttles; 0 means unlimited. Latencies are in microseconds (iocost qos).

    koordinator puts no `validate:` tag on these, so any integer is accepted (a NodeSLO is never refused for
    one): koordlet writes a value the kernel refuses and fails that write every round; `checked()` leaves such
    a value out instead, with a note, and the block's other values still apply."""

    io_weight_percent: int | None = Field(default=None, alias="ioWeightPercent")
    read_iops: int | None = Field(default=None, alias="readIOPS")
    write_iops: int | None = Field(default=None, alias="writeIOPS")
    read_bps: int | None = Field(default=None, alias="readBPS")
    write_bps: int | None = Field(default=None, alias="writeBPS")
    enable_user_model: bool | None = Field(default=None, alias="enableUserModel")
    read_latency: int | None = Field(default=None, alias="readLatency")
    write_latency: int | None = Field(default=None, alias="writeLatency")
    read_latency_percent: int | None = Field(default=None, alias="readLatencyPercent")
    write_latency_percent: int | None = Field(default=None, alias="writeLatencyPercent")

    def checked(self) -> tuple[IOCfg, tuple[str, ...]]:
        """This config with every value the kernel would refuse unset, and one note per value left out."""
        unset: dict[str, None] = {}
        notes: list[str] = []
        for name, wire, low, high in _IO_RANGES:
            value = getattr(self, name)
            if value is not None and (value < low or (high is not None and value > high)):
                unset[name] = None
                bound = f"[{low}, {high}]" if high is not None else f">= {low}"
                notes.append(f"{wire} {value} is outside what the kernel takes ({bound}): not written")
        return (self.model_copy(update=unset) if unset else self), tuple(notes)


class BlockCfg(SLOModel):
    """`type` is a plain string in koordinator: koordlet knows device, volumegroup and podvolume and skips a
    block of any other type with an error, so the block is skipped here too (qos.snapshot.kernel_reader)."""

    name: str
    type: str
    io_cfg: IOCfg = Field(default_factory=IOCfg, alias="ioCfg")


class BlkIOQOS(SLOModel):
    enable: bool = False
    blocks: tuple[BlockCfg, ...] = ()


class NetworkQOS(SLOModel):
    """Bandwidths as int (bits/s) or a quantity/percentage string, as Kubernetes IntOrString."""

    enable: bool = False
    ingress_request: int | str | None = Field(default=None, alias="ingressRequest")
    ingress_limit: int | str | None = Field(default=None, alias="ingressLimit")
    egress_request: int | str | None = Field(default=None, alias="egressRequest")
    egress_limit: int | str | None = Field(default=None, alias="egressLimit")


class ResourceQOS(SLOModel):
    cpu_qos: CPUQOS = Field(default_factory=CPUQOS, alias="cpuQOS")
    memory_qos: MemoryQOS = Field(default_factory=MemoryQOS, alias="memoryQOS")
    blkio_qos: BlkIOQOS = Field(default_factory=BlkIOQOS, alias="blkioQOS")
    resctrl_qos: ResctrlQOS = Field(default_factory=ResctrlQOS, alias="resctrlQOS")
    network_qos: NetworkQOS = Field(default_factory=NetworkQOS, alias="networkQOS")


class ResourceQOSPolicies(SLOModel):
    """Plain strings in koordinator (no `validate:` tag). koordlet's group identity rule runs for
    `groupIdentity` or an empty policy, core scheduling for `coreSched`, neither for anything else; the net
    policies are `tc` and `terway-qos` (koordinator's spelling)."""

    cpu_policy: str = Field(default="groupIdentity", alias="cpuPolicy")
    net_qos_policy: str = Field(default="tc", alias="netQOSPolicy")

    def uses_group_identity(self) -> bool:
        """koordlet's `isPolicyGroupIdentity` (`runtimehooks/hooks/groupidentity/rule.go`)."""
        return self.cpu_policy in ("", "groupIdentity")


def _memory_defaults(wmark_min_adj: int) -> dict[str, Any]:
    return {
        "enable": False, "minLimitPercent": 0, "lowLimitPercent": 0, "throttlingPercent": 0, "wmarkRatio": 95,
        "wmarkScalePermill": 20, "wmarkMinAdj": wmark_min_adj, "priorityEnable": 0, "priority": 0,
        "oomKillGroup": 0,
    }


_CLASS_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "lsrClass": {
        "cpuQOS": {"enable": False, "groupIdentity": 2, "schedIdle": 0, "coreExpeller": True},
        "memoryQOS": _memory_defaults(-25),
        "resctrlQOS": {"enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False},
    },
    "lsClass": {
        "cpuQOS": {"enable": False, "groupIdentity": 2, "schedIdle": 0, "coreExpeller": True},
        "memoryQOS": _memory_defaults(-25),
        "resctrlQOS": {"enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False},
    },
    "beClass": {
        "cpuQOS": {"enable": False, "groupIdentity": -1, "schedIdle": 0, "coreExpeller": False},
        "memoryQOS": _memory_defaults(50),
        "resctrlQOS": {"enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": 30, "mbaPercent": 100},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False},
    },
    "systemClass": {
        "cpuQOS": {"enable": False, "groupIdentity": 0, "schedIdle": 0, "coreExpeller": False},
        "memoryQOS": {"enable": False},
        "resctrlQOS": {"enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False},
    },
}


def class_defaults(wire_name: str) -> dict[str, Any]:
    """Koordinator's defaults for one class (`lsrClass`, `lsClass`, `beClass`, `systemClass`), as JSON."""
    return merge_json({}, _CLASS_DEFAULTS[wire_name])


class ResourceQOSStrategy(SLOModel):
    policies: ResourceQOSPolicies = Field(default_factory=ResourceQOSPolicies)
    lsr_class: ResourceQOS = Field(default_factory=lambda: ResourceQOS.model_validate({}), alias="lsrClass")
    ls_class: ResourceQOS = Field(default_factory=lambda: ResourceQOS.model_validate({}), alias="lsClass")
    be_class: ResourceQOS = Field(default_factory=lambda: ResourceQOS.model_validate({}), alias="beClass")
    system_class: ResourceQOS = Field(default_factory=lambda: ResourceQOS.model_validate({}), alias="systemClass")
    cgroup_root: ResourceQOS | None = Field(default=None, alias="cgroupRoot")

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        for wire_name, defaults in _CLASS_DEFAULTS.items():
            given = data.get(wire_name)
            if given is None:
                data[wire_name] = merge_json({}, defaults)
            elif isinstance(given, Mapping):
                data[wire_name] = merge_json(defaults, canonical_json(ResourceQOS, given))
            # anything else is left for validation to reject with its path
        return data

    def be_sched_idle(self) -> bool:
        """koordlet's core-sched `IsCPUIdle` for the BE class: `cpuPolicy: coreSched` and beClass `schedIdle: 1`
        (BE pods' cgroups get cpu.idle=1, and then their cpu.shares cannot be written)."""
        return self.policies.cpu_policy == "coreSched" and self.be_class.cpu_qos.sched_idle == 1

    def for_class(self, qos: str) -> ResourceQOS | None:
        """The class config for a koordinator.sh/qosClass value (LSE shares LSR's, as in Koordinator)."""
        return {
            "LSE": self.lsr_class, "LSR": self.lsr_class, "LS": self.ls_class, "BE": self.be_class,
            "SYSTEM": self.system_class,
        }.get(qos)

