"""The informer: the sources this node's settings call for, one state store, staleness and reports.

Modes (InformerSettings.source; `auto` picks standalone when Settings.standalone, else apiserver when a
kubeconfig or in-cluster credentials exist, else standalone):
  * apiserver: list+watch Pods (spec.nodeName=<node>), the Node, NodeSLO, NodeMetric and the
    slo-controller-config ConfigMap (by name; informer.slo_configmap);
  * kubelet: Pods polled from the kubelet; Node/NodeSLO/NodeMetric/the ConfigMap from the apiserver when
    credentials exist, else as in standalone;
  * standalone: Node from the local host, NodeSLO from --slo-file (reloaded on change) or defaults, pods
    from hook and NRI events (the front doors write them; nothing to do here).
`run(stop)` never raises for an outage: sources retry with backoff and the store is marked stale while
any of them is unhealthy, then catches up. The first sync (every source listed once) is latched and
announced once (`on_first_sync`): a later outage makes the store stale, never the first sync undone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from hookserver.aio.periodic import run_every
from hookserver.informer.handlers import NodeHandler, NodeMetricHandler, NodeSLOHandler, PodHandler
from hookserver.informer.host import host_node
from hookserver.informer.kubelet import KubeletPodSource
from hookserver.informer.last_seen import LastSeen
from hookserver.informer.metrics import InformerMetrics
from hookserver.informer.reflector import Reflector, ResourceKind
from hookserver.informer.settings import InformerSettings
from hookserver.informer.slo_configmap import SLOConfigMapHandler, slo_configmap_kind
from hookserver.informer.slo_file import SLOFileSource
from hookserver.informer.slo_state import SLOState
from hookserver.informer.spread import ListSpread, phase_of
from hookserver.informer.transport import ApiClientTransport, KubeTransport, load_client_configuration
from hookserver.store.state import StateStore
from hookserver.system import SystemRoots

__all__ = ["Informer", "Source", "build_informer", "resolve_mode"]

log = logging.getLogger(__name__)

SLO_GROUP = "/apis/slo.koordinator.sh/v1alpha1"


class Source(Protocol):
    async def run(self, stop: asyncio.Event) -> None: ...

    def healthy(self) -> bool: ...

    def first_sync_done(self) -> bool: ...

    def status(self) -> dict[str, Any]: ...


class Informer:
    def __init__(
        self,
        *,
        mode: str,
        node_name: str,
        store: StateStore,
        slo: SLOState,
        settings: InformerSettings,
        sources: Sequence[Source] = (),
        reflectors: Sequence[Reflector] = (),
        slo_file: SLOFileSource | None = None,
        host_node_factory: Callable[[], Any] | None = None,
        transport: KubeTransport | None = None,
        metrics: InformerMetrics | None = None,
        pod_handlers: Sequence[PodHandler] = (),
    ) -> None:
        self.mode = mode
        self.node_name = node_name
        self.store = store
        self.slo = slo
        self.settings = settings
        self.reflectors = tuple(reflectors)
        self.sources: tuple[Source, ...] = (*self.reflectors, *sources)
        self.slo_file = slo_file
        self._host_node_factory = host_node_factory
        self._transport = transport
        self._metrics = metrics
        self._pod_handlers = tuple(pod_handlers)
        # This node's NodeMetric as the watch last delivered it, for the status writer (no GET per report).
        self.nodemetric_seen = LastSeen()
        self.started_at = 0.0
        # Sources report from their own threads; the lock makes the latch flip, and its listeners run, once.
        self._first_sync_lock = threading.Lock()
        self._first_synced = False
        self._first_sync_listeners: list[Callable[[], None]] = []
        if metrics is not None:
            metrics.track_cache(lambda: float(len(store.snapshot().pods)))

    @property
    def transport(self) -> KubeTransport | None:
        """The apiserver client (None in standalone mode), shared by the NodeMetric status writer and the evictor."""
        return self._transport

    # -- health ----------------------------------------------------------------------------------
    def health_changed(self) -> None:
        """Called by sources (from any thread) when they connect or disconnect, and after their first list."""
        stale = not all(source.healthy() for source in self.sources)
        self.store.set_stale(stale)
        if self._metrics is not None:
            self._metrics.stale.set(1 if stale else 0)
        self._check_first_sync()

    def first_sync_done(self) -> bool:
        """Started (node and NodeSLO defaults published) and every source has listed once. Latched: unlike
        `synced()`, an outage after that does not make it False again."""
        with self._first_sync_lock:
            return self._first_synced

    def on_first_sync(self, callback: Callable[[], None]) -> None:
        """Call `callback` once when the first sync is done (at once if it already is), from whichever thread
        completed it: readiness waits for it, and a probe must not wait on the event loop."""
        with self._first_sync_lock:
            if not self._first_synced:
                self._first_sync_listeners.append(callback)
                return
        callback()

    def _check_first_sync(self) -> None:
        with self._first_sync_lock:
            if self._first_synced or not self.started_at:
                return
            if not all(source.first_sync_done() for source in self.sources):
                return
            self._first_synced = True
            listeners, self._first_sync_listeners = self._first_sync_listeners, []
        log.info("informer: first sync done (%s)", ", ".join(_name(s) for s in self.sources) or self.mode)
        for listener in listeners:
            try:
                listener()
            except Exception:  # noqa: BLE001 - it runs inside a source's list: a listener's bug must not fail it
                log.exception("informer: first-sync listener %r failed", listener)

    def lists_pod(self, uid: str) -> bool:
        """Whether an informer source (apiserver watch, kubelet poll) still lists the pod: such a pod is
        removed by its source, never garbage-collected by the reconciler. Standalone mode lists nothing."""
        return any(handler.lists(uid) for handler in self._pod_handlers)

    def synced(self) -> bool:
        """Started (initial node and NodeSLO published) and every source healthy."""
        return bool(self.started_at) and all(source.healthy() for source in self.sources)

    async def wait_synced(self, timeout_s: float) -> bool:
        """For startup and tests: True once every source is healthy, False on timeout."""
        deadline = time.monotonic() + timeout_s
        while not self.synced():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # -- lifecycle -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self.slo.publish_defaults()
        if self._host_node_factory is not None:
            node = self._host_node_factory()
            self.store.set_node(node)
            self.slo.set_node_metadata(node.labels, node.annotations)
        if self.slo_file is not None:
            await asyncio.to_thread(self.slo_file.load_if_changed)
        self.started_at = time.time()
        self.health_changed()
        try:
            async with asyncio.TaskGroup() as group:
                # Runs until stop even with nothing to poll (standalone without a file): the daemon treats
                # a root task that returns early as dead.
                group.create_task(stop.wait(), name="informer:until-stop")
                for source in self.sources:
                    group.create_task(source.run(stop), name=f"informer:{_name(source)}")
                if self.slo_file is not None:
                    group.create_task(self.slo_file.run(stop), name="informer:slo-file")
                if self.reflectors and self.settings.resync_period_s > 0:
                    group.create_task(
                        run_every(
                            self.settings.resync_period_s, self._resync, stop, name="informer resync",
                            run_first_immediately=False,
                        ),
                        name="informer:resync",
                    )
        finally:
            if self._transport is not None:
                self._transport.close()

    async def _resync(self) -> None:
        for reflector in self.reflectors:
            reflector.request_resync()

    # -- reports ---------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """For `hookctl status`: per source connected, last sync, resourceVersion, stale and counts."""
        snapshot = self.store.snapshot()
        sources = [source.status() for source in self.sources]
        if self.slo_file is not None:
            sources.append(self.slo_file.status())
        stale_reasons = [f"{source.get('resource', '?')}: {source['stale_reason']}" for source in sources
                         if source.get("stale_reason")]
        return {
            "mode": self.mode,
            "node": self.node_name,
            "stale": snapshot.stale,
            "stale_reasons": stale_reasons,
            "synced": self.synced(),
            "started_at": self.started_at,
            "pods_cached": len(snapshot.pods),
            "node_known": snapshot.node is not None,
            "sources": sources,
        }

    def slo_report(self) -> dict[str, Any]:
        """For `hookctl slo`: the effective NodeSLO (camelCase) and where each part came from."""
        report = self.slo.report()
        report["mode"] = self.mode
        return report


def _name(source: Any) -> str:
    kind = getattr(source, "kind", None)
    return str(getattr(kind, "name", None) or getattr(source, "name", type(source).__name__))


def resolve_mode(settings: Any, informer: InformerSettings) -> str:
    if informer.source != "auto":
        return informer.source
    if getattr(settings, "standalone", False):
        return "standalone"
    if getattr(settings, "kubeconfig", "") or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "apiserver"
    return "standalone"


def _api_reflectors(
    *,
    transport: KubeTransport,
    store: StateStore,
    slo: SLOState,
    node_name: str,
    informer: InformerSettings,
    metrics: InformerMetrics | None,
    with_pods: bool,
    pod_handlers: list[PodHandler],
    nodemetric_seen: LastSeen,
) -> list[Reflector]:
    by_name = f"metadata.name={node_name}"
    plan: list[tuple[ResourceKind, Any]] = []
    if with_pods:
        plan.append((ResourceKind("pods", "/api/v1/pods", f"spec.nodeName={node_name}"),
                     PodHandler(store, source="apiserver")))
        pod_handlers.append(plan[-1][1])
    plan.append((ResourceKind("node", "/api/v1/nodes", by_name),
                 NodeHandler(store, slo, node_name=node_name, source="apiserver")))
    if informer.watch_nodeslo:
        plan.append((ResourceKind("nodeslo", f"{SLO_GROUP}/nodeslos", by_name, optional=True),
                     NodeSLOHandler(slo, node_name=node_name)))
    if informer.watch_nodemetric:
        plan.append((ResourceKind("nodemetric", f"{SLO_GROUP}/nodemetrics", by_name, optional=True),
                     NodeMetricHandler(store, node_name=node_name, seen=nodemetric_seen)))
    configmap = informer.slo_configmap_ref
    if configmap is not None:
        namespace, name = configmap
        plan.append((slo_configmap_kind(namespace, name), SLOConfigMapHandler(slo, namespace=namespace, name=name)))
    # one phase per node (its name's hash), shared by its resources (spread.py)
    spread = ListSpread(first_list_s=informer.first_list_spread_s, relist_s=informer.relist_spread_s,
                        phase=phase_of(node_name))
    return [
        Reflector(kind, transport=transport, handler=handler, settings=informer, metrics=metrics, spread=spread)
        for kind, handler in plan
    ]


def _local_node(node_name: str, roots: SystemRoots, informer: InformerSettings, store: StateStore) -> Any:
    return host_node(node_name, roots=roots, extra_labels=informer.node_labels, now=store.clock())


def build_informer(
    settings: Any,
    *,
    store: StateStore,
    registry: CollectorRegistry | None = None,
    transport: KubeTransport | None = None,
) -> Informer:
    """Pick and wire the sources for `settings` (hookserver.config.Settings). Raises ConfigError when the
    chosen mode cannot be set up (e.g. an unreadable kubeconfig). `transport` replaces the apiserver
    client (tests)."""
    informer: InformerSettings = getattr(settings, "informer", None) or InformerSettings()
    node_name: str = settings.node_name
    mode = resolve_mode(settings, informer)
    metrics = InformerMetrics(registry)
    slo = SLOState(store, node_labels=informer.node_labels)
    roots = SystemRoots(proc=getattr(settings, "proc_root", "/proc"), sys=getattr(settings, "sys_root", "/sys"))
    slo_path: str = getattr(settings, "slo_file", "")
    reflectors: list[Reflector] = []
    sources: list[Source] = []
    host_factory: Callable[[], Any] | None = None
    pod_handlers: list[PodHandler] = []
    nodemetric_seen = LastSeen()
    has_credentials = bool(getattr(settings, "kubeconfig", "") or os.environ.get("KUBERNETES_SERVICE_HOST"))
    use_api = mode == "apiserver" or (mode == "kubelet" and (transport is not None or has_credentials))
    if use_api and transport is None:
        transport = ApiClientTransport(
            load_client_configuration(getattr(settings, "kubeconfig", "")),
            connect_timeout_s=informer.connect_timeout_s, max_event_bytes=informer.max_event_bytes,
            pool_maxsize=informer.pool_maxsize,
            keepalive=(
                (informer.tcp_keepalive_idle_s, informer.tcp_keepalive_interval_s, informer.tcp_keepalive_count)
                if informer.tcp_keepalive else None
            ),
        )
    if use_api and transport is not None:
        reflectors = _api_reflectors(
            transport=transport, store=store, slo=slo, node_name=node_name, informer=informer, metrics=metrics,
            with_pods=mode == "apiserver", pod_handlers=pod_handlers, nodemetric_seen=nodemetric_seen,
        )
        if slo_path:
            log.info("--slo-file %s is ignored: NodeSLO comes from the apiserver in %s mode", slo_path, mode)
        slo_path = ""
    else:
        host_factory = functools.partial(_local_node, node_name, roots, informer, store)

    if mode == "kubelet":
        pod_handlers.append(PodHandler(store, source="kubelet"))
        sources.append(KubeletPodSource(informer.kubelet, handler=pod_handlers[-1], metrics=metrics))
    slo_file = SLOFileSource(slo_path, slo=slo, poll_s=informer.slo_file_poll_s) if slo_path else None
    result = Informer(
        mode=mode, node_name=node_name, store=store, slo=slo, settings=informer, sources=sources,
        reflectors=reflectors, slo_file=slo_file, host_node_factory=host_factory, transport=transport,
        metrics=metrics, pod_handlers=pod_handlers,
    )
    result.nodemetric_seen = nodemetric_seen
    for reflector in reflectors:
        reflector.on_health = result.health_changed
    for source in sources:
        if isinstance(source, KubeletPodSource):
            source.on_health = result.health_changed
    return result
