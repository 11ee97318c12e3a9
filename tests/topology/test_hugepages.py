"""koordlet's HugePageReport: hugepages per NUMA zone in the NRT, read from a fixture sysfs tree. Gate off (koordlet's
default) = zeros and the whole MemTotal; on = each zone's `nr_hugepages` x page size, and memory less the pools
(`calTopologyZoneList`). Expected quantities worked out by hand below."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hookserver.debug.render_topology import render_topology
from hookserver.store import StateStore
from hookserver.system.hugepages import read_numa_hugepages
from hookserver.topology.publisher import LocalTopologySink, TopologyPublisher
from tests.topology.sysfs import one_socket_two_numa_four_cpus_each, write_tree


def _pool(root: Path, node: int, size_kb: int, nr: str, free: str) -> None:
    d = root / "sys/devices/system/node" / f"node{node}" / "hugepages" / f"hugepages-{size_kb}kB"
    d.mkdir(parents=True)
    (d / "nr_hugepages").write_text(nr + "\n")
    (d / "free_hugepages").write_text(free + "\n")


def _tree(tmp_path: Path) -> TopologyPublisher:
    """NUMA node 0 (CPUs 0-3, 16 GiB): 512 x 2 MiB = 1 GiB and 2 x 1 GiB = 2 GiB, plus a 64 kB pool Kubernetes has
    no resource for. Node 1 (CPUs 4-7, 16 GiB): a 2 MiB pool whose count is garbage, no 1 GiB pool."""
    roots = write_tree(tmp_path, *one_socket_two_numa_four_cpus_each())
    _pool(tmp_path, 0, 2048, "512", "100")
    _pool(tmp_path, 0, 1048576, "2", "1")
    _pool(tmp_path, 0, 64, "7", "7")
    _pool(tmp_path, 1, 2048, "lots", "0")
    return TopologyPublisher(store=StateStore(), roots=roots, node_name="n1",
                             sink=LocalTopologySink(str(tmp_path / "nrt.json")))


def _zones(publisher: TopologyPublisher) -> dict[str, dict[str, str]]:
    assert publisher.tick() in ("ok", "unchanged"), publisher.last_detail
    out = {}
    for zone in publisher.document["zones"]:
        resources = {}
        for r in zone["resources"]:
            assert r["capacity"] == r["allocatable"] == r["available"]
            resources[r["name"]] = r["capacity"]
        assert list(resources) == sorted(resources)  # koordinator's ZoneResourcesToZoneList order
        out[zone["name"]] = resources
    return out


def test_gate_off_reports_no_hugepages_and_the_whole_memory(tmp_path: Path) -> None:
    publisher = _tree(tmp_path)  # hugepage_report defaults to off, as koordlet's gate
    assert _zones(publisher) == {
        "node-0": {"cpu": "4", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "16Gi"},
        "node-1": {"cpu": "4", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "16Gi"},
    }
    assert publisher.view()["hugepages"] == {"reported": False, "pools": []}


def test_gate_on_reports_each_zones_pools_and_takes_them_out_of_memory(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    publisher = _tree(tmp_path)
    publisher.hugepage_report = True
    with caplog.at_level(logging.WARNING, logger="hookserver.topology.publisher"):
        zones = _zones(publisher)
        _zones(publisher)
    assert zones == {
        # 16 GiB - 1 GiB (2 MiB pages) - 2 GiB (1 GiB pages) = 13 GiB
        "node-0": {"cpu": "4", "hugepages-1Gi": "2Gi", "hugepages-2Mi": "1Gi", "memory": "13Gi"},
        "node-1": {"cpu": "4", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "16Gi"},
    }
    text = render_topology(json.loads(json.dumps(publisher.view())))
    assert "  node-0: cpu 4, memory 13Gi, hugepages-2Mi 1Gi, hugepages-1Gi 2Gi" in text
    assert "  node-1: cpu 4, memory 16Gi\n" in text
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "node1/hugepages/hugepages-2048kB/nr_hugepages" in warnings[0]
    assert publisher.view()["hugepages"]["pools"] == [
        {"node": 0, "resource": "hugepages-2Mi", "total": 512, "free": 100},
        {"node": 0, "resource": "hugepages-1Gi", "total": 2, "free": 1},
        {"node": 1, "resource": "hugepages-2Mi", "total": 0, "free": 0},
    ]


def test_the_reader_keeps_koordlets_two_sizes_and_never_raises(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, *one_socket_two_numa_four_cpus_each())
    _pool(tmp_path, 1, 1048576, "3", "3")
    _pool(tmp_path, 1, 2048, "", "")
    pools, problems = read_numa_hugepages(roots)
    assert [(p.node, p.resource, p.total, p.total_bytes) for p in pools] == [
        (1, "hugepages-2Mi", 0, 0), (1, "hugepages-1Gi", 3, 3 << 30)]
    assert len(problems) == 2 and all("not a page count" in p for p in problems)
    # a sysfs without NUMA directories has no pools and no problems
    assert read_numa_hugepages(type(roots)(sys=str(tmp_path / "nowhere"))) == ((), ())
