"""`hookctl predict`, `reclaimable` and `nodemetric` over a real debug socket, table and JSON."""

from __future__ import annotations

import json

import pytest

from hookserver.cli.hookctl import main as hookctl_main
from hookserver.debug.server import DebugServer
from hookserver.predictor import FileStatusSink, NodeMetricReporter, predict_view, reclaimable_view
from hookserver.store.timeseries import make_labels
from tests.predictor.conftest import feed, feed_node
from tests.predictor.helpers import GI, NOW, node, pod

PROD = {"koordinator.sh/priority-class": "koord-prod"}


@pytest.fixture
def served(store, make_service, tmp_path, capsys):
    store.set_node(node())
    store.upsert_pod(pod("web-0", labels=PROD, cpu="2", memory="4Gi"))
    store.upsert_pod(pod("fresh", labels=PROD, cpu="1", memory="1Gi", age_s=600))
    feed(store, uid="uid-web-0", cpu=[0.4] * 60, memory=[1.0 * GI] * 60, end=NOW)
    feed(store, uid="uid-fresh", cpu=[0.1] * 60, memory=[0.5 * GI] * 60, end=NOW)
    feed_node(store, cpu=[1.0] * 60, memory=[4.0 * GI] * 60, end=NOW)
    for i in range(60):  # NUMA node 0 (numa_resource's series): node 0.5 cores / 2 GiB, system 0.1 / 1 GiB
        labels = make_labels(numa="0")
        for metric, value in (("numa_cpu_usage", 0.5), ("numa_memory_usage", 2.0 * GI),
                              ("numa_system_cpu_usage", 0.1), ("numa_system_memory_usage", 1.0 * GI)):
            store.series.append((metric, labels), value, ts=NOW - (59 - i) * 10.0)
    service = make_service()
    service.train_once(NOW)
    reporter = NodeMetricReporter(service, FileStatusSink(str(tmp_path / "nodemetric.json"), node_name="node-a"),
                                  settings=service.settings)
    reporter.report_once(NOW)
    server = DebugServer(str(tmp_path / "debug.sock"), store=store, providers={
        "predict": lambda args: predict_view(service, args),
        "reclaimable": lambda args: reclaimable_view(service, args),
        "nodemetric": lambda args: reporter.view(),
    })
    server.start()

    def ctl(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = hookctl_main(["--socket", server.socket_path, *argv])
        out = capsys.readouterr()
        return rc, out.out, out.err

    yield ctl, service
    server.stop(0.1)


def test_predict_one_pod_json_and_table(served):
    ctl, service = served
    rc, out, _ = ctl("predict", "default/web-0", "-o", "json")
    assert rc == 0
    doc = json.loads(out)
    (model,) = doc["models"]
    expected = service.table.predict("uid-web-0")
    assert model["pod"] == "default/web-0" and model["kind"] == "pod" and model["cold"] is False
    assert model["cpu_milli"]["p95"] == expected.cpu("p95") and model["memory_bytes"]["max"] == expected.memory("max")
    assert model["samples"] == 1 and set(model["cpu_milli"]) == {"p60", "p90", "p95", "p98", "max"}
    rc, out, _ = ctl("predict", "default/web-0")
    assert rc == 0
    header = out.splitlines()[1]
    for column in ("MODEL", "KIND", "SAMPLES", "AGE", "COLD", "CPU_P95", "MEM_P98", "MEM_MAX"):
        assert column in header
    assert "default/web-0" in out and "training:" in out and "checkpoints:" in out


def test_predict_selectors(served):
    ctl, _ = served
    assert json.loads(ctl("predict", "--node", "-o", "json")[1])["models"][0]["model"] == "__node__"
    assert json.loads(ctl("predict", "--system", "-o", "json")[1])["models"][0]["model"] == "__node-sys__"
    prod = json.loads(ctl("predict", "--priority", "koord-prod", "-o", "json")[1])["models"][0]
    assert prod["model"] == "__node-koord-prod__" and prod["kind"] == "priority"
    assert json.loads(ctl("predict", "--priority", "none", "-o", "json")[1])["models"][0]["model"] == "__node-__"
    every = json.loads(ctl("predict", "-o", "json")[1])["models"]
    assert [m["kind"] for m in every][:2] == ["node", "system"] and len(every) == 1 + 1 + 5 + 2
    fresh = next(m for m in every if m.get("pod") == "default/fresh")
    assert fresh["cold"] is True


def test_predict_errors_are_one_line(served):
    ctl, _ = served
    rc, _, err = ctl("predict", "--priority", "koord-gold")
    assert rc == 1 and "unknown priority class 'koord-gold'" in err and "\n" not in err.strip()
    rc, _, err = ctl("predict", "default/nope")
    assert rc == 1 and "no pod default/nope" in err


def test_reclaimable_explains_the_published_number(served):
    ctl, service = served
    rc, out, _ = ctl("reclaimable", "-o", "json")
    doc = json.loads(out)
    names = [p["predictor"] for p in doc["predictors"]]
    assert names == ["podReclaimablePredictor", "priorityReclaimablePredictor", "minPredictor"]
    pods = {p["name"]: p for p in doc["why"]["pods"]}
    assert pods["fresh"]["counted_as"] == "cold" and pods["fresh"]["peak_cpu_milli"] == 1000
    web = pods["web-0"]
    assert web["counted_as"] == "predicted"
    assert web["peak_cpu_milli"] == int(web["p95_cpu_milli"] * 1.1)
    assert web["reclaimable_cpu_milli"] == 2000 - web["peak_cpu_milli"]
    assert doc["why"]["margin_percent"] == 10 and doc["why"]["allocatable"]["cpu_milli"] == 8000
    published = doc["published"]
    pod_based, priority_based = doc["predictors"][0], doc["predictors"][1]
    assert published["cpu_milli"] == min(pod_based["cpu_milli"], priority_based["cpu_milli"])
    rc, table, _ = ctl("reclaimable")
    assert rc == 0
    assert "minPredictor" in table and "why:" in table and "COUNTED_AS" in table and "cold" in table
    assert "x (1 + 10%)" in table and "formulas:" in table
    formulas = doc["why"]["formulas"]
    assert formulas["published_cpu_milli"].endswith(f"= {published['cpu_milli']}")


def test_nodemetric_shows_the_last_document_and_where_it_went(served, tmp_path):
    ctl, _ = served
    doc = json.loads(ctl("nodemetric", "-o", "json")[1])
    assert doc["target"] == "file" and doc["where"] == str(tmp_path / "nodemetric.json")
    assert doc["last_result"] == "ok" and doc["last_reported_at"] == "2027-01-15T08:00:00.000Z"
    assert doc["status"]["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "1", "memory": "4Gi"}}
    rc, out, _ = ctl("nodemetric")
    assert rc == 0
    assert f"NodeMetric status -> file {tmp_path / 'nodemetric.json'}" in out
    assert "node usage:   cpu 1, memory 4Gi" in out and "prod reclaimable: cpu " in out
    assert "default/web-0" in out and "last result ok" in out
    assert doc["status"]["nodeMetric"]["numaUsages"] == [
        {"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
         "systemUsage": {"resources": {"cpu": "100m", "memory": "1Gi"}}}]
    lines = out.splitlines()
    at = lines.index("  NUMA usage (cpu/memory):")
    assert lines[at + 2].split() == ["0", "500m/2Gi", "100m/1Gi"]


def test_nodemetric_renders_the_numa_usages() -> None:
    from hookserver.debug.render import render_nodemetric

    doc = {"target": "file", "where": "/x", "policy": {}, "status": {"nodeMetric": {
        "nodeUsage": {"resources": {"cpu": "2", "memory": "8Gi"}},
        "numaUsages": [
            {"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "1500m", "memory": "4Gi"}},
             "systemUsage": {"resources": {"cpu": "300m", "memory": "2Gi"}}},
            {"numaNodeID": 1, "nodeUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}}, "systemUsage": {}},
        ]}}}
    lines = render_nodemetric(doc).splitlines()
    at = lines.index("  NUMA usage (cpu/memory):")
    assert lines[at + 1].split() == ["NUMA", "NODE", "SYSTEM"]
    assert lines[at + 2].split() == ["0", "1500m/4Gi", "300m/2Gi"]
    assert lines[at + 3].split() == ["1", "500m/1Gi", "-"]
    no_numa = dict(doc, status={"nodeMetric": {"nodeUsage": {}}})
    assert "NUMA usage" not in render_nodemetric(no_numa)


def test_nodemetric_renders_the_gpu_devices_of_node_and_pods() -> None:
    from hookserver.debug.render import render_nodemetric

    def gpu(uuid: str, minor: int, core: str, memory: str, ratio: str | None, health: bool = True) -> dict:
        resources = {"koordinator.sh/gpu-core": core, "koordinator.sh/gpu-memory": memory}
        if ratio is not None:
            resources["koordinator.sh/gpu-memory-ratio"] = ratio
        return {"type": "gpu", "id": uuid, "minor": minor, "health": health, "resources": resources}

    doc = {"target": "file", "where": "/x", "policy": {}, "status": {
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "2", "memory": "8Gi"},
                                     "devices": [gpu("GPU-aaa", 0, "35", "10752Mi", "13"),
                                                 gpu("GPU-ccc", 2, "100", "1Gi", None, health=False)]}},
        "podsMetric": [{"namespace": "ml", "name": "train", "podUsage": {
            "resources": {"cpu": "1", "memory": "1Gi"}, "devices": [gpu("GPU-aaa", 0, "22", "4Gi", "5")]}}]}}
    lines = render_nodemetric(doc).splitlines()
    at = lines.index("  GPUs (usage devices; core %, memory, memory %):")
    assert lines[at + 1].split() == ["USAGE", "GPU", "ID", "HEALTH", "CORE", "MEMORY", "MEMORY_RATIO"]
    assert lines[at + 2].split() == ["node", "0", "GPU-aaa", "true", "35", "10752Mi", "13"]
    assert lines[at + 3].split() == ["node", "2", "GPU-ccc", "false", "100", "1Gi", "-"]
    assert lines[at + 4].split() == ["ml/train", "0", "GPU-aaa", "true", "22", "4Gi", "5"]
    cpu_node = dict(doc, status={"nodeMetric": {"nodeUsage": {"resources": {"cpu": "2", "memory": "8Gi"}}}})
    assert "GPU" not in render_nodemetric(cpu_node)
