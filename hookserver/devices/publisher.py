"""Publishes the node's Device object: gather (the GPU collector's inventory in the store, RDMA from sysfs),
build the document (`hookserver.devices.report`), hand it to a sink only when its text changed, then the GPU
and RDMA capacity and labels on the Node (`hookserver.devices.node_resources`).

Sinks: the informer's server-side-apply writer (`hookserver.informer.device`, apiserver mode) or
`LocalDeviceSink` (standalone). `state_dir/device.json` always holds the last document, whatever the sink.

Health reaches the object within one interval: a GPU the collector marks unhealthy (an XID koordlet counts as
fatal, a device that stopped answering) or an RDMA port that left ACTIVE changes the document's text, and
changed text is sent at that tick. The unhealthy condition's lastTransitionTime is the first tick that saw it,
kept here, so an unchanged state gives unchanged text and no write (koordinator#2942's lesson).

A failed delivery is retried at the next tick; its state is logged when it changes, so a missing CRD is one
warning (and its recovery one line), not a line per tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from hookserver.aio.periodic import run_every
from hookserver.devices.node_resources import NodeDeviceResources
from hookserver.devices.rdma import RdmaDiscovery
from hookserver.devices.report import GpuInfo, build_device, canonical
from hookserver.system.docsink import Delivery, DocumentDelivery, DocumentSink, LocalDocumentSink

__all__ = ["DeviceDelivery", "DevicePublisher", "DeviceSink", "LocalDeviceSink", "rfc3339"]

log = logging.getLogger(__name__)


# The sink contract and the local sink are shared with the other node documents (hookserver/system/docsink.py).
DeviceDelivery = Delivery
DeviceSink = DocumentSink
LocalDeviceSink = LocalDocumentSink


def rfc3339(ts: float) -> str:
    """metav1.Time's wire form: whole seconds, UTC, `Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class DevicePublisher:
    def __init__(
        self,
        *,
        node_name: str,
        sink: DeviceSink,
        gpus: Callable[[], Sequence[GpuInfo]] = tuple,
        driver_version: Callable[[], str] = str,
        rdma: Callable[[], RdmaDiscovery] | None = None,
        node_uid: Callable[[], str] = str,
        node_resources: NodeDeviceResources | None = None,
        interval_s: float = 10.0,
        document_path: str = "",
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"devices: interval must be positive, got {interval_s}")
        self._node_name = node_name
        self.sink = sink
        self._gpus = gpus
        self._driver_version = driver_version
        self._rdma = rdma
        self._node_uid = node_uid
        self.node_resources = node_resources
        self.interval_s = interval_s
        self._ready = ready
        self._clock = clock
        self.delivery = DocumentDelivery(sink, what=f"Device {node_name}", logger=log, document_path=document_path,
                                         clock=clock)
        self._unhealthy_since: dict[str, str] = {}
        self._problems: tuple[str, ...] = ()
        self.document: dict[str, Any] = {}
        self.ticks = 0

    @property
    def last_result(self) -> str:
        return self.delivery.last_result

    @property
    def last_detail(self) -> str:
        return self.delivery.last_detail

    def tick(self) -> str:
        """One round; returns: ok | unchanged | waiting | crd_missing | conflict | forbidden | error."""
        self.ticks += 1
        if not self._ready():
            return self.delivery.record("waiting", "informer's first sync not done")
        try:
            return self._tick()
        except Exception as exc:  # noqa: BLE001 - a failed round is shown and logged once; the next one tries again
            return self.delivery.record("error", f"round failed: {type(exc).__name__}: {exc}")

    def _tick(self) -> str:
        now = self._clock()
        gpus = list(self._gpus())
        discovery = self._rdma() if self._rdma is not None else RdmaDiscovery()
        self._note_problems(discovery.problems)
        unhealthy = {g.uuid for g in gpus if not g.healthy}
        self._unhealthy_since = {u: t for u, t in self._unhealthy_since.items() if u in unhealthy}
        for uuid in sorted(unhealthy - self._unhealthy_since.keys()):
            self._unhealthy_since[uuid] = rfc3339(now)
        document = build_device(node_name=self._node_name, node_uid=self._node_uid(), gpus=gpus,
                                driver_version=self._driver_version(), rdma=discovery.devices,
                                unhealthy_since=self._unhealthy_since)
        self.document = document
        result = self.delivery.deliver(document, canonical(document))
        if self.node_resources is not None:
            self.node_resources.step(document)
        return result

    def _note_problems(self, problems: tuple[str, ...]) -> None:
        if problems != self._problems:
            self._problems = problems
            for problem in problems:
                log.warning("RDMA device left out of the Device report: %s", problem)

    async def run(self, stop: asyncio.Event) -> None:
        async def tick() -> None:
            await asyncio.to_thread(self.tick)

        await run_every(self.interval_s, tick, stop, name="devices")

    def view(self) -> dict[str, Any]:
        """`hookctl devices`: the document, the last delivery, the Node's share and what was left out."""
        return {
            "node": self._node_name,
            **self.delivery.view(),
            "ticks": self.ticks,
            "problems": list(self._problems),
            "node_resources": self.node_resources.view() if self.node_resources is not None else None,
            "document": self.document,
        }
