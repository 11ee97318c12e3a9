"""Every cgroup file the executor writes, by plan resource. A resource without a knob cannot be planned."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from hookserver.executor.blkio import BLKIO_KNOBS
from hookserver.executor.cpu import CPU_KNOBS
from hookserver.executor.cpuset import CPUSET_KNOBS
from hookserver.executor.knob import Knob
from hookserver.executor.memory import MEMORY_KNOBS
from hookserver.executor.plan import CgroupResource

__all__ = ["KNOBS", "knob_for"]

KNOBS: Mapping[CgroupResource, Knob] = MappingProxyType(
    {k.resource: k for k in (*CPU_KNOBS, *MEMORY_KNOBS, *CPUSET_KNOBS, *BLKIO_KNOBS)}
)


def knob_for(resource: CgroupResource) -> Knob:
    return KNOBS[resource]
