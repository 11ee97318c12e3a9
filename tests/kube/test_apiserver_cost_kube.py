"""What the agent costs a real kube-apiserver (issue 25): the informer and the NodeMetric status writer against the
shared test apiserver, counted on the client (every request by verb) and on urllib3's own connection counters.

Runs only with HOOKSERVER_E2E_KUBECONFIG (see tests/kube/conftest.py); objects carry random names."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from hookserver.config import Settings
from hookserver.informer import InformerSettings, build_informer
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.store import StateStore
from tests.kube.conftest import SLO_API, NodeFactory
from tests.kube.kubehttp import KubeHttp


class Counting(ApiClientTransport):
    """Every request the agent sends: (method or WATCH/LIST/GET, path, query)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str, dict[str, str]]] = []
        self._lock = threading.Lock()

    def _get(self, path: str, params: Mapping[str, str], read_timeout_s: float) -> Any:
        with self._lock:
            self.sent.append(("WATCH" if params.get("watch") else "GET", path, dict(params)))
        return super()._get(path, params, read_timeout_s)

    def _send(self, method: str, path: str, body: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.sent.append((method, path, {}))
        return super()._send(method, path, body, **kwargs)


def _settings(kubeconfig: str, node: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"source": "apiserver", "first_list_spread_s": 0, "relist_spread_s": 0,
                              "backoff_initial_s": 0.1, "backoff_max_s": 1, "slo_configmap": ""}
    values.update(overrides)
    return Settings(node_name=node, kubeconfig=kubeconfig, informer=InformerSettings(**values))


async def _until(check: Any, timeout_s: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_reports_without_a_get_lists_from_the_cache_and_watches_on_reused_connections(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, slo_crds: None, tmp_path: Path,
) -> None:
    node = kube_nodes.make("cost")["metadata"]["name"]
    kube.must(kube.post(f"{SLO_API}/nodemetrics", {
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}}), "create the NodeMetric")
    transport = Counting(load_client_configuration(kube_kubeconfig))
    # timeoutSeconds 1-2 s: the apiserver ends each watch, and the next one must reuse its connection
    settings = _settings(kube_kubeconfig, node, watch_timeout_s=1)
    informer = build_informer(settings, store=StateStore(), registry=CollectorRegistry(), transport=transport)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(informer.run(stop))
        try:
            await _until(informer.synced, 20, "the first sync")
            writer = NodeMetricStatusWriter(transport, node_name=node, seen=informer.nodemetric_seen)
            for n in range(3):
                result = await asyncio.to_thread(writer.deliver, {"updateTime": "2026-11-26T00:00:0%dZ" % n})
                assert (result.result, result.attempts) == ("ok", 1), result
            assert [s for s in transport.sent if s[0] == "GET" and s[1].endswith(f"/nodemetrics/{node}")] == []
            assert writer.reads == 0
            stored = kube.must(kube.get(f"{SLO_API}/nodemetrics/{node}"), "read back")
            assert stored["status"]["updateTime"] == "2026-11-26T00:00:02Z"

            lists = [s for s in transport.sent if s[0] == "GET" and s[1] == "/api/v1/pods"]
            assert lists and all(q.get("resourceVersion") == "0" for _m, _p, q in lists)
            watches = lambda: [s for s in transport.sent if s[0] == "WATCH" and s[1] == "/api/v1/pods"]  # noqa: E731
            await _until(lambda: len(watches()) >= 2, 20, "a first re-watch")
            opened = transport.connection_stats().opened
            count = len(watches())
            await _until(lambda: len(watches()) >= count + 3, 30, "three more re-watches of the pods")
            # five watches re-opened every 1-2 s for several seconds, on the connections they already had
            assert transport.connection_stats().opened == opened
            assert [s for s in transport.sent if s[0] == "GET" and s[1] == "/api/v1/pods"] == lists  # no relist
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    asyncio.run(scenario())


def test_a_relist_at_a_resource_version_is_answered_by_the_real_apiserver(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, tmp_path: Path,
) -> None:
    """The parameters a relist sends (resourceVersion=<last>, resourceVersionMatch=NotOlderThan, no limit) are
    accepted by kube-apiserver 1.20 and answer at least that version."""
    node = kube_nodes.make("relist")
    rv = node["metadata"]["resourceVersion"]
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    try:
        body = transport.get_json("/api/v1/nodes", {"fieldSelector": f"metadata.name={node['metadata']['name']}",
                                                    "resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"},
                                  timeout_s=10)
        assert [i["metadata"]["name"] for i in body["items"]] == [node["metadata"]["name"]]
        assert int(body["metadata"]["resourceVersion"]) >= int(rv)
    finally:
        transport.close()


def test_gzip_is_negotiated_for_a_large_list(kube: KubeHttp, kube_kubeconfig: str, kube_namespace: str) -> None:
    """kube-apiserver compresses a response above 128 KiB for a client that accepts gzip; urllib3 decodes it."""
    blob = "x" * 4000
    for i in range(40):
        kube.must(kube.post(f"/api/v1/namespaces/{kube_namespace}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"big-{i}"}, "data": {"blob": blob}}),
            f"configmap {i}")
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    try:
        response = transport._get(f"/api/v1/namespaces/{kube_namespace}/configmaps", {}, 10)
        try:
            encoding = response.headers.get("Content-Encoding")
            data = response.read()
        finally:
            response.release_conn()
        assert encoding == "gzip"
        assert len(data) > 40 * 4000  # decoded
    finally:
        transport.close()
        kube.delete(f"/api/v1/namespaces/{kube_namespace}/configmaps")  # no namespace controller deletes them
