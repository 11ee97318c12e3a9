"""The NodeMetric status writer against the HTTP fake: status subresource, conflicts, missing object or CRD."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from hookserver.informer.nodemetric_status import NodeMetricStatusWriter, json_merge_patch
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.predictor import NodeMetricReporter, PredictorMetrics, PredictorService, PredictorSettings
from hookserver.store import StateStore
from tests.informer.conftest import NODE
from tests.informer.fake_apiserver import FakeApiServer

STATUS = {
    "updateTime": "2026-11-23T08:00:00Z",
    "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}}},
    "podsMetric": [{"name": "a", "namespace": "default", "podUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}}],
    "prodReclaimableMetric": {"resource": {"resources": {"cpu": "2", "memory": "3Gi"}}},
}


def nodemetric(name: str = NODE, status: dict | None = None) -> dict:
    obj = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name},
           "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}}
    if status is not None:
        obj["status"] = status
    return obj


def writer(fake: FakeApiServer, tmp_path: Path, sleeps: list[float] | None = None) -> NodeMetricStatusWriter:
    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))
    return NodeMetricStatusWriter(transport, node_name=NODE, timeout_s=5,
                                  sleep=(sleeps.append if sleeps is not None else lambda s: None))


def test_merge_patch_turns_old_into_new():
    old = {"a": 1, "b": {"x": 1, "y": 2}, "c": [1], "gone": {"z": 1}}
    new = {"a": 1, "b": {"x": 3}, "c": [2], "d": 4}
    assert json_merge_patch(old, new) == {"gone": None, "b": {"y": None, "x": 3}, "c": [2], "d": 4}


def test_status_goes_through_the_status_subresource_with_its_resource_version(fake: FakeApiServer, tmp_path: Path):
    fake.apply("nodemetrics", nodemetric(status={"podsMetric": [{"name": "old"}], "stale": {"x": 1}}))
    rv = fake.get("nodemetrics", NODE)["metadata"]["resourceVersion"]
    result = writer(fake, tmp_path).deliver(STATUS)
    assert (result.result, result.attempts) == ("ok", 1)
    stored = fake.get("nodemetrics", NODE)
    assert stored["status"] == STATUS  # exactly the document: keys that were there before are gone
    assert stored["spec"] == nodemetric()["spec"]  # the spec is untouched
    kind, name, patch = fake.patches[-1]
    assert (kind, name) == ("nodemetrics", NODE)
    assert patch["metadata"] == {"resourceVersion": rv}
    assert patch["status"]["stale"] is None
    assert ("/apis/slo.koordinator.sh/v1alpha1/nodemetrics/node-a/status", {"method": "PATCH"}) in fake.requests
    # the apiserver names the field manager (and the audit log the client) after our User-Agent
    assert fake.writes[-1].manager == "hookserver"


def test_conflict_is_retried_with_a_fresh_read(fake: FakeApiServer, tmp_path: Path):
    fake.apply("nodemetrics", nodemetric())
    fake.fail_next_patches(2, 409)
    sleeps: list[float] = []
    result = writer(fake, tmp_path, sleeps).deliver(STATUS)
    assert (result.result, result.attempts) == ("ok", 3)
    assert len(sleeps) == 2 and 0.010 <= sleeps[0] <= 0.011 and 0.050 <= sleeps[1] <= 0.055
    assert fake.get("nodemetrics", NODE)["status"] == STATUS


def test_a_real_stale_resource_version_conflicts_then_succeeds(fake: FakeApiServer, tmp_path: Path):
    fake.apply("nodemetrics", nodemetric())
    w = writer(fake, tmp_path)
    real_get = w._transport.get_json
    calls = {"n": 0}

    def racing_get(path, params, *, timeout_s):
        obj = real_get(path, params, timeout_s=timeout_s)
        calls["n"] += 1
        if calls["n"] == 1:  # someone else writes between our read and our patch
            fake.apply("nodemetrics", {**nodemetric(), "metadata": {"name": NODE, "labels": {"touched": "yes"}}})
        return obj

    w._transport.get_json = racing_get  # type: ignore[method-assign]
    result = w.deliver(STATUS)
    assert (result.result, result.attempts) == ("ok", 2)


def test_endless_conflicts_give_up_after_four_tries(fake: FakeApiServer, tmp_path: Path):
    fake.apply("nodemetrics", nodemetric())
    fake.fail_next_patches(10, 409)
    result = writer(fake, tmp_path).deliver(STATUS)
    assert (result.result, result.attempts) == ("error", 4)
    assert "409" in result.detail


def test_missing_object_and_missing_crd_are_not_found(fake: FakeApiServer, tmp_path: Path):
    w = writer(fake, tmp_path)
    result = w.deliver(STATUS)
    assert result.result == "not_found" and "CRD" in result.detail
    fake.uninstall("nodemetrics")
    assert w.deliver(STATUS).result == "not_found"


def test_outage_is_an_error_result(fake: FakeApiServer, tmp_path: Path):
    w = writer(fake, tmp_path)
    fake.kill()
    result = w.deliver(STATUS)
    assert result.result == "error"


def test_reporter_logs_once_per_state_and_recovers(fake: FakeApiServer, tmp_path: Path, caplog):
    store = StateStore()
    registry = CollectorRegistry()
    metrics = PredictorMetrics(registry, node=NODE)
    settings = PredictorSettings()
    service = PredictorService(settings, store=store, checkpoint_dir=str(tmp_path / "p"), metrics=metrics)
    reporter = NodeMetricReporter(service, writer(fake, tmp_path), settings=settings, metrics=metrics)
    caplog.set_level(logging.INFO, logger="hookserver.predictor.reporter")
    for _ in range(5):
        assert reporter.report_once().result == "not_found"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not_found" in warnings[0].getMessage()
    fake.apply("nodemetrics", nodemetric())
    assert reporter.report_once().result == "ok"
    assert any("again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
    view = reporter.view()
    assert view["target"] == "apiserver" and view["where"].endswith("/nodemetrics/node-a")
    assert view["last_error"] and view["last_reported_at"] and view["status"]["updateTime"]
    assert registry.get_sample_value("hookserver_nodemetric_reports_total",
                                     {"target": "apiserver", "result": "not_found"}) == 5
    reported = fake.get("nodemetrics", NODE)["status"]
    assert reported["nodeMetric"]["nodeUsage"] == {}  # no samples yet: an empty ResourceMap, as koordlet sends
    assert reported["prodReclaimableMetric"] == {"resource": {}}  # no node allocatable: prediction failed


@pytest.mark.parametrize("code", [500, 503])
def test_server_errors_are_not_retried_within_a_report(fake: FakeApiServer, tmp_path: Path, code: int):
    fake.apply("nodemetrics", nodemetric())
    fake.fail_next_patches(1, code)
    result = writer(fake, tmp_path).deliver(STATUS)
    assert (result.result, result.attempts) == ("error", 1)
    assert writer(fake, tmp_path).deliver(STATUS).result == "ok"  # the next report goes through


def test_outage_loses_only_the_reports_inside_it(fake: FakeApiServer, tmp_path: Path):
    fake.apply("nodemetrics", nodemetric())
    store = StateStore()
    settings = PredictorSettings()
    service = PredictorService(settings, store=store, checkpoint_dir=str(tmp_path / "p"))
    reporter = NodeMetricReporter(service, writer(fake, tmp_path), settings=settings)
    assert reporter.report_once(1_800_000_000.0).result == "ok"
    fake.kill()
    assert reporter.report_once(1_800_000_060.0).result == "error"
    fake.start()  # same port, same objects
    assert reporter.report_once(1_800_000_120.0).result == "ok"
    assert fake.get("nodemetrics", NODE)["status"]["updateTime"] == "2027-01-15T08:02:00Z"  # fresh, not a replay
    assert reporter.view()["failures"] == 1


def test_our_own_status_writes_do_not_republish_the_spec(fake: FakeApiServer, tmp_path: Path):
    import asyncio

    from tests.informer.conftest import api_settings, running

    fake.apply("nodemetrics", nodemetric())
    store = StateStore()

    async def scenario() -> None:
        async with running(api_settings(fake, tmp_path), store=store) as informer:
            assert await informer.wait_synced(5)
            for _ in range(50):
                if store.snapshot().node_metric is not None:
                    break
                await asyncio.sleep(0.02)
            version = store.version
            w = writer(fake, tmp_path)
            for _ in range(3):
                assert (await asyncio.to_thread(w.deliver, STATUS)).result == "ok"
            await asyncio.sleep(0.3)  # the watch delivers the three MODIFIED events
            assert store.version == version
            fake.apply("nodemetrics", {**nodemetric(), "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}}})
            for _ in range(100):
                if store.snapshot().node_metric.metric_collect_policy.report_interval_seconds == 30:
                    break
                await asyncio.sleep(0.02)
            assert store.snapshot().node_metric.metric_collect_policy.report_interval_seconds == 30

    asyncio.run(scenario())
