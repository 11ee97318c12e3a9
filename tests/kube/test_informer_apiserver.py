"""The informer against a real kube-apiserver: the counterparts of tests/informer/test_apiserver.py,
whose HTTP fake is our own reading of the API. Pods by spec.nodeName, the Node, NodeSLO and NodeMetric;
bookmarks; the apiserver's real 410; an outage made by cutting a TCP proxy between the informer and the
apiserver (the apiserver itself is shared and keeps running)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookserver.config import Settings
from hookserver.informer import Informer, build_informer
from hookserver.store import StateStore
from hookserver.store.changes import PodChange
from tests.informer.conftest import eventually, fast_informer_settings
from tests.kube.conftest import SLO_API, NodeFactory, pod_body
from tests.kube.kubehttp import KubeHttp
from tests.kube.tcpproxy import CuttableProxy

SLO_VERSION = "slo.koordinator.sh/v1alpha1"


@contextlib.asynccontextmanager
async def running(kubeconfig: str, node: str, store: StateStore, registry: CollectorRegistry | None = None,
                  **informer: Any) -> AsyncIterator[Informer]:
    settings = Settings(node_name=node, kubeconfig=kubeconfig, informer=fast_informer_settings(**informer))
    built = build_informer(settings, store=store, registry=registry or CollectorRegistry())
    stop = asyncio.Event()
    task = asyncio.create_task(built.run(stop))
    try:
        yield built
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)


def _source(informer: Informer, resource: str) -> dict[str, Any]:
    return next(s for s in informer.status()["sources"] if s["resource"] == resource)


@pytest.fixture
def admin_kubeconfig(kube: KubeHttp, tmp_path: Path) -> str:
    return kube.kubeconfig(str(tmp_path))



def test_pods_of_this_node_only_with_watch_updates_and_deletes(
    kube: KubeHttp, kube_namespace: str, kube_nodes: NodeFactory, admin_kubeconfig: str, slo_crds: None
) -> None:
    ns = kube_namespace
    node = kube_nodes.make("pods")["metadata"]["name"]
    other = kube_nodes.make("other")["metadata"]["name"]
    web = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("web", node, qos="LS", cpu="250m")), "web")
    kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("elsewhere", other)), "elsewhere")

    async def scenario() -> None:
        store = StateStore()
        changes: list[PodChange] = []
        store.subscribe_pods(changes.append)
        async with running(admin_kubeconfig, node, store) as informer:
            assert await informer.wait_synced(15), informer.status()
            snap = store.snapshot()
            assert set(snap.pods) == {web["metadata"]["uid"]}
            pod = snap.pods[web["metadata"]["uid"]]
            assert (pod.namespace, pod.name, pod.qos_class, pod.kube_qos) == (ns, "web", "LS", "Guaranteed")
            assert pod.container_specs["main"][0] == {"cpu": "250m", "memory": "64Mi"}
            assert pod.resource_version == web["metadata"]["resourceVersion"]
            # a new pod on this node arrives by watch; one on another node never does
            job = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("job", node, qos="BE")), "job")
            kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("far", other)), "far")
            await eventually(lambda: job["metadata"]["uid"] in store.snapshot().pods, timeout_s=10, what="job")
            # an annotation the hooks read is one "updated" change naming that field
            before = len(changes)
            kube.must(kube.merge_patch(f"/api/v1/namespaces/{ns}/pods/job", {"metadata": {"annotations": {
                "node.koordinator.sh/extended-resource-spec": "{}"}}}), "annotate")
            await eventually(lambda: len(changes) > before, timeout_s=10, what="annotation change")
            assert changes[-1].kind == "updated" and changes[-1].fields == frozenset({"annotations"})
            kube.must(kube.delete(f"/api/v1/namespaces/{ns}/pods/job", grace_seconds=0), "delete job")
            await eventually(lambda: job["metadata"]["uid"] not in store.snapshot().pods, timeout_s=10, what="delete")
            assert changes[-1].kind == "deleted"
            assert {p.name for p in store.snapshot().pods.values()} == {"web"}
            assert _source(informer, "pods")["lists"] == 1

    asyncio.run(scenario())


def test_node_nodeslo_and_nodemetric(
    kube: KubeHttp, kube_nodes: NodeFactory, admin_kubeconfig: str, slo_crds: None
) -> None:
    node = kube_nodes.make("slo", labels={"pool": "a"}, annotations={
        "node.koordinator.sh/cpu-normalization-ratio": "1.2"}, allocatable={"cpu": "7800m", "memory": "16Gi"})
    name = node["metadata"]["name"]
    kube.must(kube.post(f"{SLO_API}/nodeslos", {"apiVersion": SLO_VERSION, "kind": "NodeSLO", "metadata": {"name": name},
              "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}}), "nodeslo")
    kube.must(kube.post(f"{SLO_API}/nodemetrics", {"apiVersion": SLO_VERSION, "kind": "NodeMetric",
              "metadata": {"name": name}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}}}), "nodemetric")

    async def scenario() -> None:
        store = StateStore()
        async with running(admin_kubeconfig, name, store) as informer:
            assert await informer.wait_synced(15), informer.status()
            snap = store.snapshot()
            assert snap.node is not None and snap.node.allocatable["cpu"] == "7800m"
            assert snap.node.annotations["node.koordinator.sh/cpu-normalization-ratio"] == "1.2"
            threshold = snap.node_slo.resource_used_threshold_with_be
            assert threshold.enable and threshold.cpu_suppress_policy == "cfsQuota"
            assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == f"nodeslo/{name}"
            assert snap.node_metric is not None
            assert snap.node_metric.metric_collect_policy.report_interval_seconds == 30
            # node label change
            kube.must(kube.merge_patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {"pool": "b"}}}), "label")
            await eventually(lambda: store.snapshot().node.labels.get("pool") == "b",  # type: ignore[union-attr]
                             timeout_s=10, what="node label")
            # an invalid NodeSLO is reported and the last good one stays in force
            kube.must(kube.merge_patch(f"{SLO_API}/nodeslos/{name}", {"spec": {"resourceQOSStrategy": {
                "beClass": {"memoryQOS": {"wmarkRatio": 500}}}}}), "bad nodeslo")
            await eventually(lambda: "last_error" in informer.slo_report(), timeout_s=10, what="rejected NodeSLO")
            assert store.snapshot().node_slo.resource_used_threshold_with_be.enable
            # replace the spec (a JSON merge patch with null removes the keys)
            kube.must(kube.merge_patch(f"{SLO_API}/nodeslos/{name}", {"spec": {
                "resourceQOSStrategy": None, "resourceUsedThresholdWithBE": None,
                "cpuBurstStrategy": {"policy": "cpuBurstOnly"}}}), "nodeslo update")
            await eventually(lambda: store.snapshot().node_slo.cpu_burst_strategy.policy == "cpuBurstOnly",
                             timeout_s=10, what="NodeSLO update")
            assert not store.snapshot().node_slo.resource_used_threshold_with_be.enable
            kube.must(kube.delete(f"{SLO_API}/nodeslos/{name}"), "delete nodeslo")
            await eventually(lambda: set(store.snapshot().node_slo_sources.values()) == {"default"},
                             timeout_s=10, what="defaults after delete")
            kube.must(kube.merge_patch(f"{SLO_API}/nodemetrics/{name}", {"spec": {"metricCollectPolicy": {
                "reportIntervalSeconds": 90}}}), "nodemetric update")
            await eventually(
                lambda: store.snapshot().node_metric.metric_collect_policy.report_interval_seconds == 90,  # type: ignore[union-attr]
                timeout_s=10, what="NodeMetric update")

    asyncio.run(scenario())


def test_bookmarks_from_the_real_apiserver_advance_the_resource_version(
    kube: KubeHttp, kube_namespace: str, kube_nodes: NodeFactory, admin_kubeconfig: str, slo_crds: None
) -> None:
    """1.20 sends a BOOKMARK two seconds before a watch's timeoutSeconds runs out; with short watches the
    pod watch of a quiet node learns the newer resourceVersion that other nodes' pods produced."""
    node = kube_nodes.make("quiet")["metadata"]["name"]
    other = kube_nodes.make("busy")["metadata"]["name"]

    async def scenario() -> None:
        async with running(admin_kubeconfig, node, StateStore(), watch_timeout_s=3) as informer:
            assert await informer.wait_synced(15), informer.status()
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            start = int(pods.resource_version)
            for i in range(3):
                kube.must(kube.post(f"/api/v1/namespaces/{kube_namespace}/pods", pod_body(f"busy-{i}", other)), "pod")
            target = int(kube.get(f"/api/v1/namespaces/{kube_namespace}/pods/busy-2").body["metadata"]["resourceVersion"])
            await eventually(lambda: int(pods.resource_version) >= target, timeout_s=20, what="a bookmark")
            assert int(pods.resource_version) > start and pods.events == 0

    asyncio.run(scenario())


def test_the_real_410_makes_the_informer_relist(
    kube: KubeHttp, kube_namespace: str, kube_nodes: NodeFactory, proxy: CuttableProxy, tmp_path: Path,
    slo_crds: None,
) -> None:
    """A watch from a resourceVersion older than the apiserver's watch window is answered 410 Gone.

    The window is the watch cache, which 1.20 grows to up to 100k events while events are younger than
    75 s, so it cannot be outrun in a test; instead, while the proxy is cut, the informer is given the
    oldest resourceVersion there is ("1"), as after a partition longer than the window. What the real
    apiserver answers, and that the informer relists and reconciles a delete it never saw, is the test.
    """
    ns = kube_namespace
    node = kube_nodes.make("gone")["metadata"]["name"]
    keep = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("keep", node)), "keep")
    doomed = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("doomed", node)), "doomed")
    # What a watch from "1" gets on this apiserver (an HTTP 410, or an ERROR event carrying 410).
    raw = kube.get("/api/v1/pods", watch="1", resourceVersion="1", timeoutSeconds="1",
                   fieldSelector=f"spec.nodeName={node}")
    # (1.20: a 200 stream whose first event is ERROR with a 410 Status, "too old resource version")
    if raw.status == 410:
        answer = raw.body
    else:
        first = raw.body if isinstance(raw.body, dict) else json.loads(str(raw.body).splitlines()[0])
        if first["type"] != "ERROR":
            # Measured: an apiserver started on a fresh etcd (FRESH=1) has a watch cache reaching back to
            # the first revisions, so "1" is not too old yet; after any restart it is.
            pytest.skip(f"this apiserver still serves a watch from resourceVersion 1 ({first['type']} event): "
                        "its watch window reaches a fresh etcd's first revisions; restart it without FRESH=1")
        answer = first["object"]
    assert answer["code"] == 410 and answer["reason"] in ("Expired", "Gone"), raw
    kubeconfig = kube.with_server(proxy.url).kubeconfig(str(tmp_path), "via-proxy")

    async def scenario() -> None:
        store = StateStore()
        registry = CollectorRegistry()
        async with running(kubeconfig, node, store, registry) as informer:
            assert await informer.wait_synced(15), informer.status()
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            proxy.cut()
            await eventually(lambda: store.snapshot().stale, timeout_s=10, what="stale")
            kube.must(kube.delete(f"/api/v1/namespaces/{ns}/pods/doomed", grace_seconds=0), "delete doomed")
            pods.resource_version = "1"
            proxy.restore()
            await eventually(lambda: doomed["metadata"]["uid"] not in store.snapshot().pods, timeout_s=15,
                             what="relist")
            assert keep["metadata"]["uid"] in store.snapshot().pods
            assert registry.get_sample_value(
                "hookserver_informer_relists_total", {"resource": "pods", "reason": "expired"}) == 1.0
            await eventually(lambda: not store.snapshot().stale, timeout_s=10, what="recovered")
            assert pods.lists == 2

    asyncio.run(scenario())


def test_an_outage_serves_the_cache_then_catches_up_by_rewatching(
    kube: KubeHttp, kube_namespace: str, kube_nodes: NodeFactory, proxy: CuttableProxy, tmp_path: Path,
    slo_crds: None,
) -> None:
    ns = kube_namespace
    node = kube_nodes.make("outage")["metadata"]["name"]
    a = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("a", node)), "a")
    b = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("b", node, qos="LS")), "b")
    kubeconfig = kube.with_server(proxy.url).kubeconfig(str(tmp_path), "via-proxy")

    async def scenario() -> None:
        store = StateStore()
        registry = CollectorRegistry()
        async with running(kubeconfig, node, store, registry) as informer:
            assert await informer.wait_synced(15), informer.status()
            proxy.cut()
            await eventually(lambda: store.snapshot().stale, timeout_s=10, what="stale")
            assert not informer.synced()
            assert registry.get_sample_value("hookserver_informer_watch_connected", {"resource": "pods"}) == 0.0
            # the cache keeps serving
            assert {a["metadata"]["uid"], b["metadata"]["uid"]} <= set(store.snapshot().pods)
            # the cluster moves on meanwhile
            kube.must(kube.delete(f"/api/v1/namespaces/{ns}/pods/a", grace_seconds=0), "delete a")
            c = kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("c", node)), "c")
            kube.must(kube.merge_patch(f"/api/v1/namespaces/{ns}/pods/b", {"metadata": {"labels": {
                "koordinator.sh/qosClass": "BE"}}}), "relabel b")
            await asyncio.sleep(0.5)  # retries keep failing while cut
            assert store.snapshot().stale and proxy.refused > 0
            proxy.restore()
            await eventually(lambda: not store.snapshot().stale, timeout_s=15, what="recovery")
            await eventually(lambda: c["metadata"]["uid"] in store.snapshot().pods, timeout_s=10, what="catch-up")
            await eventually(lambda: a["metadata"]["uid"] not in store.snapshot().pods, timeout_s=10, what="delete")
            await eventually(lambda: store.snapshot().pods[b["metadata"]["uid"]].qos_class == "BE", timeout_s=10,
                             what="relabel")
            # caught up by re-watching from the last resourceVersion: no relist
            pods = _source(informer, "pods")
            assert pods["lists"] == 1 and pods["errors"] >= 1
            assert registry.get_sample_value(
                "hookserver_informer_relists_total", {"resource": "pods", "reason": "expired"}) in (None, 0.0)

    asyncio.run(scenario())


def test_a_black_holed_apiserver_is_noticed_within_the_idle_plus_the_connect_timeout(
    kube: KubeHttp, kube_nodes: NodeFactory, proxy: CuttableProxy, tmp_path: Path, slo_crds: None,
) -> None:
    """No RST, no FIN: every byte is held (a dead route or load balancer; the proxy's kernel still ACKs, so
    TCP keepalive cannot see it). The watch's idle timeout closes the silent watch, the re-watch's TLS
    handshake or response headers then time out, and that is the outage: within idle + connect timeout.
    Before the idle timeout the bound was timeoutSeconds + 30 s (5.5 to 10.5 minutes with the default
    watch_timeout_s); watch_timeout_s stays at its default here, so only the idle timeout can notice."""
    node = kube_nodes.make("blackhole")["metadata"]["name"]
    kubeconfig = kube.with_server(proxy.url).kubeconfig(str(tmp_path), "via-proxy")
    idle_s, connect_s = 5.0, 2.0

    async def scenario() -> float:
        store = StateStore()
        async with running(kubeconfig, node, store, watch_timeout_s=300, watch_idle_timeout_s=idle_s,
                           connect_timeout_s=connect_s) as informer:
            assert await informer.wait_synced(15), informer.status()
            proxy.freeze()
            started = asyncio.get_running_loop().time()
            await eventually(lambda: store.snapshot().stale, timeout_s=idle_s + connect_s + 30, what="stale")
            noticed = asyncio.get_running_loop().time() - started
            status = informer.status()
            assert status["stale"] is True
            assert any(not s["connected"] and "timed out" in s["last_error"].lower() for s in status["sources"]), status
            proxy.thaw()
            await eventually(lambda: not store.snapshot().stale, timeout_s=30, what="recovery")
            return noticed

    noticed = asyncio.run(scenario())
    print(f"black hole noticed after {noticed:.1f} s (idle {idle_s:g} s + connect {connect_s:g} s)")
    # the bound plus scheduling slack on a shared machine; a regression is minutes
    assert noticed < idle_s + connect_s + 3, noticed


def test_a_quiet_cluster_keeps_its_watches_open_without_flapping_stale_or_warning(
    kube: KubeHttp, kube_nodes: NodeFactory, admin_kubeconfig: str, slo_crds: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kube-apiserver 1.20 sends no byte on the watch of a quiet resource for its whole timeoutSeconds (measured:
    the headers at once, then nothing for 20 s and for 150 s; a bookmark ~2 s before the end only when that
    resource type changed elsewhere, see the bookmark test above), so with a short idle timeout every watch here
    is silent again and again. Each silence is checked against the apiserver (a probe over a pooled connection)
    and the watch stays open: no re-watch, no new connection, never a warning, an error, a relist or a moment of
    stale. (Before, each silence closed the watch and re-opened it: a request and a TLS handshake.)"""
    node = kube_nodes.make("quiet-idle")["metadata"]["name"]

    class RecordingStore(StateStore):
        def __init__(self) -> None:
            super().__init__()
            self.stale_marks = 0

        def set_stale(self, stale: bool) -> None:
            self.stale_marks += stale
            super().set_stale(stale)

    async def scenario() -> None:
        store = RecordingStore()
        async with running(admin_kubeconfig, node, store, watch_timeout_s=300, watch_idle_timeout_s=1.5) as informer:
            assert await informer.wait_synced(15), informer.status()
            store.stale_marks = 0  # stale until the first sync, by design
            transport = informer.transport
            assert transport is not None
            with caplog.at_level(logging.INFO, logger="hookserver"):
                caplog.clear()
                opened = transport.connection_stats().opened  # type: ignore[attr-defined]
                await eventually(lambda: all(r.idle_checks >= 3 for r in informer.reflectors), timeout_s=30,
                                 what="three idle checks of every resource")
                assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []
            assert store.stale_marks == 0 and not store.snapshot().stale
            # at most the probe's own connection (the five watches hold theirs; an agent's writers usually have a
            # sixth already), reused by every later probe; re-opening would have cost 15 here
            assert transport.connection_stats().opened - opened <= 1  # type: ignore[attr-defined]
            assert transport.probes >= 2  # type: ignore[attr-defined]
            for source in informer.status()["sources"]:
                assert source["lists"] == 1 and source["errors"] == 0 and source["connected"], source
                assert source["idle_rewatches"] == 0, source

    asyncio.run(scenario())
