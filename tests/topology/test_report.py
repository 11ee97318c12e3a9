"""The NodeResourceTopology document from sysfs fixture trees, checked against hand-written reports: zones,
koordinator's annotations with their exact names and JSON, and byte-identical text for unchanged inputs."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

from hookserver.store.records import PodRecord
from hookserver.system.cpu_basic import read_cpu_basic_info
from hookserver.system.topology import read_cpu_topology, read_numa_meminfo
from hookserver.system import SystemRoots
from hookserver.topology import ANNOTATION_RESOURCE_STATUS, build_report, canonical, compute_pools
from tests.topology.sysfs import Cpu, one_socket_two_cores, two_sockets_two_numa_eight_cores_two_threads, write_tree

MODEL = "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz"


def _report(roots: SystemRoots, pods: dict[str, PodRecord] | None = None, node: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    cpus = read_cpu_topology(roots)
    pools = compute_pools(cpus, MappingProxyType(pods or {}), node or {})
    return build_report(node_name="n1", cpus=cpus, numa=read_numa_meminfo(roots), basic=read_cpu_basic_info(roots),
                        pools=pools, node_annotations=node or {})


def _zone(name: str, cpu: str, memory: str) -> dict:  # type: ignore[type-arg]
    res = {"cpu": cpu, "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory}
    return {"name": name, "type": "Node",
            "resources": [{"name": k, "capacity": v, "allocatable": v, "available": v} for k, v in res.items()]}


def test_one_socket_two_cores(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, *one_socket_two_cores())
    assert _report(roots) == {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": "n1",
            "labels": {"app.kubernetes.io/managed-by": "Koordinator"},
            "annotations": {
                "kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"none"}',
                "node.koordinator.sh/be-cpu-shared-pools": '[{"socket":0,"node":0,"cpuset":"0-1"}]',
                "node.koordinator.sh/cpu-basic-info":
                    '{"cpuModel":"' + MODEL + '","turboEnabled":true,"vendorID":"GenuineIntel"}',
                "node.koordinator.sh/cpu-shared-pools": '[{"socket":0,"node":0,"cpuset":"0-1"}]',
                "node.koordinator.sh/cpu-topology":
                    '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,"socket":0,"node":0}]}',
                "node.koordinator.sh/pod-cpu-allocs": "null",
                "node.koordinator.sh/reservation": "{}",
                "node.koordinator.sh/system-qos-resource": "{}",
            },
        },
        "topologyPolicies": ["None"],
        "zones": [_zone("node-0", "2", "4Gi")],
    }


def _pod(uid: str, qos: str, cpuset: str) -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name=uid, labels={"koordinator.sh/qosClass": qos},
                     annotations={ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": cpuset})}, phase="Running")


def test_two_sockets_four_numa_nodes_with_bound_pods_and_reserved_cpus(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, *two_sockets_two_numa_eight_cores_two_threads(), smt=True, no_turbo="1")
    pods = {"lse": _pod("lse", "LSE", "0-3,32-35"), "lsr": _pod("lsr", "LSR", "8-9,40-41")}
    node = {"node.koordinator.sh/reservation": '{"resources":{"cpu":"1"},"reservedCPUs":"63"}'}
    report = _report(roots, pods, node)
    ann = report["metadata"]["annotations"]
    assert json.loads(ann["node.koordinator.sh/cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "4-7,36-39"},
        {"socket": 0, "node": 1, "cpuset": "10-15,42-47"},
        {"socket": 1, "node": 2, "cpuset": "16-23,48-55"},
        {"socket": 1, "node": 3, "cpuset": "24-31,56-62"},
    ]
    assert json.loads(ann["node.koordinator.sh/be-cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "4-7,36-39"},
        {"socket": 0, "node": 1, "cpuset": "8-15,40-47"},  # BE may share the LSR pod's CPUs
        {"socket": 1, "node": 2, "cpuset": "16-23,48-55"},
        {"socket": 1, "node": 3, "cpuset": "24-31,56-62"},
    ]
    assert ann["node.koordinator.sh/reservation"] == '{"resources":{"cpu":"1"},"reservedCPUs":"63"}'
    assert ann["node.koordinator.sh/cpu-basic-info"] == '{"cpuModel":"' + MODEL + '","hyperThreadEnabled":true,"vendorID":"GenuineIntel"}'
    detail = json.loads(ann["node.koordinator.sh/cpu-topology"])["detail"]
    assert len(detail) == 64
    # lscpu's logical core numbers: socket 1's first core (sysfs core id 0 again) is core 16; siblings share it
    assert detail[0] == {"id": 0, "core": 0, "socket": 0, "node": 0}
    assert detail[16] == {"id": 16, "core": 16, "socket": 1, "node": 2}
    assert detail[32] == {"id": 32, "core": 0, "socket": 0, "node": 0}
    assert detail[63] == {"id": 63, "core": 31, "socket": 1, "node": 3}
    assert report["zones"] == [_zone(f"node-{n}", "16", "64Gi") for n in range(4)]


def test_offline_cpus_are_left_out_of_topology_zones_and_pools(tmp_path: Path) -> None:
    cpus = [Cpu(0, 0, 0, 0), Cpu(1, 1, 0, 0), Cpu(2, 0, 0, 0), Cpu(3, 1, 0, 0, online=False)]
    roots = write_tree(tmp_path, cpus, {0: 3 * 1024 * 1024 + 1}, no_turbo=None)
    report = _report(roots)
    ann = report["metadata"]["annotations"]
    assert ann["node.koordinator.sh/cpu-topology"] == (
        '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,"socket":0,"node":0},'
        '{"id":2,"core":0,"socket":0,"node":0}]}')
    assert ann["node.koordinator.sh/cpu-shared-pools"] == '[{"socket":0,"node":0,"cpuset":"0-2"}]'
    assert ann["node.koordinator.sh/cpu-basic-info"] == '{"cpuModel":"' + MODEL + '","vendorID":"GenuineIntel"}'
    assert report["zones"] == [_zone("node-0", "3", "3145729Ki")]


def test_unchanged_inputs_give_byte_identical_text_whatever_the_pod_order(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, *two_sockets_two_numa_eight_cores_two_threads())
    pods = [_pod(f"p{i}", "LSR", str(i)) for i in range(10)]
    forward = canonical(_report(roots, {p.uid: p for p in pods}))
    backward = canonical(_report(roots, {p.uid: p for p in reversed(pods)}))
    assert forward == backward
    assert canonical(_report(roots, {p.uid: p for p in pods[1:]})) != forward


def test_no_numa_directory_no_zones_and_no_pool_is_null(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, [Cpu(0, 0, 0, 0)], {})
    report = _report(roots, {"all": _pod("all", "LSE", "0")})
    assert report["zones"] == []
    assert report["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"] == "null"
