"""`pod-cpu-allocs` and the CPU manager policy from the kubelet's `cpu_manager_state` (koordlet's
`calKubeletAllocatedCPUs` / `calGuaranteedCpu`), on real files: koordlet's skip rules, the share pools losing
the kubelet's exclusive CPUs, and a missing, truncated or corrupt file costing one log line and the setting."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.debug.render_topology import render_topology
from hookserver.errors import SystemFileError
from hookserver.store import PodRecord, StateStore
from hookserver.system.kubelet_cpu_state import read_cpu_manager_state
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from hookserver.topology.publisher import LocalTopologySink, TopologyPublisher
from tests.topology.sysfs import one_socket_two_numa_four_cpus_each, write_tree

ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
LS_POOLS = "node.koordinator.sh/cpu-shared-pools"
BE_POOLS = "node.koordinator.sh/be-cpu-shared-pools"

# CPUs 0-3 on NUMA node 0, 4-7 on node 1. The kubelet gave:
#   uid-guaranteed (known, no koordinator QoS): app 1-2, sidecar 6   -> reported as "1-2,6" with its name
#   uid-unknown (not in the store: another agent's view may lag)      -> reported with its uid only
#   uid-ls (koordinator.sh/qosClass LS)                               -> skipped (koordinator manages it)
#   uid-lsr (resource-status cpuset 5)                                -> skipped (koordinator manages it)
#   uid-empty (every container on the shared pool: "")              -> left out (no CPUs)
STATIC_STATE = {
    "policyName": "static",
    "defaultCpuSet": "0,4-5,7",
    "entries": {
        "uid-unknown": {"main": "3"},
        "uid-guaranteed": {"app": "1-2", "sidecar": "6"},
        "uid-ls": {"main": "4"},
        "uid-lsr": {"main": "5"},
        "uid-empty": {"main": ""},
    },
    "checksum": 1234567890,
}


def _pod(uid: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name=uid.removeprefix("uid-"), labels=MappingProxyType(labels or {}),
                     annotations=MappingProxyType(annotations or {}), phase="Running")


def _publisher(tmp_path: Path, *, setting: str = "none") -> tuple[TopologyPublisher, StateStore, Path]:
    roots = write_tree(tmp_path, *one_socket_two_numa_four_cpus_each())
    store = StateStore()
    kubelet = tmp_path / "var-lib-kubelet"
    kubelet.mkdir()
    publisher = TopologyPublisher(store=store, roots=roots, node_name="n1",
                                  sink=LocalTopologySink(str(tmp_path / "nrt.json")),
                                  kubelet_cpu_manager_policy=setting, kubelet_root_dir=str(kubelet))
    return publisher, store, kubelet / "cpu_manager_state"


def _annotations(publisher: TopologyPublisher) -> dict[str, str]:
    assert publisher.tick() in ("ok", "unchanged"), publisher.last_detail
    return dict(publisher.document["metadata"]["annotations"])


def test_static_policy_reports_the_kubelets_exclusive_cpus_as_koordlet_does(tmp_path: Path) -> None:
    publisher, store, state = _publisher(tmp_path)  # the setting says none: the file wins
    state.write_text(json.dumps(STATIC_STATE))
    store.upsert_pod(_pod("uid-guaranteed"))
    store.upsert_pod(_pod("uid-ls", labels={"koordinator.sh/qosClass": "LS"}))
    store.upsert_pod(_pod("uid-lsr", labels={"koordinator.sh/qosClass": "LSR"},
                          annotations={ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": "5"})}))
    annotations = _annotations(publisher)
    assert json.loads(annotations[POLICY]) == {"policy": "static"}
    assert annotations[ALLOCS] == (
        '[{"namespace":"ns","name":"guaranteed","uid":"uid-guaranteed","cpuset":"1-2,6","managedByKubelet":true},'
        '{"uid":"uid-unknown","cpuset":"3","managedByKubelet":true}]'
    )
    # The kubelet's CPUs (1-3, 6) leave both pools; the LSR pod's 5 leaves the LS pool only.
    assert json.loads(annotations[LS_POOLS]) == [{"socket": 0, "node": 0, "cpuset": "0"},
                                                 {"socket": 0, "node": 1, "cpuset": "4,7"}]
    assert json.loads(annotations[BE_POOLS]) == [{"socket": 0, "node": 0, "cpuset": "0"},
                                                 {"socket": 0, "node": 1, "cpuset": "4-5,7"}]
    view = publisher.view()["kubelet_cpu_manager"]
    assert view["policy"] == "static" and view["source"] == str(state) and view["problem"] is None
    text = render_topology(json.loads(json.dumps(publisher.view())))
    assert f"kubelet CPU manager: static (from {state})" in text
    assert "  kubelet static CPU manager: 1-3,6" in text


def test_the_files_none_policy_overrides_a_static_setting(tmp_path: Path) -> None:
    publisher, _, state = _publisher(tmp_path, setting="static")
    state.write_text(json.dumps({"policyName": "none", "defaultCpuSet": "", "checksum": 1}))
    annotations = _annotations(publisher)
    assert json.loads(annotations[POLICY]) == {"policy": "none"}
    assert annotations[ALLOCS] == "null"


def test_a_container_cpuset_that_does_not_parse_loses_only_that_container(tmp_path: Path) -> None:
    publisher, _, state = _publisher(tmp_path)
    state.write_text(json.dumps({"policyName": "static", "defaultCpuSet": "0-5",
                                 "entries": {"uid-a": {"bad": "7-6", "good": "6"}}, "checksum": 1}))
    annotations = _annotations(publisher)
    assert json.loads(annotations[ALLOCS]) == [{"uid": "uid-a", "cpuset": "6", "managedByKubelet": True}]
    assert "container bad" in publisher.view()["kubelet_cpu_manager"]["problem"]


@pytest.mark.parametrize("text, says", [
    ("", "empty"),
    ('{"policyName":"static","defaultCpuSet":"0","entries":{"uid-a":{"main":"1-', "truncated or corrupt"),
    ("\x00\x17garbage", "truncated or corrupt"),
    ('["static"]', "not the kubelet's checkpoint"),
    ('{"defaultCpuSet":"0"}', "no policyName"),
    ('{"policyName":"static","defaultCpuSet":"0-x"}', "defaultCpuSet"),
    ('{"policyName":"static","defaultCpuSet":"0","entries":{"containerid":"1-2"}}', "v1 checkpoint"),
])
def test_a_bad_checkpoint_is_a_clear_error_from_the_reader(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "cpu_manager_state").write_text(text)
    with pytest.raises(SystemFileError, match=says) as info:
        read_cpu_manager_state(str(tmp_path))
    assert info.value.path == str(tmp_path / "cpu_manager_state")


def test_missing_or_corrupt_file_is_one_log_line_and_the_setting(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    publisher, _, state = _publisher(tmp_path, setting="static")
    logger = "hookserver.topology.publisher"
    with caplog.at_level(logging.INFO, logger=logger):
        for _ in range(3):  # missing
            annotations = _annotations(publisher)
            assert json.loads(annotations[POLICY]) == {"policy": "static"} and annotations[ALLOCS] == "null"
        missing = [r for r in caplog.records if r.name == logger]
        assert len(missing) == 1 and missing[0].levelno == logging.INFO
        assert "no cpu_manager_state" in missing[0].getMessage()
        caplog.clear()
        state.write_text(json.dumps(STATIC_STATE)[:40])  # truncated mid-write
        for _ in range(3):
            annotations = _annotations(publisher)
            assert json.loads(annotations[POLICY]) == {"policy": "static"} and annotations[ALLOCS] == "null"
        corrupt = [r for r in caplog.records if r.name == logger]
        assert len(corrupt) == 1 and corrupt[0].levelno == logging.WARNING
        assert "truncated or corrupt" in corrupt[0].getMessage() and "using the setting (static)" in corrupt[0].getMessage()
        caplog.clear()
        state.write_text(json.dumps(STATIC_STATE))  # the kubelet wrote it whole again
        annotations = _annotations(publisher)
        assert json.loads(annotations[ALLOCS])[0]["uid"] == "uid-guaranteed"
        recovered = [r.getMessage() for r in caplog.records if r.name == logger]
        assert recovered == [f"kubelet CPU manager: policy static from {state}"]


def test_no_kubelet_root_dir_reads_nothing(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, *one_socket_two_numa_four_cpus_each())
    publisher = TopologyPublisher(store=StateStore(), roots=roots, node_name="n1",
                                  sink=LocalTopologySink(str(tmp_path / "nrt.json")),
                                  kubelet_cpu_manager_policy="static")
    annotations = _annotations(publisher)
    assert json.loads(annotations[POLICY]) == {"policy": "static"} and annotations[ALLOCS] == "null"
    assert publisher.view()["kubelet_cpu_manager"]["problem"] is None
