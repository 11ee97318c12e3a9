"""GPU and RDMA capacity and the GPU labels on the Node, where no koord-manager puts them there.

koord-manager's `gpudeviceresource` and `rdmadevicereource` noderesource plugins
(`pkg/slo-controller/noderesource/plugins/`) read the node's Device object and write into
`status.capacity` and `status.allocatable`, from the healthy devices only:

* `koordinator.sh/gpu-core`, `gpu-memory`, `gpu-memory-ratio`: the sums of the healthy GPUs' resources, and
  `koordinator.sh/gpu` (the gpu-core sum) when the vendor is nvidia or unset; none of them when no GPU is
  healthy (the plugin resets them);
* `koordinator.sh/rdma`: 100 per healthy RDMA PF, none when there is none;
* the labels `node.koordinator.sh/gpu-vendor`, `gpu-model`, `gpu-driver-version` copied from the Device.
  Labels are metadata: writing them needs `patch nodes`, which the agent's least-privilege ClusterRole does
  not grant (it patches only `nodes/status`); without a label sink they are computed and shown, not written.

(`koordinator.sh/gpu.shared` needs koord-manager's `EnableSyncGPUSharedResource` gate, off by default: not
published.)

The same "never two writers" rule as batch capacity (`hookserver.capacity`): with `publisher: auto`, a
running koord-manager publishes and this agent does not (and takes back what it wrote before); otherwise the
values and labels go by server-side apply with this publisher's own field manager and `force=false`, so a
field koord-manager or an operator owns answers 409 naming it, and this agent yields instead of fighting:
the same refused values are not sent again for an hour. The field manager must differ from batch capacity's:
both apply `status.capacity`, and one manager's apply drops every field of its that the apply leaves out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.devices.report import (
    GPU_LABEL_KEYS,
    LABEL_GPU_VENDOR,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_RDMA,
    canonical,
)
from hookserver.errors import QuantityError
from hookserver.kubewire import memory_quantity
from hookserver.quantity import parse_quantity

__all__ = ["NodeDeviceResources", "NodeLabelSink", "NodeResourceSink", "RESOURCE_GPU", "node_labels",
           "node_resources"]

log = logging.getLogger(__name__)

RESOURCE_GPU = "koordinator.sh/gpu"
_RETRY_REFUSED_S = 3600.0


class Delivery(Protocol):
    @property
    def result(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def conflicts(self) -> tuple[tuple[str, str], ...]: ...


class NodeResourceSink(Protocol):
    """The shape of `hookserver.capacity.sinks.CapacitySink`: the informer's `NodeCapacityWriter` (with this
    publisher's field manager) serves here as it serves batch capacity."""

    target: str
    where: str

    def apply(self, values: Mapping[str, str], *, force: bool = False) -> Delivery: ...

    def withdraw(self) -> Delivery: ...


class NodeLabelSink(Protocol):
    where: str

    def apply(self, labels: Mapping[str, str]) -> Delivery: ...

    def withdraw(self) -> Delivery: ...


def _healthy(document: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    spec = document.get("spec")
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    if not isinstance(devices, list):
        return []
    return [d for d in devices if isinstance(d, Mapping) and d.get("type") == kind and d.get("health") is True]


def _resource(device: Mapping[str, Any], name: str) -> int:
    resources = device.get("resources")
    raw = resources.get(name) if isinstance(resources, Mapping) else None
    if raw is None:
        return 0
    try:
        return parse_quantity(raw, field=name).value()
    except QuantityError:
        return 0


def node_resources(document: Mapping[str, Any]) -> dict[str, str]:
    """What koord-manager's plugins would put into the Node's capacity and allocatable, from a Device object."""
    out: dict[str, str] = {}
    gpus = _healthy(document, "gpu")
    if gpus:
        core = sum(_resource(d, RESOURCE_GPU_CORE) for d in gpus)
        out[RESOURCE_GPU_CORE] = str(core)
        out[RESOURCE_GPU_MEMORY] = memory_quantity(sum(_resource(d, RESOURCE_GPU_MEMORY) for d in gpus))
        out[RESOURCE_GPU_MEMORY_RATIO] = str(sum(_resource(d, RESOURCE_GPU_MEMORY_RATIO) for d in gpus))
        vendor = node_labels(document).get(LABEL_GPU_VENDOR, "")
        if vendor in ("", "nvidia"):
            out[RESOURCE_GPU] = str(core)
    rdma = _healthy(document, "rdma")
    if rdma:
        out[RESOURCE_RDMA] = str(100 * len(rdma))
    return dict(sorted(out.items()))


def node_labels(document: Mapping[str, Any]) -> dict[str, str]:
    """The Device's GPU labels koord-manager copies onto the Node (only those three keys)."""
    meta = document.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {k: str(labels[k]) for k in GPU_LABEL_KEYS if k in labels}


@dataclass(frozen=True, slots=True)
class Outcome:
    state: str  # published | unchanged | koord-manager | withdrawn | yielded | error | standalone
    detail: str = ""


class NodeDeviceResources:
    """One step of the device publisher's tick: decide and, when due, write the Node's GPU/RDMA share."""

    def __init__(
        self,
        *,
        resources: NodeResourceSink | None,
        labels: NodeLabelSink | None = None,
        publisher: str = "auto",
        koord_manager_evidence: Callable[[], str] = str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if publisher not in ("auto", "agent", "koord-manager"):
            raise ValueError(f"publisher must be auto, agent or koord-manager, got {publisher!r}")
        self._resources = resources
        self._labels = labels
        self._publisher = publisher
        self._evidence = koord_manager_evidence
        self._clock = clock
        self.values: dict[str, str] = {}
        self.node_labels: dict[str, str] = {}
        self.ours: tuple[dict[str, str], dict[str, str]] | None = None  # what the Node holds from us
        self._refused: tuple[str, float] = ("", 0.0)
        self.last = Outcome("pending")
        self._logged = ""

    def step(self, document: Mapping[str, Any]) -> Outcome:
        self.values, self.node_labels = node_resources(document), node_labels(document)
        outcome = self._step()
        self.last = outcome
        key = f"{outcome.state}:{outcome.detail}" if outcome.state in ("yielded", "error") else outcome.state
        if key != self._logged and outcome.state != "unchanged":
            self._logged = key
            level = logging.WARNING if outcome.state in ("yielded", "error") else logging.INFO
            log.log(level, "device capacity on the Node: %s%s", outcome.state,
                    f": {outcome.detail}" if outcome.detail else "")
        return outcome

    def _step(self) -> Outcome:
        if self._resources is None:
            return Outcome("standalone", "no Node to write: the values are in the device report")
        evidence = self._evidence() if self._publisher == "auto" else ""
        if self._publisher == "koord-manager" or evidence:
            why = f"koord-manager runs ({evidence})" if evidence else "devices.publisher: koord-manager"
            if self.ours == ({}, {}):
                return Outcome("koord-manager", why)
            # Ours on the Node (or, after a restart, perhaps from an earlier run): an apply of nothing takes
            # back only what this field manager owns, so koord-manager's values stay.
            return self._write({}, {}, f"withdrawn: {why}", withdraw=True)
        wanted = (self.values, self.node_labels if self._labels is not None else {})
        if wanted == self.ours:
            return Outcome("unchanged")
        text = canonical(wanted)
        refused_text, refused_at = self._refused
        if text == refused_text and self._clock() - refused_at < _RETRY_REFUSED_S:
            return Outcome("yielded", "another writer owns these fields (not retried for an hour)")
        return self._write(*wanted, "published")

    def _write(self, values: Mapping[str, str], labels: Mapping[str, str], state: str, *,
               withdraw: bool = False) -> Outcome:
        assert self._resources is not None
        first = self._resources.withdraw() if withdraw else self._resources.apply(values)
        second = first
        if first.result == "ok" and self._labels is not None:
            second = self._labels.withdraw() if withdraw else self._labels.apply(labels)
        for delivery in (first, second):
            if delivery.result == "conflict":
                self._refused = (canonical((dict(values), dict(labels))), self._clock())
                owners = sorted({m for m, _ in delivery.conflicts}) or ["another field manager"]
                return Outcome("yielded", f"{', '.join(owners)} owns the fields: {delivery.detail}")
            if delivery.result != "ok":
                return Outcome("error", f"{delivery.result}: {delivery.detail}")
        self.ours = (dict(values), dict(labels))
        return Outcome("withdrawn" if withdraw else state, "")

    def view(self) -> dict[str, Any]:
        return {"values": self.values, "labels": self.node_labels, "state": self.last.state,
                "detail": self.last.detail, "publisher": self._publisher,
                "on_node": None if self.ours is None else {"values": self.ours[0], "labels": self.ours[1]}}
