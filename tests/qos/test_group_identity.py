"""GroupIdentity on fixture trees: bvt per class at the tiers, pods and containers where the kernel has
cpu.bvt_warp_ns (koordlet's rule, by hand); BE cpu.idle at pod level, never the besteffort tier, where the kernel
has only cpu.idle and the NodeSLO chooses it; one calm status where the kernel has neither."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.hooks import PodRequest
from hookserver.slo.document import spec_from_json
from hookserver.store import StateStore
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.view import NodeView
from qos.group_identity import GroupIdentity, bvt_rule
from tests.qos.part2_stack import build_stack
from tests.reference_example import SPEC_KEY, WORKED_SPEC_JSON

TIERS = {"kubepods": "kubepods", "burstable": "kubepods/burstable", "besteffort": "kubepods/besteffort"}
GI_ON = {"resourceQOSStrategy": {"lsrClass": {"cpuQOS": {"enable": True}}, "lsClass": {"cpuQOS": {"enable": True}},
                                 "beClass": {"cpuQOS": {"enable": True}}}}
IDLE = {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"}, "beClass": {"cpuQOS": {"schedIdle": 1}}}}


def _tree(root: Path, extra: dict[str, str], pods: dict[str, str]) -> None:
    for tier in TIERS.values():
        d = root / "cpu" / tier
        d.mkdir(parents=True, exist_ok=True)
        for name, value in {"cpu.shares": "1024", **extra}.items():
            (d / name).write_text(value + "\n")
    for rel in pods.values():
        for d in (root / "cpu" / rel, root / "cpu" / rel / f"{rel.rsplit('pod', 1)[1].split('-')[0]}c1"):
            d.mkdir(parents=True, exist_ok=True)
            for name, value in {"cpu.shares": "2", **extra}.items():
                (d / name).write_text(value + "\n")
    (root / "memory" / "kubepods").mkdir(parents=True, exist_ok=True)


def _pod(store: StateStore, name: str, label: str, kube_qos: str) -> str:
    uid = f"{name}-0000-1111"
    labels = {"koordinator.sh/qosClass": label} if label else {}
    store.upsert_pod(PodRecord(uid=uid, namespace="default", name=name, labels=MappingProxyType(labels),
                               qos_class=label, kube_qos=kube_qos, phase="Running"))
    store.upsert_container(ContainerRecord(id=f"{name}c1", pod_uid=uid, name="main", state="running"))
    return f"kubepods/{'' if kube_qos == 'Guaranteed' else kube_qos.lower() + '/'}pod{uid}"


def _read(root: Path, rel: str, name: str) -> str:
    return (root / "cpu" / rel / name).read_text().strip()


def test_rule_by_hand() -> None:
    rule = bvt_rule(spec_from_json(GI_ON, origin="t").spec)
    assert rule.enabled and dict(rule.pod_by_class) == {"LSE": 2, "LSR": 2, "LS": 2, "BE": -1}
    assert dict(rule.tier) == {"kubepods": 0, "burstable": 2, "besteffort": -1}
    only_be = bvt_rule(spec_from_json({"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}}, origin="t").spec)
    assert dict(only_be.pod_by_class) == {"LSE": 0, "LSR": 0, "LS": 0, "BE": -1}
    assert dict(only_be.pod_by_kube_qos) == {"Guaranteed": 0, "Burstable": 0, "BestEffort": -1}
    core_sched = {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"}, **GI_ON["resourceQOSStrategy"]}}
    assert not bvt_rule(spec_from_json(core_sched, origin="t").spec).enabled


def test_bvt_per_class_at_tiers_pods_and_containers_then_reset(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    stack = build_stack(str(root), GroupIdentity(), gates={"GroupIdentity": True}, spec=GI_ON)
    dirs = {n: _pod(stack.store, n, label, kube) for n, label, kube in (
        ("lsr", "LSR", "Guaranteed"), ("ls", "LS", "Burstable"), ("be", "BE", "BestEffort"),
        ("plain", "", "Guaranteed"), ("plainbe", "", "BestEffort"))}
    _tree(root, {"cpu.bvt_warp_ns": "0"}, dirs)
    stack.tick()
    assert [_read(root, TIERS[t], "cpu.bvt_warp_ns") for t in ("kubepods", "burstable", "besteffort")] == ["0", "2", "-1"]
    want = {"lsr": "2", "ls": "2", "be": "-1", "plain": "2", "plainbe": "-1"}
    assert {n: _read(root, d, "cpu.bvt_warp_ns") for n, d in dirs.items()} == want
    assert {n: _read(root, f"{d}/{n}c1", "cpu.bvt_warp_ns") for n, d in dirs.items()} == want
    stack.set_slo({})  # every class off: put back to 0 once
    stack.tick()
    assert {_read(root, d, "cpu.bvt_warp_ns") for d in dirs.values()} == {"0"}
    assert _read(root, TIERS["besteffort"], "cpu.bvt_warp_ns") == "0"
    (root / "cpu" / dirs["be"] / "cpu.bvt_warp_ns").write_text("-1\n")
    stack.tick()
    assert _read(root, dirs["be"], "cpu.bvt_warp_ns") == "-1"  # after the reset, hands off


def test_be_idle_at_pod_level_never_the_tier(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    stack = build_stack(str(root), GroupIdentity(), gates={"GroupIdentity": True}, spec=IDLE)
    dirs = {n: _pod(stack.store, n, label, kube) for n, label, kube in (
        ("be", "BE", "BestEffort"), ("ls", "LS", "Burstable"), ("plainbe", "", "BestEffort"))}
    _tree(root, {"cpu.idle": "0"}, dirs)
    stack.tick()
    assert _read(root, dirs["be"], "cpu.idle") == "1" and _read(root, dirs["plainbe"], "cpu.idle") == "1"
    assert _read(root, dirs["ls"], "cpu.idle") == "0"
    assert _read(root, TIERS["besteffort"], "cpu.idle") == "0"  # the kubelet keeps writing the tier's shares
    stack.set_slo({})
    stack.tick()
    assert _read(root, dirs["be"], "cpu.idle") == "0"


@pytest.mark.parametrize("spec, missing", [(GI_ON, "cpu.bvt_warp_ns"), (IDLE, "cpu.idle")])
def test_a_kernel_without_the_file_is_one_status_line(tmp_path: Path, spec: dict, missing: str) -> None:  # type: ignore[type-arg]
    root = tmp_path / "cg"
    stack = build_stack(str(root), GroupIdentity(), gates={"GroupIdentity": True}, spec=spec)
    dirs = {"be": _pod(stack.store, "be", "BE", "BestEffort")}
    _tree(root, {}, dirs)
    for _ in range(3):
        stack.tick()
    row = next(r for r in stack.runner.report()["reconcilers"] if r["name"] == "GroupIdentity")
    text = str(row)
    assert f"{missing} unsupported on this kernel" in text
    assert not any(w.owner == "GroupIdentity" for w in stack.store.audit.writes())


def test_batchresource_leaves_be_shares_alone_while_be_idle_is_chosen() -> None:
    pod = PodRequest("ns", "p", "u", labels={"koordinator.sh/qosClass": "BE"}, annotations={SPEC_KEY: WORKED_SPEC_JSON})
    plugin = BatchResourcePlugin()
    normal = plugin.pre_run_pod_sandbox(pod, NodeView.build())
    idle = plugin.pre_run_pod_sandbox(pod, NodeView.build(node_slo=spec_from_json(IDLE, origin="t").spec))
    assert normal.resources.cpu_shares == 2048 and idle.resources.cpu_shares is None
    assert idle.resources.cpu_quota_us == normal.resources.cpu_quota_us
    assert "BE cpu.idle chosen" in idle.reason
