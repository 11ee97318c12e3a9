"""A scripted node for capacity tests: a store with a Node, pods and collector samples on a fake clock, and a sink
that records writes and answers what a test tells it to (ok, a conflict, an outage)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from hookserver.capacity import CapacityDelivery, CapacityPublisher, CapacitySettings
from hookserver.koord_resources import PUBLISHED_RESOURCES
from hookserver.quantity import parse_quantity
from hookserver.slo.colocation import ColocationStrategy, ResolvedColocation
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.state import StateStore
from hookserver.store.timeseries import make_labels

GI = 1 << 30
T0 = 1_800_000_000.0


def _milli(text: str) -> int:
    return parse_quantity(text).milli_value()


def _bytes(text: str) -> int:
    return parse_quantity(text).value()


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def colocation(enabled: bool = True, **fields: Any) -> ResolvedColocation:
    return ResolvedColocation(strategy=ColocationStrategy.model_validate({"enable": enabled, **fields}),
                              enabled=enabled, layers=("test",))


def ls_pod(name: str, *, cpu: str = "1", memory: str = "1Gi", priority_class: str = "koord-prod") -> PodRecord:
    return PodRecord(uid=f"uid-{name}", namespace="ns", name=name, phase="Running", kube_qos="Burstable",
                     labels=MappingProxyType({"koordinator.sh/priority-class": priority_class}),
                     container_specs=MappingProxyType({"main": (MappingProxyType({"cpu": cpu, "memory": memory}),
                                                                MappingProxyType({}))}))


@dataclass
class FakeSink:
    """Records every call; `answers` (a queue of results) decides the next ones, then `default`."""

    target: str = "apiserver"
    where: str = "nodes/node-a/status"
    node: Any = None  # a World: a successful write updates its Node record, as the informer's watch would
    answers: list[CapacityDelivery] = field(default_factory=list)
    calls: list[tuple[str, dict[str, str], bool]] = field(default_factory=list)
    manager: str = "hookserver"

    def _answer(self) -> CapacityDelivery:
        return self.answers.pop(0) if self.answers else CapacityDelivery("ok")

    def apply(self, values: Mapping[str, str], *, force: bool = False) -> CapacityDelivery:
        self.calls.append(("apply", dict(values), force))
        answer = self._answer()
        if answer.result == "ok" and self.node is not None:
            self.node.set_offer(dict(values), owner=self.manager)
        return answer

    def withdraw(self) -> CapacityDelivery:
        self.calls.append(("withdraw", {}, False))
        answer = self._answer()
        if answer.result == "ok" and self.node is not None:
            self.node.set_offer({}, owner=self.manager)
        return answer


class World:
    """One node: 8 cores / 32 GiB, kubelet reserving 500m / 2 GiB; a clock; collector samples on demand."""

    def __init__(self, *, node_cpu: str = "8", node_memory: str = "32Gi", reserved_cpu_milli: int = 500,
                 reserved_memory: int = 2 * GI) -> None:
        self.clock = Clock()
        self.store = StateStore(clock=self.clock)
        self.store.series.configure(retention_s=1800.0)
        self.node = NodeRecord(name="node-a", capacity=MappingProxyType({"cpu": node_cpu, "memory": node_memory}),
                               allocatable=MappingProxyType({"cpu": f"{_milli(node_cpu) - reserved_cpu_milli}m",
                                                            "memory": str(_bytes(node_memory) - reserved_memory)}),
                               resource_version="1")
        self.store.set_node(self.node)
        self.store.set_colocation(colocation())
        self.sink = FakeSink(node=self)
        self.pod_usage: dict[str, tuple[float, float]] = {}
        self.system = (0.5, 1.0 * GI)

    def set_offer(self, values: Mapping[str, str], *, owner: str) -> None:
        allocatable = {k: v for k, v in self.node.allocatable.items() if k not in PUBLISHED_RESOURCES}
        allocatable.update(values)
        owners = {k: v for k, v in self.node.published_owners.items() if k not in PUBLISHED_RESOURCES}
        owners.update({r: (owner,) for r in values})
        self.node = replace(self.node, allocatable=MappingProxyType(allocatable),
                            capacity=MappingProxyType({**{k: v for k, v in self.node.capacity.items()
                                                          if k not in PUBLISHED_RESOURCES}, **values}),
                            published_owners=MappingProxyType(owners),
                            resource_version=str(int(self.node.resource_version) + 1))
        self.store.set_node(self.node)

    def other_writer(self, manager: str, values: Mapping[str, str]) -> None:
        """Another field manager writes the fields (koord-manager's Update takes them over)."""
        self.set_offer(values, owner=manager)

    def add_pod(self, pod: PodRecord, cpu_cores: float, memory_bytes: float) -> None:
        self.store.upsert_pod(pod)
        self.pod_usage[pod.uid] = (cpu_cores, memory_bytes)

    def sample(self, seconds: float = 1.0, step: float = 1.0) -> None:
        """Advance the clock by `seconds`, taking one collector sample every `step` seconds."""
        end = self.clock.t + seconds
        while self.clock.t < end - 1e-9:
            self.clock.t += step
            pods_cpu = sum(c for c, _ in self.pod_usage.values())
            pods_mem = sum(m for _, m in self.pod_usage.values())
            node_labels = make_labels(node="node-a")
            items: list[tuple[Any, float]] = [
                (("node_cpu_usage", node_labels), self.system[0] + pods_cpu),
                (("node_memory_usage", node_labels), self.system[1] + pods_mem),
                (("system_cpu_usage", node_labels), self.system[0]),
                (("system_memory_usage", node_labels), self.system[1]),
            ]
            for uid, (cpu, mem) in self.pod_usage.items():
                labels = make_labels(pod=uid, qos="LS", priority="")
                items += [(("pod_cpu_usage", labels), cpu), (("pod_memory_usage", labels), mem)]
            self.store.series.append_many(self.clock.t, items, interval_s=step)

    def publisher(self, **settings: Any) -> CapacityPublisher:
        publisher = CapacityPublisher(
            store=self.store, settings=CapacitySettings(**{"warmup_s": 10.0, **settings}), sink=self.sink,
            standalone=False, clock=self.clock,
        )
        return publisher
