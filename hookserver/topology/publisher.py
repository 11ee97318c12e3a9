"""Publishes the node's NodeResourceTopology: gather (sysfs, the store's pods and Node), build the document
(`hookserver.topology.report`), hand it to a sink, and only when its text changed.

Sinks: the informer's server-side-apply writer (`hookserver.informer.nrt`, apiserver mode, with the
`NodeTopologyReport` gate on) or `LocalTopologySink` (standalone, or the gate off: koordlet then keeps its NRT
locally only). Whatever the sink, the last document, the pools and the last delivery are what `hookctl topology`
shows, and `state_dir/noderesourcetopology.json` holds the document.

Each zone also carries the batch figures `zone_resources()` returns (the capacity publisher's, set by
`hookserver.capacity.numa_link.link_numa_zones`; none by default), so they go out at the next round after the
capacity tick that settled them.

The kubelet's CPU manager policy and the static policy's exclusive CPUs come from `<kubelet_root_dir>/
cpu_manager_state` each round (`hookserver.topology.kubelet_allocs`); where that file is missing or bad, the
`kubelet_cpu_manager_policy` setting, with one log line when that state begins and one when it ends.

With koordlet's `HugePageReport` gate on (`hugepage_report=True`; off by default, as in koordlet) each zone
carries its NUMA node's hugepage pools from sysfs (`hookserver.system.hugepages`); a pool file that does not
read counts no pages and is logged once.

Unchanged text is never re-sent (koordinator#2942). A failed delivery is retried at the next tick; its state is
logged when it changes, not at every tick, so a missing CRD is one warning, and its recovery one line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from hookserver.aio.periodic import run_every
from hookserver.errors import SystemFileError
from hookserver.store.state import StateStore
from hookserver.system.cpu_basic import read_cpu_basic_info
from hookserver.system.docsink import Delivery, DocumentDelivery, DocumentSink, LocalDocumentSink
from hookserver.system.hugepages import NumaHugePages, read_numa_hugepages
from hookserver.system.roots import SystemRoots
from hookserver.system.topology import read_cpu_topology, read_numa_meminfo
from hookserver.topology.kubelet_allocs import KubeletCpuManager, kubelet_cpu_manager
from hookserver.topology.pools import CpuPools, compute_pools
from hookserver.topology.report import build_report, canonical

__all__ = ["HUGEPAGE_REPORT_GATE", "Delivery", "LocalTopologySink", "TopologyPublisher", "TopologySink"]

# koordlet's gate for the hugepages in the NRT zones (off by default there, and here).
HUGEPAGE_REPORT_GATE = "HugePageReport"

log = logging.getLogger(__name__)


def _no_zone_resources() -> Mapping[str, Mapping[str, str]]:
    return {}


# The sink contract and the local sink are shared with the other node documents (hookserver/system/docsink.py).
TopologySink = DocumentSink
LocalTopologySink = LocalDocumentSink


class TopologyPublisher:
    def __init__(
        self,
        *,
        store: StateStore,
        roots: SystemRoots,
        node_name: str,
        sink: TopologySink,
        interval_s: float = 10.0,
        kubelet_cpu_manager_policy: str = "none",
        kubelet_root_dir: str = "",
        hugepage_report: bool = False,
        document_path: str = "",
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._roots = roots
        self._node_name = node_name
        self.sink = sink
        self.interval_s = interval_s
        self._policy = kubelet_cpu_manager_policy
        self._kubelet_root_dir = kubelet_root_dir  # "": the setting only (no checkpoint read)
        self.kubelet: KubeletCpuManager | None = None
        self.hugepage_report = hugepage_report
        self.hugepages: tuple[NumaHugePages, ...] = ()
        self._hugepage_problems: tuple[str, ...] = ()
        self._ready = ready
        self.delivery = DocumentDelivery(sink, what=f"NodeResourceTopology {node_name}", logger=log,
                                         document_path=document_path, clock=clock)
        self.document: dict[str, Any] = {}
        self.pools: CpuPools | None = None
        # zone name -> resource -> quantity, added to the zones (the batch capacity per NUMA zone)
        self.zone_resources: Callable[[], Mapping[str, Mapping[str, str]]] = _no_zone_resources
        self.ticks = 0

    @property
    def last_result(self) -> str:
        return self.delivery.last_result

    @property
    def last_detail(self) -> str:
        return self.delivery.last_detail

    def tick(self) -> str:
        """One round; returns the result: ok | unchanged | waiting | crd_missing | conflict | forbidden | error."""
        self.ticks += 1
        if not self._ready():
            return self.delivery.record("waiting", "informer's first sync not done")
        try:
            cpus = read_cpu_topology(self._roots)
            numa = read_numa_meminfo(self._roots)
            basic = read_cpu_basic_info(self._roots)
        except SystemFileError as exc:
            return self.delivery.record("error", f"topology unreadable: {exc}")
        snap = self._store.snapshot()
        annotations = snap.node.annotations if snap.node is not None else {}
        hugepages = self._read_hugepages() if self.hugepage_report else None
        kubelet = self._kubelet_cpu_manager(snap.pods)
        pools = compute_pools(cpus, snap.pods, annotations, kubelet_allocated=kubelet.allocated_cpus)
        document = build_report(node_name=self._node_name, cpus=cpus, numa=numa, basic=basic, pools=pools,
                                node_annotations=annotations, kubelet_cpu_manager_policy=kubelet.policy,
                                zone_resources=self.zone_resources(),
                                node_uid=snap.node.uid if snap.node is not None else "",
                                pod_cpu_allocs=kubelet.allocs_json(), hugepages=hugepages)
        self.document, self.pools = document, pools
        return self.delivery.deliver(document, canonical(document))

    def _read_hugepages(self) -> tuple[NumaHugePages, ...]:
        pools, problems = read_numa_hugepages(self._roots)
        if problems and problems != self._hugepage_problems:
            log.warning("hugepages: %s (counted as no pages)", "; ".join(problems))
        self._hugepage_problems = problems
        self.hugepages = pools
        return pools

    def _kubelet_cpu_manager(self, pods: Mapping[str, Any]) -> KubeletCpuManager:
        """This round's kubelet CPU manager view; a change of its problem is logged once (a bad checkpoint
        is a warning, a missing one a line of information), and so is its recovery."""
        current = kubelet_cpu_manager(self._kubelet_root_dir, fallback_policy=self._policy, pods=pods)
        before = self.kubelet
        if current.problem != (before.problem if before is not None else ""):
            if current.problem:
                log.log(logging.INFO if current.file_missing else logging.WARNING,
                        "kubelet CPU manager: %s", current.problem)
            else:
                log.info("kubelet CPU manager: policy %s from %s", current.policy, current.source)
        self.kubelet = current
        return current

    async def run(self, stop: asyncio.Event) -> None:
        async def tick() -> None:
            await asyncio.to_thread(self.tick)

        await run_every(self.interval_s, tick, stop, name="topology")

    def view(self) -> dict[str, Any]:
        """`hookctl topology`: the document, the pools and the last delivery."""
        return {
            "node": self._node_name,
            **self.delivery.view(),
            "ticks": self.ticks,
            "pools": self.pools.describe() if self.pools is not None else {},
            "kubelet_cpu_manager": self.kubelet.describe() if self.kubelet is not None else {},
            "hugepages": {
                "reported": self.hugepage_report,
                "pools": [{"node": p.node, "resource": p.resource, "total": p.total, "free": p.free}
                          for p in self.hugepages],
            },
            "document": self.document,
        }
