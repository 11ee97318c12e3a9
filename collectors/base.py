"""What every collector shares: the `Collector` protocol, the per-cycle context and the shared usage board.

A collector implements `collect(ctx)`: it reads files through `hookserver.system`, keeps whatever previous
counters it needs for rates, and emits samples into `ctx`. The scheduler times each call, appends the
cycle's samples to the time-series store in one batch, and counts failures. `probe()` says, once at start,
whether the collector can work on this host ("" when it can, else the reason it is disabled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hookserver.store.state import StoreSnapshot
from hookserver.store.timeseries import KeyLike, Labels

from collectors.targets import Targets

__all__ = ["BaseCollector", "Collector", "CycleContext", "SharedUsage"]


@dataclass(slots=True)
class SharedUsage:
    """Totals one collector measures and a later one needs (koordlet's `sharedState`).

    Written and read only on the collectors' single worker thread, in cycle order: node and pod usage
    first, then host applications, then system = node - pods - host applications.
    """

    ncpu: int = 0
    node_cpu: float | None = None
    node_memory: float | None = None
    node_at: float = 0.0
    pods_cpu: float | None = None
    pods_memory: float | None = None
    pods_at: float = 0.0
    pod_cpu: dict[str, float] = field(default_factory=dict)
    host_apps_cpu: float = 0.0
    host_apps_memory: float = 0.0
    host_apps_at: float = 0.0
    # system = node − pods − host apps, for numa_resource's per-NUMA share of it.
    system_cpu: float | None = None
    system_at: float = 0.0


@dataclass(slots=True)
class CycleContext:
    """One run of one interval group. `now` stamps the samples; `mono` measures rates."""

    now: float
    mono: float
    snapshot: StoreSnapshot
    targets: Targets
    shared: SharedUsage
    node_labels: Labels
    samples: list[tuple[KeyLike, float]] = field(default_factory=list)
    missing: int = 0
    errors: list[str] = field(default_factory=list)
    # Values that are not time series (topology, GPU inventory), stored whole with `put_static`.
    statics: dict[str, Any] = field(default_factory=dict)

    def emit(self, metric: str, labels: Labels, value: float) -> None:
        """Queue one sample. `labels` must be canonical (`make_labels`: sorted, no empty values)."""
        self.samples.append(((metric, labels), value))

    def note_error(self, message: str) -> None:
        """A per-target failure (one pod's file did not parse): counted, the rest of the cycle goes on."""
        if len(self.errors) < 100:
            self.errors.append(message)


class Collector(Protocol):
    name: str

    def probe(self) -> str:
        """'' when the collector can run on this host, else why it is disabled (not an error)."""
        ...

    def collect(self, ctx: CycleContext) -> None: ...

    def close(self) -> None: ...


class BaseCollector:
    """Defaults for the optional parts of the protocol."""

    name = "base"

    def probe(self) -> str:
        return ""

    def close(self) -> None:
        return None
