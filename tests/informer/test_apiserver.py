"""The apiserver source against the HTTP fake: list, watch, 410 relist, outages, malformed input."""

from __future__ import annotations

import json
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from hookserver.store import StateStore
from hookserver.store.changes import PodChange
from tests.informer.conftest import NODE, api_settings, eventually, run, running
from tests.informer.fake_apiserver import FakeApiServer, make_node, make_nodeslo, make_pod


def test_lists_only_this_nodes_pods_and_fills_records(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE, annotations={"node.koordinator.sh/cpu-normalization-ratio": "1.2"}))
    mine = fake.apply("pods", make_pod("web", qos="LS", priority=9000, cpu="250m", memory="1Gi"))
    fake.apply("pods", make_pod("elsewhere", node="node-b"))

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            snap = store.snapshot()
            assert set(snap.pods) == {mine["metadata"]["uid"]}
            pod = snap.pods[mine["metadata"]["uid"]]
            assert (pod.namespace, pod.name, pod.source) == ("default", "web", "apiserver")
            assert pod.qos_class == "LS" and pod.priority == 9000 and pod.kube_qos == "Guaranteed"
            assert pod.container_specs["main"][0] == {"cpu": "250m", "memory": "1Gi"}
            assert pod.resource_version == mine["metadata"]["resourceVersion"]
            assert snap.node is not None
            assert snap.node.annotations["node.koordinator.sh/cpu-normalization-ratio"] == "1.2"
            assert snap.node.allocatable["cpu"] == "7800m"
            assert not snap.stale
            status = informer.status()
            pods_status = next(s for s in status["sources"] if s["resource"] == "pods")
            assert pods_status["connected"] and pods_status["objects"] == 1 and pods_status["lists"] == 1
            assert int(pods_status["resource_version"]) >= int(mine["metadata"]["resourceVersion"])
            json.dumps(status, allow_nan=False)  # goes over the debug API as JSON
            json.dumps(informer.slo_report(), allow_nan=False)
        # the field selector went to the server, and the token with it (the fake answers 401 otherwise)
        pod_lists = [q for p, q in fake.requests if p == "/api/v1/pods" and "watch" not in q]
        assert pod_lists and pod_lists[0]["fieldSelector"] == f"spec.nodeName={NODE}"

    run(scenario())


def test_watch_events_reach_store_and_listeners_only_on_relevant_change(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    pod = fake.apply("pods", make_pod("job", qos="BE"))
    uid = pod["metadata"]["uid"]

    async def scenario() -> None:
        store = StateStore()
        changes: list[PodChange] = []
        store.subscribe_pods(changes.append)
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            assert [c.kind for c in changes] == ["added"]
            # a label hooks do not read: the store updates, listeners stay quiet
            pod["metadata"]["labels"]["team"] = "x"
            fake.apply("pods", pod)
            await eventually(lambda: store.snapshot().pods[uid].labels.get("team") == "x", what="label update")
            assert len(changes) == 1
            # an annotation hooks read: one "updated" with that field
            pod["metadata"]["annotations"]["node.koordinator.sh/extended-resource-spec"] = "{}"
            fake.apply("pods", pod)
            await eventually(lambda: len(changes) == 2, what="annotation change")
            assert changes[1].kind == "updated" and changes[1].fields == frozenset({"annotations"})
            pod["status"]["phase"] = "Succeeded"
            pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"
            fake.apply("pods", pod)
            await eventually(lambda: len(changes) == 3, what="phase+resources change")
            assert changes[2].fields == frozenset({"phase", "resources"})
            fake.delete("pods", "job", "default")
            await eventually(lambda: uid not in store.snapshot().pods, what="delete")
            assert changes[-1].kind == "deleted"

    run(scenario())


def test_relist_after_410_error_event(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    keep = fake.apply("pods", make_pod("keep"))
    doomed = fake.apply("pods", make_pod("doomed"))

    async def scenario() -> None:
        store = StateStore()
        registry = CollectorRegistry()
        async with running(api_settings(fake, tmp_path), store, registry) as informer:
            assert await informer.wait_synced(5)
            watches_before = fake.watch_count("pods")
            # The watch window is lost: the open watch gets ERROR 410 and the delete is never streamed.
            with fake._cond:
                fake._objects["pods"].pop(f"default/{doomed['metadata']['name']}")
                fake._rv += 1
            fake.expire_watches("pods")
            await eventually(lambda: doomed["metadata"]["uid"] not in store.snapshot().pods, what="relist")
            assert keep["metadata"]["uid"] in store.snapshot().pods
            assert fake.list_count("pods") == 2
            await eventually(lambda: fake.watch_count("pods") > watches_before, what="new watch")
            assert registry.get_sample_value(
                "hookserver_informer_relists_total", {"resource": "pods", "reason": "expired"}) == 1.0

    run(scenario())


def test_reconnects_after_server_dies_serving_cache_then_catches_up(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    a = fake.apply("pods", make_pod("a"))
    b = fake.apply("pods", make_pod("b"))

    async def scenario() -> None:
        store = StateStore()
        registry = CollectorRegistry()
        async with running(api_settings(fake, tmp_path), store, registry) as informer:
            assert await informer.wait_synced(5)
            fake.kill()
            await eventually(lambda: store.snapshot().stale, what="stale")
            # still serving from the cache
            assert {a["metadata"]["uid"], b["metadata"]["uid"]} <= set(store.snapshot().pods)
            assert registry.get_sample_value("hookserver_informer_watch_connected", {"resource": "pods"}) == 0.0
            # changes made while we are cut off
            fake.delete("pods", "a", "default")
            c = fake.apply("pods", make_pod("c"))
            b["metadata"]["labels"]["koordinator.sh/qosClass"] = "BE"
            fake.apply("pods", b)
            fake.start()
            await eventually(lambda: not store.snapshot().stale, what="recovery")
            await eventually(lambda: c["metadata"]["uid"] in store.snapshot().pods, what="catch-up")
            snap = store.snapshot()
            assert a["metadata"]["uid"] not in snap.pods
            assert snap.pods[b["metadata"]["uid"]].qos_class == "BE"
            # caught up by re-watching from the last resourceVersion: no relist was needed
            assert fake.list_count("pods") == 1
            assert informer.status()["sources"][0]["errors"] >= 1

    run(scenario())


def test_malformed_events_are_skipped_without_restarting_the_watch(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> None:
        store = StateStore()
        registry = CollectorRegistry()
        async with running(api_settings(fake, tmp_path), store, registry) as informer:
            assert await informer.wait_synced(5)
            watches = fake.watch_count("pods")
            bad_quantity = make_pod("bad-q", cpu="lots")
            no_uid = make_pod("no-uid")
            del no_uid["metadata"]["uid"]
            fake.inject_raw("pods", b"{this is not json")
            fake.inject_raw("pods", json.dumps({"type": "ADDED", "object": bad_quantity}).encode())
            fake.inject_raw("pods", json.dumps({"type": "ADDED", "object": no_uid}).encode())
            fake.inject_raw("pods", json.dumps({"type": "ADDED", "object": "a string"}).encode())
            fake.inject_raw("pods", json.dumps({"type": "ADDED", "object": {"metadata": {"labels": [1]}}}).encode())
            good = fake.apply("pods", make_pod("good"))
            await eventually(lambda: good["metadata"]["uid"] in store.snapshot().pods, what="good pod")
            assert len(store.snapshot().pods) == 1
            assert registry.get_sample_value("hookserver_informer_malformed_objects_total", {"resource": "pods"}) == 5
            assert fake.watch_count("pods") == watches
            assert not store.snapshot().stale

    run(scenario())


def test_bookmarks_advance_resource_version(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> None:
        async with running(api_settings(fake, tmp_path)) as informer:
            assert await informer.wait_synced(5)
            pods = informer.reflectors[0]
            start = int(pods.resource_version)
            # Other resources move the global version; only a BOOKMARK can tell the pod watch about it.
            for i in range(3):
                fake.apply("pods", make_pod(f"other-{i}", node="node-b"))
            target = fake.resource_version
            await eventually(lambda: int(pods.resource_version) >= target, what="bookmark")
            assert int(pods.resource_version) > start and pods.events == 0

    run(scenario())


def test_nodeslo_nodemetric_and_node_labels(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.apply("nodeslos", make_nodeslo(NODE, {"resourceUsedThresholdWithBE": {"enable": True,
                                                                                "cpuSuppressPolicy": "cfsQuota"}}))
    fake.apply("nodeslos", make_nodeslo("node-b", {"cpuBurstStrategy": {"policy": "auto"}}))
    fake.apply("nodemetrics", {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                               "metadata": {"name": NODE},
                               "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}}})

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            snap = store.snapshot()
            threshold = snap.node_slo.resource_used_threshold_with_be
            assert threshold.enable and threshold.cpu_suppress_policy == "cfsQuota"
            assert snap.node_slo.cpu_burst_strategy.policy == "none"  # node-b's NodeSLO is not ours
            assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == f"nodeslo/{NODE}"
            assert snap.node_slo_sources["cpuBurstStrategy"] == "default"
            assert snap.node_metric.metric_collect_policy.report_interval_seconds == 30
            # an invalid update is reported and the previous NodeSLO stays in force
            fake.apply("nodeslos", make_nodeslo(NODE, {"resourceQOSStrategy": {"beClass": {"memoryQOS": {
                "wmarkRatio": 500}}}}))
            await eventually(lambda: "last_error" in informer.slo_report(), what="rejected NodeSLO")
            assert "resourceQOSStrategy.beClass.memoryQOS.wmarkRatio" in informer.slo_report()["last_error"]
            assert store.snapshot().node_slo.resource_used_threshold_with_be.enable
            fake.apply("nodeslos", make_nodeslo(NODE, {"cpuBurstStrategy": {"policy": "cpuBurstOnly"}}))
            await eventually(lambda: store.snapshot().node_slo.cpu_burst_strategy.policy == "cpuBurstOnly",
                             what="NodeSLO update")
            assert not store.snapshot().node_slo.resource_used_threshold_with_be.enable
            fake.delete("nodeslos", NODE)
            await eventually(lambda: store.snapshot().node_slo.cpu_burst_strategy.policy == "none", what="delete")
            assert set(store.snapshot().node_slo_sources.values()) == {"default"}
            report = informer.slo_report()
            assert report["effective"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65

    run(scenario())


def test_missing_crds_mean_defaults_not_an_outage(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.uninstall("nodeslos")
    fake.uninstall("nodemetrics")

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            snap = store.snapshot()
            assert not snap.stale and snap.node_metric is None
            assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_policy == "cpuset"
            assert {s["resource"]: s["absent"] for s in informer.status()["sources"]}["nodeslo"] is True

    run(scenario())


def test_unauthorized_is_an_outage_not_a_crash(fake: FakeApiServer, tmp_path: Path) -> None:
    settings = api_settings(fake, tmp_path)
    fake.token = "rotated"  # our kubeconfig still has the old token

    async def scenario() -> None:
        store = StateStore()
        async with running(settings, store) as informer:
            await eventually(lambda: informer.status()["sources"][0]["errors"] >= 2, what="retries")
            assert store.snapshot().stale and not informer.synced()
            assert "401" in informer.status()["sources"][0]["last_error"]

    run(scenario())


def test_periodic_resync_relists(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> None:
        async with running(api_settings(fake, tmp_path, resync_period_s=0.1)) as informer:
            assert await informer.wait_synced(5)
            await eventually(lambda: fake.list_count("pods") >= 3, what="resync lists")

    run(scenario())


def test_stop_is_prompt_while_watches_are_open(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> float:
        informer_ctx = running(api_settings(fake, tmp_path, watch_timeout_s=600))
        informer = await informer_ctx.__aenter__()
        assert await informer.wait_synced(5)
        started = time.monotonic()
        await informer_ctx.__aexit__(None, None, None)
        return time.monotonic() - started

    assert run(scenario()) < 1.0


def test_fast_event_application(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.bookmark_interval_s = 0
    n = 1000

    async def scenario() -> float:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            started = time.perf_counter()
            for i in range(n):
                fake.apply("pods", make_pod(f"p{i}", uid=f"uid-{i}"))
            await eventually(lambda: len(store.snapshot().pods) == n, timeout_s=30, what="all events")
            return n / (time.perf_counter() - started)

    rate = run(scenario())
    # Includes the fake producing and serialising each event; the benchmark measures the handler alone.
    assert rate > 300, f"{rate:.0f} events/s"


def test_history_compacted_during_outage_relists_and_drops_deleted_pods(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    gone = fake.apply("pods", make_pod("gone"))

    async def scenario() -> None:
        store = StateStore()
        registry = CollectorRegistry()
        async with running(api_settings(fake, tmp_path), store, registry) as informer:
            assert await informer.wait_synced(5)
            fake.kill()
            await eventually(lambda: store.snapshot().stale, what="stale")
            fake.delete("pods", "gone", "default")
            fresh = fake.apply("pods", make_pod("fresh"))
            fake.compact()  # the apiserver restarted with an empty watch cache
            fake.start()
            await eventually(lambda: fresh["metadata"]["uid"] in store.snapshot().pods, what="relist")
            assert gone["metadata"]["uid"] not in store.snapshot().pods
            await eventually(lambda: not store.snapshot().stale, what="healthy")
            assert registry.get_sample_value(
                "hookserver_informer_relists_total", {"resource": "pods", "reason": "expired"}) == 1.0
            assert registry.get_sample_value("hookserver_informer_cache_pods") == 1.0
            assert registry.get_sample_value("hookserver_informer_stale") == 0.0
            assert registry.get_sample_value(
                "hookserver_informer_seconds_since_last_sync", {"resource": "pods"}) < 5
            late = fake.apply("pods", make_pod("late"))
            await eventually(lambda: late["metadata"]["uid"] in store.snapshot().pods, what="watch after relist")
            assert registry.get_sample_value(
                "hookserver_informer_event_handling_seconds_count", {"resource": "pods"}) == 1

    run(scenario())
