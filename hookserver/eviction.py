"""What an eviction asks and what came of it: the contract between the QoS reconcilers, which decide whom
to evict, and the backends that carry it out (the Eviction API in `hookserver.informer.evictor`, the
standalone killer in `hookserver.executor.kill`, report-only in `qos.framework.evictions`).

Outside the area layers on purpose (like `hookserver.resources`): qos, informer and executor all speak it
and may not import each other. Pure values, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

__all__ = [
    "EVICT_BY_BE_CPU_SATISFACTION",
    "EVICT_BY_CPU_ALLOCATABLE",
    "EVICT_BY_MEMORY_ALLOCATABLE",
    "EVICT_BY_NODE_CPU_USAGE",
    "EVICT_BY_NODE_MEMORY_USAGE",
    "EvictionBackend",
    "EvictionRequest",
    "EvictionResult",
    "EvictionStatus",
]

# koordlet's reason names (resourceexecutor): Event messages and the koordlet_pod_eviction{reason} label.
EVICT_BY_NODE_MEMORY_USAGE = "EvictPodByNodeMemoryUsage"
EVICT_BY_BE_CPU_SATISFACTION = "EvictPodByBECPUSatisfaction"
# The v1.7/v1.8 modes (koordlet words their messages "trigger by koordlet feature <gate>"; these names keep
# one reason per mode in Events and the eviction counter).
EVICT_BY_NODE_CPU_USAGE = "EvictPodByNodeCPUUsage"
EVICT_BY_CPU_ALLOCATABLE = "EvictPodByCPUAllocatable"
EVICT_BY_MEMORY_ALLOCATABLE = "EvictPodByMemoryAllocatable"

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    """Evict one pod. `message` is the human sentence with the numbers (it goes into the Event);
    `reason` is koordlet's reason name; `reconciler` who asked. `cgroup_dirs` are the pod's cgroup dirs
    (relative to each hierarchy root), for a backend that kills processes instead of calling the API."""

    pod_uid: str
    namespace: str
    name: str
    reason: str
    message: str
    reconciler: str = ""
    cgroup_dirs: tuple[str, ...] = ()
    grace_period_s: int | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class EvictionStatus(enum.Enum):
    EVICTED = "evicted"  # the apiserver accepted the eviction (or the processes were killed)
    KILLED = "killed"  # standalone --evict-standalone=kill
    REPORTED = "reported"  # standalone: decided and recorded, nothing done
    DRY_RUN = "dry_run"  # --qos-dry-run or a reconciler's dry run: nothing done
    REFUSED = "refused"  # HTTP 429: a PodDisruptionBudget forbids it now; retried on a later round
    ALREADY_EVICTED = "already_evicted"  # this agent evicted it within the cool-down: not again
    TERMINATING = "terminating"  # the pod already has a deletionTimestamp (or its phase is final)
    NOT_FOUND = "not_found"  # the pod is gone
    FAILED = "failed"  # anything else; `error` says what


@dataclass(frozen=True, slots=True)
class EvictionResult:
    request: EvictionRequest
    status: EvictionStatus
    detail: str = ""
    error: str = ""
    api_version: str = ""  # policy/v1 or policy/v1beta1 when the Eviction API was used
    event_created: bool = False

    @property
    def done(self) -> bool:
        """The pod is on its way out because of us (counts towards the release and the cool-down)."""
        return self.status in (EvictionStatus.EVICTED, EvictionStatus.KILLED)


class EvictionBackend(Protocol):
    """Carries out one eviction. Never raises for an apiserver or kernel failure: reports it."""

    @property
    def kind(self) -> str:
        """For `hookctl qos`: "api", "kill", "report"."""
        ...

    def evict(self, request: EvictionRequest) -> EvictionResult: ...
