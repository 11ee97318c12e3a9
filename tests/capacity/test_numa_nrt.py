"""NUMA-level batch capacity in the NodeResourceTopology as published: the capacity publisher and the NRT
publisher joined by `link_numa_zones`, on a scripted node (tests/capacity/world.py) with a two-zone sysfs.

The node: 8 cores / 32 GiB, the kubelet reserving 500m / 2 GiB, system usage 500m / 1 GiB, no pods; sysfs
gives two NUMA nodes of 4 CPUs / 16 GiB. Worked out by hand (koord-manager's rules, defaults 60 % / 65 %):
  node:   cpu 8000 - 3200 - max(500, 500) = 4300;  memory 34359738368 - 12025908428 - max(1 GiB, 2 GiB) = 20186346292
  a zone: cpu 4000 - 1600 - max(250, 250) = 2150;  memory 17179869184 - int(17179869184 x 0.35) = 6012954214
          - max(512 MiB, 1 GiB) = 10093173146;  two zones: 4300 and 20186346292, the node's figures exactly.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.capacity import CapacityDelivery, CapacityPublisher, CapacitySettings
from hookserver.capacity.numa_link import link_numa_zones
from hookserver.debug.render_capacity import render_capacity
from hookserver.debug.render_topology import render_topology
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from hookserver.topology.publisher import LocalTopologySink, TopologyPublisher
from tests.capacity.world import GI, World, colocation, ls_pod
from tests.topology.sysfs import one_socket_two_numa_four_cpus_each, write_tree

ZONE_CPU, ZONE_MEMORY = "2150", "10093173146"


def _joined(tmp_path: Path, world: World, evidence: dict[str, str] | None = None
            ) -> tuple[CapacityPublisher, TopologyPublisher]:
    roots = write_tree(tmp_path, *one_socket_two_numa_four_cpus_each())
    facts = evidence if evidence is not None else {}
    capacity = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10.0), sink=world.sink,
                                 standalone=False, clock=world.clock,
                                 koord_manager_evidence=lambda: facts.get("koord-manager", ""))
    topology = TopologyPublisher(store=world.store, roots=roots, node_name="node-a",
                                 sink=LocalTopologySink(str(tmp_path / "nrt.json")))
    link_numa_zones(capacity, topology)
    topology.tick()  # the NRT exists before the capacity tick reads its zones, as koord-manager needs it to
    return capacity, topology


def _published(tmp_path: Path, world: World | None = None, evidence: dict[str, str] | None = None
               ) -> tuple[World, CapacityPublisher, TopologyPublisher]:
    """A joined pair after the first write (30 s of samples: past the warm-up)."""
    world = world if world is not None else World()
    capacity, topology = _joined(tmp_path, world, evidence)
    world.sample(30)
    outcome = capacity.tick()
    assert outcome.state == "published", outcome
    return world, capacity, topology


def _batch(document: dict[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    return {zone["name"]: {r["name"]: {k: r[k] for k in ("capacity", "allocatable", "available")}
                           for r in zone["resources"] if r["name"].startswith("kubernetes.io/batch-")}
            for zone in document["zones"]}


NONE: dict[str, dict[str, dict[str, str]]] = {"node-0": {}, "node-1": {}}


def _sent(topology: TopologyPublisher) -> dict[str, dict[str, dict[str, str]]]:
    """The batch figures of the NRT document after the topology publisher's next round."""
    topology.tick()
    return _batch(topology.document)


def _figure(value: str) -> dict[str, str]:
    return {"capacity": value, "allocatable": value, "available": value}


def test_the_nrt_zones_carry_the_batch_figures_of_the_offer_on_the_node(tmp_path: Path) -> None:
    world = World()
    capacity, topology = _joined(tmp_path, world)
    assert _batch(topology.document) == {"node-0": {}, "node-1": {}}
    world.sample(30)
    outcome = capacity.tick()
    assert outcome.state == "published" and outcome.values[BATCH_CPU] == "4300", outcome
    assert outcome.values[BATCH_MEMORY] == "20186346292"
    assert topology.tick() == "ok"
    zone = {BATCH_CPU: _figure(ZONE_CPU), BATCH_MEMORY: _figure(ZONE_MEMORY)}
    assert _batch(topology.document) == {"node-0": zone, "node-1": zone}
    names = [r["name"] for r in topology.document["zones"][0]["resources"]]
    assert names == sorted(names) and names[3:5] == [BATCH_CPU, BATCH_MEMORY]  # koordinator keeps them sorted
    # in step: the zones add up to what the Node is offered
    assert sum(int(z[BATCH_CPU]["allocatable"]) for z in _batch(topology.document).values()) == 4300
    assert sum(int(z[BATCH_MEMORY]["allocatable"]) for z in _batch(topology.document).values()) == 20186346292
    assert (tmp_path / "nrt.json").read_text().count(ZONE_MEMORY) == 6  # capacity, allocatable, available x 2
    assert "node-1: cpu 4, memory 16Gi, batch-cpu 2150, batch-memory 10093173146" in render_topology(topology.view())


@pytest.mark.parametrize(("status", "cpu", "note"), [
    # bound to NUMA node 1: its 400m of usage counts there only (node 4300 - 400 = 3900 = 2150 + 1750)
    ('{"numaNodeResources":[{"node":1,"resources":{"cpu":"1"}}]}', ["2150", "1750"], ""),
    # a binding that does not decode: koord-manager splits the pod over both zones (200m each), and hookctl says so
    ('{"numaNodeResources":[{"node":"1"}]}', ["1950", "1950"], "NUMA binding unreadable, counted on every zone"),
])
def test_the_pods_numa_binding_is_read_from_its_resource_status(tmp_path: Path, status: str, cpu: list[str],
                                                                note: str) -> None:
    world = World()
    pod = replace(ls_pod("db", cpu="1"), annotations=MappingProxyType({ANNOTATION_RESOURCE_STATUS: status}))
    world.add_pod(pod, 0.4, 0.5 * GI)
    capacity, _ = _joined(tmp_path, world)
    world.sample(30)
    outcome = capacity.tick()
    assert outcome.values[BATCH_CPU] == "3900", outcome
    assert [z.batch_cpu for z in capacity.last_zones] == cpu
    assert any(note in n for n in capacity.last_notes) if note else not capacity.last_notes


def test_zones_move_only_with_the_node_offer(tmp_path: Path) -> None:
    world, capacity, topology = _published(tmp_path)
    world.system = (0.7, 1.0 * GI)  # +200m: node 4300 -> 4100 (under the 10 % diff: the Node keeps 4300)
    world.sample(40)
    held = capacity.tick()
    assert held.action == "none" and world.node.allocatable[BATCH_CPU] == "4300", held
    assert [z.batch_cpu for z in capacity.last_zones] == ["2050", "2050"]  # computed now, 2 x 2050 = 4100
    assert _sent(topology)["node-0"][BATCH_CPU] == _figure(ZONE_CPU)  # still the 4300 tick's
    world.sample(300)
    refresh = capacity.tick()
    assert refresh.action == "write" and world.node.allocatable[BATCH_CPU] == "4100", refresh
    assert _sent(topology)["node-1"][BATCH_CPU] == _figure("2050")


def test_a_restarted_agent_puts_the_zones_back_beside_the_offer_it_finds_on_the_node(tmp_path: Path) -> None:
    world = World()
    previous = {BATCH_CPU: "4300", BATCH_MEMORY: "20186346292", MID_CPU: "0", MID_MEMORY: "0"}
    world.set_offer(previous, owner="hookserver")  # what the previous agent process left on the Node
    capacity, topology = _joined(tmp_path, world)
    world.sample(3)
    assert capacity.tick().state == "warming-up"
    assert _sent(topology) == NONE
    world.sample(30)
    outcome = capacity.tick()
    assert outcome.state == "published" and outcome.action == "none", outcome  # the same figure: no write
    zone = {BATCH_CPU: _figure(ZONE_CPU), BATCH_MEMORY: _figure(ZONE_MEMORY)}
    assert _sent(topology) == {"node-0": zone, "node-1": zone}


def test_no_zone_figures_while_koord_manager_publishes(tmp_path: Path) -> None:
    evidence: dict[str, str] = {}
    world, capacity, topology = _published(tmp_path, evidence=evidence)
    assert _sent(topology)["node-0"]
    evidence["koord-manager"] = "NodeSLO node-a exists"
    world.sample(10)
    outcome = capacity.tick()
    assert outcome.action == "withdraw" and outcome.state == "koord-manager", outcome
    assert _sent(topology) == NONE
    assert capacity.last_zones  # still computed, for hookctl
    world.sample(10)
    capacity.tick()
    assert _sent(topology) == NONE


def test_no_zone_figures_when_another_writer_owns_the_offer(tmp_path: Path) -> None:
    world, capacity, topology = _published(tmp_path)
    assert _sent(topology)["node-0"]
    world.system = (2.0, 1.0 * GI)  # a big move: the next write is refused, another manager owns the fields
    world.sample(20)
    world.sink.answers = [CapacityDelivery("conflict", "field managed by koordinator-manager",
                                           conflicts=(("koordinator-manager", BATCH_CPU),))]
    assert capacity.tick().state == "yielded"
    assert _sent(topology) == NONE


def test_no_zone_figures_once_another_manager_took_the_fields(tmp_path: Path) -> None:
    world, capacity, topology = _published(tmp_path)
    assert _sent(topology)["node-0"]
    world.other_writer("koordinator-manager", {BATCH_CPU: "1000", BATCH_MEMORY: "1Gi"})
    world.sample(10)
    assert capacity.tick().state == "yielded"
    assert _sent(topology) == NONE


def test_a_withdrawn_offer_takes_its_zones_with_it(tmp_path: Path) -> None:
    world = World()
    world.store.set_colocation(colocation(degradeTimeMinutes=1))
    world, capacity, topology = _published(tmp_path, world)
    world.clock.t += 61  # the node's samples are stale: koord-manager's degrade
    assert capacity.tick().action == "withdraw"
    assert _sent(topology) == NONE


def test_a_failed_write_keeps_the_zones_of_the_offer_still_on_the_node(tmp_path: Path) -> None:
    world, capacity, topology = _published(tmp_path)
    world.system = (2.0, 1.0 * GI)  # a big move: a write is due, and fails
    world.sample(20)
    world.sink.answers = [CapacityDelivery("error", "apiserver down")]
    assert capacity.tick().state == "error"
    assert _sent(topology)["node-0"][BATCH_CPU] == _figure(ZONE_CPU)


def test_hookctl_capacity_shows_the_zones_beside_the_node(tmp_path: Path) -> None:
    _, capacity, _ = _published(tmp_path)
    doc = capacity.view()
    zones = doc["zones"]
    assert [z["zone"] for z in zones["computed"]] == ["node-0", "node-1"]
    assert zones["sum"] == {"batch_cpu_milli": 4300, "batch_memory_milli_bytes": 20186346292000}
    assert zones["node"] == zones["sum"]
    assert zones["published"]["node-1"] == {BATCH_CPU: ZONE_CPU, BATCH_MEMORY: ZONE_MEMORY}
    text = render_capacity(doc)
    assert "zones (NodeResourceTopology" in text
    assert "sum of zones: cpu 4.300" in text and "node before normalization and third-party: cpu 4.300" in text
    assert "node-0 cpu:    max(4000 - 1600 - 250 - 0, 0) = 2150m" in text
