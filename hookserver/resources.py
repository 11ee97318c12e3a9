"""Linux resources in cgroup v1 units: the value every layer passes around (hooks, store, executor)."""

from __future__ import annotations

from dataclasses import dataclass

from hookserver.fastinit import fast_frozen_init

__all__ = ["Resources"]


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Resources:
    """Linux resources in cgroup v1 units. None means "not set by anyone": leave it alone.

    cpu_quota_us and memory_limit_bytes use -1 for unlimited, as the CRI and koordlet do; the executor
    maps that to `max` on cgroup v2. `cpu_bvt_warp_ns` and `cpu_idle` are koordlet's "ext" values (CPUBvt,
    CPUIdle): pod-level only, written to the pod cgroup by hookserver itself, never part of a CRI or NRI
    answer (neither protocol has a field for them).
    """

    cpu_shares: int | None = None
    cpu_quota_us: int | None = None
    cpu_period_us: int | None = None
    memory_limit_bytes: int | None = None
    cpuset_cpus: str | None = None
    cpuset_mems: str | None = None
    cpu_bvt_warp_ns: int | None = None
    cpu_idle: int | None = None

    def merged_over(self, base: Resources) -> Resources:
        """Fields set here win; unset fields keep `base`'s value."""
        return Resources(
            cpu_shares=self.cpu_shares if self.cpu_shares is not None else base.cpu_shares,
            cpu_quota_us=self.cpu_quota_us if self.cpu_quota_us is not None else base.cpu_quota_us,
            cpu_period_us=self.cpu_period_us if self.cpu_period_us is not None else base.cpu_period_us,
            memory_limit_bytes=(
                self.memory_limit_bytes if self.memory_limit_bytes is not None else base.memory_limit_bytes
            ),
            cpuset_cpus=self.cpuset_cpus if self.cpuset_cpus is not None else base.cpuset_cpus,
            cpuset_mems=self.cpuset_mems if self.cpuset_mems is not None else base.cpuset_mems,
            cpu_bvt_warp_ns=self.cpu_bvt_warp_ns if self.cpu_bvt_warp_ns is not None else base.cpu_bvt_warp_ns,
            cpu_idle=self.cpu_idle if self.cpu_idle is not None else base.cpu_idle,
        )

    def is_empty(self) -> bool:
        # Spelled out: asked for every decision of a sync (a generator over the slots cost 3x as much).
        return (
            self.cpu_shares is None and self.cpu_quota_us is None and self.cpu_period_us is None
            and self.memory_limit_bytes is None and self.cpuset_cpus is None and self.cpuset_mems is None
            and self.cpu_bvt_warp_ns is None and self.cpu_idle is None
        )

    def as_dict(self) -> dict[str, int | str]:
        """Only the fields that are set, for audit records and debug output."""
        return {name: getattr(self, name) for name in self.__slots__ if getattr(self, name) is not None}
