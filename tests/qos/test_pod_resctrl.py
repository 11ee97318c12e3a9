"""PodResctrl (koordlet's Resctrl hook): the annotation's schemata by koordlet's rules on scripted facts
(hand-computed masks), and the whole round on a fixture resctrl tree with the class-level reconciler beside
it: groups made, tasks moved once and to one group, groups removed when the pod goes, on gate-off and by
`hookserver cleanup`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.cli.serve import main
from qos.isolation.pod_resctrl import PodResctrl, ResctrlAnnotationError, pod_schemata
from qos.resctrl import Resctrl
from qos.snapshot.kernel import ResctrlFacts
from qos.snapshot.pod_resctrl_reader import ANNOTATION_POD_RESCTRL as ANN
from tests.qos.helpers import pod, snapshot
from tests.qos.part2_helpers import container, kernel, pod_kernel
from tests.qos.part2_stack import add_pod, build_stack

# 11 ways (cbm 7ff), two L3 and two MB domains, Intel.
FACTS = ResctrlFacts(root_exists=True, cat=True, mba=True, cbm_bits=11, l3_domains=("0", "1"), mb_domains=("0", "1"))


def _ann(**config: object) -> str:
    return json.dumps(config)


@pytest.mark.parametrize(("config", "lines"), [
    # ceil(11 × 50 %) = 6 ways from 0: 0x3f; MB 35 % rounds up to 40
    ({"llc": {"schemata": {"range": [0, 50]}}, "mb": {"schemata": {"percent": 35}}}, ["L3:0=3f;1=3f", "MB:0=40;1=40"]),
    # 10 %..80 %: ways ceil(1.1)=2 .. ceil(8.8)=9 -> bits 2..8 = 0x1fc
    ({"llc": {"schemata": {"range": [10, 80]}}}, ["L3:0=1fc;1=1fc"]),
    # per cache overrides the all-cache value for its id
    ({"llc": {"schemata": {"range": [0, 100]}, "schemataPerCache": [{"cacheID": 1, "range": [50, 100]}]}},
     ["L3:0=7ff;1=7c0"]),
    ({"mb": {"schemata": {"percent": 100}, "schemataPerCache": [{"cacheID": 0, "percent": 20}]}}, ["MB:0=20;1=100"]),
    ({}, []),
])
def test_schemata_follow_koordlet(config: dict[str, object], lines: list[str]) -> None:
    assert pod_schemata(json.dumps(config), FACTS)[0] == lines


def test_a_line_is_written_only_when_every_cache_has_a_value() -> None:
    lines, notes = pod_schemata(_ann(llc={"schemataPerCache": [{"cacheID": 0, "range": [0, 50]}]},
                                     mb={"schemataPerCache": [{"cacheID": 1, "percent": 30}]}), FACTS)
    assert lines == []
    assert notes == ["llc does not give every L3 cache a range: no L3 line",
                     "mb does not give every memory domain a percent: no MB line"]


@pytest.mark.parametrize("rng", [[50, 50], [-1, 20], [20, 101]])
def test_a_bad_range_drops_the_l3_line_and_keeps_mb(rng: list[int]) -> None:
    lines, notes = pod_schemata(_ann(llc={"schemata": {"range": rng}}, mb={"schemata": {"percent": 50}}), FACTS)
    assert lines == ["MB:0=50;1=50"] and "no L3 line" in notes[0]


@pytest.mark.parametrize(("text", "says"), [
    ("{oops", "is not JSON"), ("[]", "is not an object"), ('{"llc": 3}', "llc is not an object"),
    ('{"mb": {"schemata": {"percent": "40"}}}', "percent='40' is not an integer"),
    ('{"llc": {"schemataPerCache": {}}}', "schemataPerCache is not a list"),
])
def test_text_that_is_not_koordlets_shape_is_refused(text: str, says: str) -> None:
    with pytest.raises(ResctrlAnnotationError, match=says):
        pod_schemata(text, FACTS)


def test_amd_and_a_node_without_mba() -> None:
    amd = dataclasses.replace(FACTS, vendor="amd")
    assert pod_schemata(_ann(mb={"schemata": {"percent": 50}}), amd)[0] == ["MB:0=80;1=80"]  # int(160 × 0.5)
    no_mba = dataclasses.replace(FACTS, mba=False)
    assert pod_schemata(_ann(mb={"schemata": {"percent": 50}}), no_mba) == ([], ["no MBA on this node: mb ignored"])


def test_plan_makes_the_group_moves_new_tasks_and_removes_stale_groups_it_made() -> None:
    facts = dataclasses.replace(
        FACTS, pod_groups=MappingProxyType({"koordlet-uid-old": ""}),
        pod_group_tasks=MappingProxyType({}), pod_created=frozenset({"koordlet-uid-old"}))
    web = pod("web", "LS", annotations={ANN: _ann(llc={"schemata": {"range": [0, 50]}})})
    bad = pod("bad", "LS", annotations={ANN: "{oops"})
    snap = snapshot(pods=(web, bad), kernel=kernel(
        pod_kernel("web", container("web", tasks=frozenset({7, 8}))), pod_kernel("bad", container("bad")),
        read=("pods", "resctrl"), resctrl=facts))
    plan = PodResctrl().plan(snap, None)
    assert [(f.op, f.path, f.value) for f in plan.files] == [
        ("mkdir", "koordlet-uid-web", ""), ("write", "koordlet-uid-web/schemata", "L3:0=3f;1=3f"),
        ("write", "koordlet-uid-web/tasks", "7"), ("write", "koordlet-uid-web/tasks", "8"),
        ("rmdir", "koordlet-uid-old", ""),
    ]
    assert plan.files[0].original_key == ("resctrl_pod_groups", "koordlet-uid-web")
    assert any(n.startswith("default/bad: node.koordinator.sh/resctrl is not JSON") for n in plan.notes)


# -- a fixture resctrl tree, through the runner -----------------------------------------------------------

def _files(d: Path, files: dict[str, str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    sys_root, cg, proc = tmp_path / "sys", tmp_path / "cg", tmp_path / "proc"
    root = sys_root / "fs" / "resctrl"
    _files(root, {"schemata": "L3:0=7ff;1=7ff\nMB:0=100;1=100\n", "tasks": "1\n"})
    _files(root / "info" / "L3", {"cbm_mask": "7ff\n", "min_cbm_bits": "1\n", "num_closids": "16\n"})
    _files(root / "info" / "MB", {"min_bandwidth": "10\n", "bandwidth_gran": "10\n", "num_closids": "16\n"})
    for group in ("LSR", "LS", "BE"):
        _files(root / group, {"schemata": "L3:0=7ff;1=7ff\nMB:0=100;1=100\n", "tasks": ""})
    _files(proc, {"cpuinfo": "vendor_id\t: GenuineIntel\n"})
    return root, cg, proc


def _kernel_made(group: Path) -> None:
    """What the kernel puts in a new resctrl group (a fixture mkdir makes an empty directory)."""
    _files(group, {"schemata": "L3:0=7ff;1=7ff\nMB:0=100;1=100\n", "tasks": ""})


def test_pod_groups_beside_the_class_groups_on_a_fixture_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, cg, proc = _tree(tmp_path)
    spec = {"resourceQOSStrategy": {"lsClass": {"resctrlQOS": {"enable": True}}}}
    stack = build_stack(str(cg), Resctrl(), PodResctrl(), gates={"RdtResctrl": True, "Resctrl": True},
                        sys_root=str(tmp_path / "sys"), proc_root=str(proc), state_dir=str(tmp_path / "state"), spec=spec)
    ann = _ann(llc={"schemata": {"range": [0, 50]}}, mb={"schemata": {"percent": 35}})
    web = add_pod(stack.store, "web", kube_qos="Burstable", qos="LS", containers={"c": ({}, {})}, annotations={ANN: ann})
    plain = add_pod(stack.store, "plain", kube_qos="Burstable", qos="LS", containers={"c": ({}, {})})
    _files(cg / "cpu" / "kubepods" / "burstable" / f"pod{web.uid}" / "webc", {"tasks": "4242\n4243\n"})
    _files(cg / "cpu" / "kubepods" / "burstable" / f"pod{plain.uid}" / "plainc", {"tasks": "5151\n"})
    group = root / f"koordlet-{web.uid}"

    stack.tick()
    assert group.is_dir() and stack.originals.section("resctrl_pod_groups") == {group.name: "created"}
    _kernel_made(group)
    stack.tick()
    assert (group / "schemata").read_text() == "MB:0=40;1=40"  # the fixture keeps the last line written
    assert (group / "tasks").read_text() == "4243"  # each task written once; the fixture keeps the last
    writes = [(w.path.split("resctrl/")[1], w.value, w.ok) for w in stack.store.audit.writes() if "resctrl/" in w.path]
    assert (f"{group.name}/schemata", "L3:0=3f;1=3f", True) in writes
    assert {v for p, v, ok in writes if p == f"{group.name}/tasks" and ok} == {"4242", "4243"}
    # the class-level groups got the unannotated pod's task, never the annotated pod's
    assert {v for p, v, _ in writes if p == "LS/tasks"} == {"5151"}

    # The pod loses its annotation: the group goes (the kernel's files go with an rmdir; a fixture's must go first).
    for name in ("schemata", "tasks"):
        (group / name).unlink()
    stack.store.upsert_pod(dataclasses.replace(web, annotations={}))
    stack.tick()
    assert not group.exists() and stack.originals.section("resctrl_pod_groups") == {}

    # Back again, then `hookserver cleanup` removes it.
    stack.store.upsert_pod(web)
    stack.tick()
    assert group.is_dir()
    rc = main(["cleanup", "--state-dir", str(tmp_path / "state"), "--proc-root", str(proc), "--sys-root",
               str(tmp_path / "sys"), "--cgroup-root", str(cg), "--cgroup-driver", "cgroupfs",
               "--hook-socket", str(tmp_path / "h.sock"), "--debug-socket", str(tmp_path / "d.sock")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"restored  resctrl group {group.name} removed" in out and not group.exists()


def test_gate_off_removes_only_the_pod_groups_it_made(tmp_path: Path) -> None:
    root, cg, proc = _tree(tmp_path)
    foreign = root / "koordlet-left-by-koordlet"
    _kernel_made(foreign)
    state = str(tmp_path / "state")
    on = build_stack(str(cg), PodResctrl(), gates={"Resctrl": True}, sys_root=str(tmp_path / "sys"),
                     proc_root=str(proc), state_dir=state)
    web = add_pod(on.store, "web", kube_qos="Burstable", qos="LS", containers={"c": ({}, {})},
                  annotations={ANN: _ann(mb={"schemata": {"percent": 50}})})
    on.tick()
    assert (root / f"koordlet-{web.uid}").is_dir()
    off = build_stack(str(cg), PodResctrl(), gates={"Resctrl": False}, sys_root=str(tmp_path / "sys"),
                      proc_root=str(proc), state_dir=state)
    plans = off.tick()
    assert "feature gate Resctrl is off" in plans[0].summary
    assert not (root / f"koordlet-{web.uid}").exists() and foreign.is_dir()
