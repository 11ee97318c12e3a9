"""The slo-controller-config ConfigMap source against the HTTP fake: the colocation-config and the NodeSLO it
renders reach the store, follow edits, deletes, node labels and the colocation-strategy annotation; an
invalid edit keeps the previous one; a 403 (no RBAC grant) or 404 never holds the agent up. Standalone: the
same from --slo-file."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookserver.config import Settings, load_settings
from hookserver.errors import ConfigError
from hookserver.informer import Informer, InformerSettings
from hookserver.slo.colocation import ANNOTATION_COLOCATION_STRATEGY
from hookserver.store import StateStore
from tests.informer.configmaps import CM_NAME, CM_NAMESPACE, make_configmap, slo_data
from tests.informer.conftest import NODE, api_settings, eventually, run, running
from tests.informer.fake_apiserver import FakeApiServer, make_node, make_nodeslo

ORIGIN = f"configmap {CM_NAMESPACE}/{CM_NAME}"
INPUT = f"apiserver {ORIGIN}"
THRESHOLD_SOURCE = f"{ORIGIN}: resource-threshold-config clusterStrategy"
COLOCATION: dict[str, Any] = {
    "enable": True, "cpuReclaimThresholdPercent": 50, "metricReportIntervalSeconds": 30,
    "nodeConfigs": [
        {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "memoryReclaimThresholdPercent": 40},
        {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}, "memoryReclaimThresholdPercent": 20},
    ],
}


def _source(informer: Informer, name: str = "slo-configmap") -> dict[str, Any]:
    return next(s for s in informer.status()["sources"] if s["resource"] == name)


def _cm_requests(fake: FakeApiServer, *, watch: bool) -> int:
    """Lists (or watches) of the ConfigMap collection (the fake's list_count knows cluster-wide paths only)."""
    path = f"/api/v1/namespaces/{CM_NAMESPACE}/configmaps"
    return sum(1 for p, q in fake.requests if p == path and (q.get("watch") in ("1", "true")) is watch)


def _cpu_reclaim(store: StateStore) -> int:
    return int(store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent)


def _apply_cm(fake: FakeApiServer, colocation: Mapping[str, Any] | None = None,
              threshold: Mapping[str, Any] | None = None, raw: Mapping[str, str] | None = None) -> None:
    fake.apply("configmaps", make_configmap(slo_data(colocation=colocation, threshold=threshold, raw=raw)))


def test_the_configmap_reaches_the_store_and_follows_edits_invalid_edits_and_deletes(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.apply("nodes", make_node(NODE, labels={"pool": "a"}))
    _apply_cm(fake, COLOCATION, {"enable": True, "cpuSuppressThresholdPercent": 55})
    # another ConfigMap in the namespace, and one of the same name elsewhere: never ours
    fake.apply("configmaps", make_configmap(slo_data(colocation={"enable": False}), name="other"))
    fake.apply("configmaps", make_configmap(slo_data(colocation={"enable": False}), namespace="elsewhere"))

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            snap = store.snapshot()
            colocation = snap.colocation
            assert colocation.enabled and colocation.strategy.cpu_reclaim_threshold_percent == 50
            assert colocation.strategy.memory_reclaim_threshold_percent == 40  # nodeConfigs[a]
            assert colocation.layers == (f"{ORIGIN}: colocation-config cluster", "colocation-config nodeConfigs[a]")
            # no NodeSLO object: the NodeSLO is the ConfigMap rendered for this node
            assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 55
            assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == THRESHOLD_SOURCE
            assert snap.node_slo_sources["cpuBurstStrategy"] == "default"
            report = informer.slo_report()
            assert report["colocation"]["input"] == INPUT and report["colocation"]["enabled"] is True
            assert report["input"] == f"apiserver: no NodeSLO {NODE}; rendered for this node from {INPUT}"
            status = _source(informer)
            assert status["objects"] == 1 and status["connected"] and not status["absent"]
            lists = [q for p, q in fake.requests if p == f"/api/v1/namespaces/{CM_NAMESPACE}/configmaps"]
            assert lists and all(q["fieldSelector"] == f"metadata.name={CM_NAME}" for q in lists)

            # an edit is in the store within a second
            started = time.monotonic()
            _apply_cm(fake, {**COLOCATION, "cpuReclaimThresholdPercent": 30}, {"enable": True})
            await eventually(lambda: _cpu_reclaim(store) == 30, timeout_s=1.0, what="the edit")
            assert time.monotonic() - started < 1.0
            assert store.snapshot().node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 65

            # an invalid edit: reported, and the previous colocation and NodeSLO stay in force
            version = store.version
            _apply_cm(fake, {**COLOCATION, "cpuReclaimThresholdPercent": -1},
                      {"enable": True, "cpuSuppressThresholdPercent": 20})
            await eventually(lambda: "last_error" in informer.slo_report()["colocation"], what="the rejection")
            error = informer.slo_report()["colocation"]["last_error"]
            assert error.startswith(f"{ORIGIN}: invalid SLO configuration: ")
            assert "colocation-config.cpuReclaimThresholdPercent" in error and "-1" in error
            assert informer.slo_report()["configmap"]["last_error"] == error
            assert store.version == version and _cpu_reclaim(store) == 30
            assert store.snapshot().node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 65
            assert _source(informer)["skipped"] == 1 and not store.snapshot().stale

            # fixed again: the error clears
            _apply_cm(fake, {**COLOCATION, "cpuReclaimThresholdPercent": 35}, {"enable": True})
            await eventually(lambda: _cpu_reclaim(store) == 35, what="the fix")
            assert "last_error" not in informer.slo_report()["colocation"]

            # deleted: the defaults, colocation off
            fake.delete("configmaps", CM_NAME, CM_NAMESPACE)
            await eventually(lambda: not store.snapshot().colocation.enabled, what="the delete")
            snap = store.snapshot()
            assert snap.colocation.strategy.cpu_reclaim_threshold_percent == 60
            assert set(snap.node_slo_sources.values()) == {"default"}
            assert informer.slo_report()["colocation"]["input"] == f"apiserver: no {ORIGIN}"
            assert _source(informer)["objects"] == 0 and not snap.stale

    run(scenario())


def test_a_nodeslo_object_wins_over_the_configmap_for_the_nodeslo_only(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE, labels={"pool": "a"}))
    _apply_cm(fake, COLOCATION, {"enable": True, "cpuSuppressThresholdPercent": 55})

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            assert store.snapshot().node_slo_sources["resourceUsedThresholdWithBE"] == THRESHOLD_SOURCE
            fake.apply("nodeslos", make_nodeslo(NODE, {"resourceUsedThresholdWithBE": {
                "enable": True, "cpuSuppressThresholdPercent": 45}}))
            await eventually(lambda: store.snapshot().node_slo_sources["resourceUsedThresholdWithBE"] ==
                             f"nodeslo/{NODE}", what="the NodeSLO object")
            snap = store.snapshot()
            assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 45
            assert snap.colocation.enabled and snap.colocation.strategy.cpu_reclaim_threshold_percent == 50
            assert informer.slo_report()["input"] == f"apiserver nodeslo/{NODE}"
            fake.delete("nodeslos", NODE)
            await eventually(lambda: store.snapshot().node_slo_sources["resourceUsedThresholdWithBE"] ==
                             THRESHOLD_SOURCE, what="back to the ConfigMap")

    run(scenario())


def test_node_labels_and_the_colocation_strategy_annotation_re_resolve(fake: FakeApiServer, tmp_path: Path) -> None:
    node = fake.apply("nodes", make_node(NODE, labels={"pool": "a"}))
    _apply_cm(fake, COLOCATION)

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            assert store.snapshot().colocation.strategy.memory_reclaim_threshold_percent == 40
            node["metadata"]["labels"] = {"pool": "b"}
            fake.apply("nodes", node)
            await eventually(lambda: store.snapshot().colocation.strategy.memory_reclaim_threshold_percent == 20,
                             what="nodeConfigs[b]")
            assert store.snapshot().colocation.layers[-1] == "colocation-config nodeConfigs[b]"

            node["metadata"]["annotations"][ANNOTATION_COLOCATION_STRATEGY] = json.dumps(
                {"memoryReclaimThresholdPercent": 33, "enable": False})
            fake.apply("nodes", node)
            await eventually(lambda: store.snapshot().colocation.strategy.memory_reclaim_threshold_percent == 33,
                             what="the annotation")
            assert store.snapshot().colocation.enabled is False  # a node may switch itself off

            node["metadata"]["labels"]["node.koordinator.sh/cpu-reclaim-ratio"] = "0.29"
            fake.apply("nodes", node)
            await eventually(lambda: _cpu_reclaim(store) == 28, what="the ratio label")

            # the kubelet's status updates: the Node changes, the colocation is not published again
            published = store.snapshot().colocation
            for cpu in ("7", "6", "5"):
                node["status"]["allocatable"]["cpu"] = cpu
                node["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = cpu
                fake.apply("nodes", node)
            await eventually(lambda: store.snapshot().node.allocatable["cpu"] == "5", what="the node updates")
            assert store.snapshot().colocation is published

    run(scenario())


def test_forbidden_is_an_absent_source_not_an_outage_and_a_later_grant_is_picked_up(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.apply("nodes", make_node(NODE))
    _apply_cm(fake, COLOCATION)
    fake.forbid("configmaps")

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5)
            assert informer.first_sync_done() and not store.snapshot().stale
            status = _source(informer)
            assert status["absent"] is True and status["stale"] is False and status["connected"] is False
            assert "HTTP 403" in status["last_error"]
            assert f"resourceNames [{CM_NAME}] in namespace {CM_NAMESPACE}" in status["last_error"]
            assert store.snapshot().colocation.enabled is False
            assert informer.slo_report()["colocation"]["input"] == f"apiserver: no {ORIGIN}"
            lists = _cm_requests(fake, watch=False)
            assert lists >= 1
            # granted later (backoff_max_s is 0.1 s here): the next look finds it
            fake.forbid("configmaps", False)
            await eventually(lambda: store.snapshot().colocation.enabled, what="the grant")
            assert _cm_requests(fake, watch=False) > lists and not _source(informer)["absent"]
            await eventually(lambda: _source(informer)["connected"], what="watching")
            assert not store.snapshot().stale

    run(scenario())


def test_a_grant_withdrawn_under_a_running_watch_is_absent_too(fake: FakeApiServer, tmp_path: Path) -> None:
    """The re-watch (watch_timeout_s 1) is refused: handled like the refused list, never stale."""
    fake.apply("nodes", make_node(NODE))
    _apply_cm(fake, COLOCATION)

    async def scenario() -> None:
        store = StateStore()
        stale: list[tuple[bool, str]] = []
        async with running(api_settings(fake, tmp_path, watch_timeout_s=1, backoff_max_s=5), store) as informer:
            assert await informer.wait_synced(5) and store.snapshot().colocation.enabled
            lists = _cm_requests(fake, watch=False)
            assert lists >= 1
            store_set_stale = store.set_stale
            # Any source may flap on a 1 s re-watch that meets a pooled connection the fake just closed
            # (RemoteDisconnected, retried with backoff); what must hold is that the refusal itself never
            # makes this source stale.

            def recording_set_stale(value: bool) -> None:
                source = _source(informer)
                stale.append((bool(source["stale"]), str(source["last_error"] or "")))
                store_set_stale(value)

            store.set_stale = recording_set_stale  # type: ignore[method-assign]
            fake.forbid("configmaps")
            await eventually(lambda: _source(informer)["absent"], timeout_s=5, what="the refused re-watch")
            assert _cm_requests(fake, watch=False) == lists  # the watch said so, not a list
            assert "HTTP 403" in _source(informer)["last_error"] and not store.snapshot().colocation.enabled
            assert stale and not [error for was_stale, error in stale if was_stale and "HTTP 403" in error]
            await eventually(informer.synced, timeout_s=5, what="every source healthy")

    run(scenario())


def test_not_served_is_absent_and_an_empty_setting_switches_the_source_off(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.uninstall("configmaps")

    async def scenario() -> None:
        async with running(api_settings(fake, tmp_path)) as informer:
            assert await informer.wait_synced(5) and _source(informer)["absent"] is True
        async with running(api_settings(fake, tmp_path, slo_configmap="")) as informer:
            assert await informer.wait_synced(5)
            assert [s["resource"] for s in informer.status()["sources"]] == ["pods", "node", "nodeslo", "nodemetric"]
            assert informer.slo_report()["colocation"]["input"] == "defaults"
            assert "configmap" not in informer.slo_report()

    run(scenario())


def test_the_setting_names_another_configmap(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    _apply_cm(fake, {"enable": False})
    fake.apply("configmaps", make_configmap(slo_data(colocation={"enable": True}), name="slo", namespace="koord"))

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path, slo_configmap="koord/slo"), store) as informer:
            assert await informer.wait_synced(5)
            assert store.snapshot().colocation.enabled
            assert informer.slo_report()["colocation"]["input"] == "apiserver configmap koord/slo"

    run(scenario())


def test_an_invalid_configmap_at_start_means_defaults_with_the_error(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    _apply_cm(fake, raw={"colocation-config": "{not json"})

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            assert await informer.wait_synced(5) and informer.first_sync_done()
            report = informer.slo_report()["colocation"]
            assert report["enabled"] is False and "colocation-config: not valid JSON" in report["last_error"]
            assert not store.snapshot().stale and _source(informer)["skipped"] == 1

    run(scenario())


@pytest.mark.parametrize("value", ["koordinator-system", "a/b/c", "Koordinator-System/x", "/x", "ns/"])
def test_a_malformed_setting_is_a_clear_config_error(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(overrides={"node_name": "n", "informer": {"slo_configmap": value}}, environ={})
    assert "slo_configmap" in str(info.value) and "<namespace>/<name>" in str(info.value)
    assert InformerSettings(slo_configmap="").slo_configmap_ref is None


def test_standalone_slo_file_with_a_colocation_config(tmp_path: Path) -> None:
    slo_file = tmp_path / "slo.yaml"

    def write(colocation: dict[str, Any]) -> None:
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CM_NAME},
               "data": slo_data(colocation=colocation)}
        tmp = slo_file.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc))
        os.replace(tmp, slo_file)

    write(COLOCATION)
    settings = Settings(node_name="host-1", standalone=True, slo_file=str(slo_file),
                        informer=InformerSettings(slo_file_poll_s=0.02, node_labels={"pool": "b"}))

    async def scenario() -> None:
        store = StateStore()
        async with running(settings, store) as informer:
            assert await informer.wait_synced(5)
            colocation = store.snapshot().colocation
            assert colocation.enabled and colocation.strategy.memory_reclaim_threshold_percent == 20
            assert colocation.layers == (f"file {slo_file}: colocation-config cluster",
                                         "colocation-config nodeConfigs[b]")
            assert informer.slo_report()["colocation"]["input"] == f"file {slo_file}"
            write({**COLOCATION, "cpuReclaimThresholdPercent": 45})
            await eventually(lambda: _cpu_reclaim(store) == 45, what="the reload")
            write({**COLOCATION, "cpuCalculatePolicy": 7})  # koordinator's string type refuses a number
            await eventually(lambda: "last_error" in informer.slo_report()["colocation"], what="the bad file")
            assert "colocation-config.cpuCalculatePolicy" in informer.slo_report()["colocation"]["last_error"]
            assert _cpu_reclaim(store) == 45 and store.snapshot().colocation.enabled

    run(scenario())


def test_forbidden_stays_an_outage_for_the_other_kinds(fake: FakeApiServer, tmp_path: Path) -> None:
    """Only the ConfigMap source tolerates 403: a NodeSLO the agent may not read is a broken deployment."""
    fake.apply("nodes", make_node(NODE))
    fake.forbid("nodeslos")

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            await eventually(lambda: _source(informer, "nodeslo")["errors"] >= 2, what="retries")
            assert store.snapshot().stale and not informer.first_sync_done()
            assert not _source(informer, "nodeslo")["absent"]

    run(scenario())
