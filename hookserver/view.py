"""The typed, read-only view of the node that hooks (and the reconciler and QoS planners) read.

Layer: between the areas (hooks, qos, ...) and store | slo, because it joins the two: the store holds the
effective NodeSLO without knowing its type (the store must not import the SLO model), and this module
gives it its type back. A hook's signature is `(request, view: NodeView) -> HookResult`, so a reader of
a hook sees every input it may use, and mypy checks the hot path end to end.

Building a view is cheap and memoized: `NodeViews.of(snapshot)` returns the same object while the node,
the NodeSLO, the pod map and the stale flag are the same objects (a container-only store change keeps
them, and the GPU source's mapping is the same), so on the hot path it is five identity compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from hookserver.koord_devices import NodeGpu
from hookserver.slo.model import NodeSLOSpec
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.state import StoreSnapshot

__all__ = [
    "ANNOTATION_CPU_NORMALIZATION_RATIO", "GpuSource", "NodeView", "NodeViews", "cpu_normalization_ratio",
    "default_node_slo",
]

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
_NO_PODS: Mapping[str, PodRecord] = MappingProxyType({})
_DEFAULT_SLO: NodeSLOSpec | None = None


def default_node_slo() -> NodeSLOSpec:
    """Koordinator's default NodeSLO (what a node with none gets); built once, shared, never mutated."""
    global _DEFAULT_SLO
    if _DEFAULT_SLO is None:
        _DEFAULT_SLO = NodeSLOSpec.model_validate({})
    return _DEFAULT_SLO


@dataclass(frozen=True, slots=True)
class NodeView:
    """What a hook may read. Nothing here is mutable and nothing reaches outside memory.

    * `node_slo`: the effective NodeSLO (Koordinator's defaults when the node has none);
    * `node`: the Node as the informer (or the local host, standalone) knows it, or None;
    * `pods`: pod records by UID (informer, kubelet, earlier hooks);
    * `cpu_normalization_ratio`: the node's `node.koordinator.sh/cpu-normalization-ratio`, None when absent
      or not a number (then no scaling applies, as in koordlet);
    * `stale`: the informer lost its watch and the pods may be behind;
    * `gpus`: the node's GPUs by minor (health included), or None where no inventory reached the view (no
      GPU collector, or a build that does not feed it): the GPU injection hook then checks nothing.
    """

    node_slo: NodeSLOSpec
    node: NodeRecord | None = None
    pods: Mapping[str, PodRecord] = field(default_factory=lambda: _NO_PODS)
    cpu_normalization_ratio: float | None = None
    stale: bool = False
    version: int = 0
    gpus: Mapping[int, NodeGpu] | None = None

    @classmethod
    def build(
        cls,
        *,
        node_slo: NodeSLOSpec | None = None,
        node: NodeRecord | None = None,
        pods: Mapping[str, PodRecord] = _NO_PODS,
        stale: bool = False,
        version: int = 0,
        gpus: Mapping[int, NodeGpu] | None = None,
    ) -> NodeView:
        return cls(
            node_slo=node_slo if node_slo is not None else default_node_slo(),
            node=node,
            pods=pods,
            cpu_normalization_ratio=_ratio(node),
            stale=stale,
            version=version,
            gpus=gpus,
        )

    @classmethod
    def of(cls, snap: StoreSnapshot, *, gpus: Mapping[int, NodeGpu] | None = None) -> NodeView:
        slo = snap.node_slo
        if slo is not None and not isinstance(slo, NodeSLOSpec):
            # The informer and the standalone loader store a NodeSLOSpec; anything else is a wiring bug.
            raise TypeError(f"the store's NodeSLO is a {type(slo).__name__}, not a NodeSLOSpec")
        return cls.build(node_slo=slo, node=snap.node, pods=snap.pods, stale=snap.stale, version=snap.version, gpus=gpus)

    def pod(self, uid: str) -> PodRecord | None:
        return self.pods.get(uid)


def _ratio(node: NodeRecord | None) -> float | None:
    return cpu_normalization_ratio(node.annotations) if node is not None else None


def cpu_normalization_ratio(annotations: Mapping[str, str]) -> float | None:
    """The node's `node.koordinator.sh/cpu-normalization-ratio`, None when absent or not a number (then no
    scaling applies, as in koordlet). The hook and CPU burst both read it through here."""
    raw = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


class GpuSource(Protocol):
    """The node's GPUs as the hooks see them: `current` is the same mapping object while nothing changed (the
    daemon refreshes it off the hot path from the GPU collector's inventory), None where none is known."""

    @property
    def current(self) -> Mapping[int, NodeGpu] | None: ...


class NodeViews:
    """Hands out `NodeView`s for snapshots, rebuilding only when what the view holds changed."""

    __slots__ = ("_entry", "_gpus")

    def __init__(self, gpus: GpuSource | None = None) -> None:
        # (node_slo, node, pods, stale, gpus, view): one attribute, so a thread never pairs a key with another's view.
        self._entry: tuple[object, object, object, bool, object, NodeView] | None = None
        self._gpus = gpus

    def of(self, snap: StoreSnapshot) -> NodeView:
        e = self._entry
        gpus = self._gpus.current if self._gpus is not None else None
        if (e is not None and e[0] is snap.node_slo and e[1] is snap.node and e[2] is snap.pods and e[3] == snap.stale
                and e[4] is gpus):
            return e[5]
        view = NodeView.of(snap, gpus=gpus)
        self._entry = (snap.node_slo, snap.node, snap.pods, snap.stale, gpus, view)
        return view
