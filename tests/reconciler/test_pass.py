"""One reconciler pass over fixture cgroup trees: corrections, no-op passes, rules, skips, errors, audit."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.debug.views import explain_view, writes_view
from hookserver.hooks.outcome import HookResult
from hookserver.slo import NodeSLOSpec
from hookserver.store import NodeRecord
from tests.reconciler.conftest import KUBELET_BE, MAIN_SPEC, WANT, World, make_world

SUPPRESS = NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}})


def _ratio(world: World, ratio: str) -> None:
    world.store.set_node(NodeRecord(name="n", annotations=MappingProxyType(
        {"node.koordinator.sh/cpu-normalization-ratio": ratio})))


def test_pod_created_while_agent_was_down_is_corrected_at_pod_and_container_level(world: World) -> None:
    pod = world.be_pod("job")
    cid = pod.container_ids["main"]
    assert world.values(world.pod_dir(pod)) == KUBELET_BE
    report = world.engine.run(trigger="start")
    assert world.values(world.pod_dir(pod)) == WANT
    assert world.values(world.container_dir(pod, cid)) == WANT
    assert report.corrections == 6 and report.written == 6 and report.error_count == 0
    assert report.corrections_by_resource == {"cpu.shares": 2, "cpu.cfs_quota_us": 2, "memory.limit_in_bytes": 2}
    # explain: the decisions came through the reconciler door; the writes say what the files held before
    explained = explain_view(world.store, "default", "job")
    doors = {(g["stage"], g["container"], h["door"]) for g in explained["decisions"] for h in g["hooks"]}
    assert doors == {("PreRunPodSandbox", "", "reconciler"), ("PreUpdateContainerResources", "main", "reconciler")}
    shares = [w for w in explained["writes"] if w["path"].endswith("/cpu.shares")]
    assert {w["previous"] for w in shares} == {"2"} and {w["value"] for w in shares} == {"1024"}
    assert all(w["owner"] == "BatchResource" and w["reason"].startswith("reconciler: ") for w in shares)
    assert [e["door"] for e in explained["events"]] == ["reconciler"]


def test_unchanged_pass_writes_and_reads_nothing_and_adds_nothing_to_the_audit(world: World) -> None:
    pods = [world.be_pod(f"p{i}", containers=2) for i in range(5)]
    world.engine.run(trigger="start")
    audit = (len(world.store.audit.decisions()), len(world.store.audit.events()), len(world.store.audit.writes()))
    world.files.reads.clear()
    world.files.writes.clear()
    before = world.tree.snapshot()
    for _ in range(3):
        world.clock.now += 10
        report = world.engine.run(trigger="periodic")
        assert (report.reconciled, report.planned, report.written, report.corrections) == (5, 0, 0, 0)
    assert world.files.writes == [] and world.files.reads == []
    assert world.tree.snapshot() == before
    assert (len(world.store.audit.decisions()), len(world.store.audit.events()), len(world.store.audit.writes())) == audit
    # Past the 60 s forced rewrite every file is read again and none is written: 10 targets x 3 files (the
    # second container has no entry in the extended-resource spec, so BatchResource leaves it alone).
    world.clock.now += 61
    report = world.engine.run(trigger="periodic")
    assert report.planned == 30 and report.written == 0 and report.corrections == 0
    # (the leveled plan reads a quota file in each of its two passes: 30 files, 40 reads)
    assert world.files.writes == [] and len(set(world.files.reads)) == 30
    assert world.values(world.pod_dir(pods[0])) == WANT


def test_cgroup_reset_to_kubelet_values_is_corrected_at_the_next_pass_inside_the_cache_window(world: World) -> None:
    pod = world.be_pod("job")
    cdir = world.container_dir(pod, pod.container_ids["main"])
    world.engine.run(trigger="start")
    for name, value in KUBELET_BE.items():  # the kubelet (or a person) resets the container behind our back
        world.tree.path(cdir, name).write_text(value + "\n")
    world.clock.now += 10  # one interval: the write cache still vouches for the old values
    report = world.engine.run(trigger="periodic")
    assert world.values(cdir) == WANT
    assert report.drifted == 1 and report.corrections == 3


def test_rule_change_reapplies_every_be_pod_as_one_leveled_batch(world: World) -> None:
    pods = [world.be_pod(f"p{i}", containers=2) for i in range(3)]
    world.engine.run(trigger="start")
    # cfsQuota suppress: every BE quota becomes unlimited. Growing limits go top-down: pods before containers.
    world.store.set_node_slo(SUPPRESS)
    writes_before = len(world.store.audit.writes())
    report = world.engine.run(trigger="rules")
    assert report.corrections == 6 and report.error_count == 0  # 3 pods + their 3 "main" containers
    for pod in pods:
        assert world.tree.read(world.pod_dir(pod), "cpu.cfs_quota_us") == "-1"
        assert world.tree.read(world.container_dir(pod, pod.container_ids["main"]), "cpu.cfs_quota_us") == "-1"
    quota_writes = [w for w in world.store.audit.writes()[writes_before:] if w.path.endswith("cfs_quota_us") and not w.skipped]
    levels = [w.path.count("/") for w in quota_writes]
    assert levels == sorted(levels), "pods (parents) must be written before their containers when quota grows"
    # Back to a limited quota scaled by the normalization ratio 2: ceil(200000 / 2) = 100000, a shrink, so
    # containers go first (bottom-up), else a v1 kernel refuses the parent (EINVAL).
    world.store.set_node_slo(None)
    _ratio(world, "2")
    writes_before = len(world.store.audit.writes())
    report = world.engine.run(trigger="rules")
    assert report.corrections == 6
    final = [w for w in world.store.audit.writes()[writes_before:] if w.path.endswith("cfs_quota_us") and not w.skipped]
    assert {w.value for w in final} == {"100000"}
    levels = [w.path.count("/") for w in final]
    assert levels == sorted(levels, reverse=True), "a shrinking quota goes to children first"


def test_vanished_cgroup_directories_are_skipped_quietly(world: World, caplog: pytest.LogCaptureFixture) -> None:
    gone_ctr = world.be_pod("ctr-gone")
    gone_pod = world.be_pod("pod-gone")
    world.engine.run(trigger="start")
    cid = gone_ctr.container_ids["main"]
    for sub in ("cpu", "memory", "cpuset", "blkio"):
        shutil.rmtree(world.tree.root / sub / world.container_dir(gone_ctr, cid))
        shutil.rmtree(world.tree.root / sub / world.pod_dir(gone_pod))
    caplog.set_level(logging.DEBUG)
    world.clock.now += 61  # past the cache: every target is read again
    report = world.engine.run(trigger="periodic")
    assert report.error_count == 0 and report.errors == []
    assert report.skipped == {"no_cgroup": 1, "container_cgroup_absent": 1}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # A cgroup removed between the existence check and the write (the race) is counted, not reported.
    racing = make_world(world.tree.root.parent / "race")
    pod = racing.be_pod("racer")
    racing.engine._exists = lambda rel: True  # the check says yes; the directory is gone at write time
    for sub in ("cpu", "memory", "cpuset", "blkio"):
        shutil.rmtree(racing.tree.root / sub / racing.container_dir(pod, pod.container_ids["main"]))
    report = racing.engine.run(trigger="start")
    assert report.error_count == 0 and report.vanished == 3 and report.corrections == 3


def test_pod_being_created_is_left_to_its_hooks_until_a_container_exists(world: World) -> None:
    pod = world.be_pod("new", make_dirs=False)
    world.store.upsert_pod(world.store.snapshot().pods[pod.uid].__class__(
        **{**{f: getattr(pod, f) for f in pod.__slots__}, "container_ids": MappingProxyType({}), "first_seen": 0.0}))
    world.tree.cgroup(world.pod_dir(pod), **KUBELET_BE)
    report = world.engine.run(trigger="pods", uids={pod.uid})
    assert report.skipped == {"creating": 1} and report.written == 0
    assert world.values(world.pod_dir(pod)) == KUBELET_BE
    world.clock.now += 11  # past the creation grace with still no container: the pod level is ours
    report = world.engine.run(trigger="periodic")
    assert world.values(world.pod_dir(pod)) == WANT and report.corrections == 3


def test_kata_finished_and_non_be_pods_get_no_writes(world: World) -> None:
    kata = world.be_pod("kata")
    done = world.be_pod("done")
    ls = world.be_pod("ls", spec=MAIN_SPEC)
    snap = world.store.snapshot().pods
    from dataclasses import replace

    world.store.upsert_pod(replace(snap[kata.uid], runtime_class="kata"))
    world.store.upsert_pod(replace(snap[done.uid], phase="Succeeded"))
    world.store.upsert_pod(replace(snap[ls.uid], labels=MappingProxyType({"koordinator.sh/qosClass": "LS"})))
    report = world.engine.run(trigger="periodic")
    assert report.skipped == {"kata": 1, "finished": 1} and report.written == 0 and report.reconciled == 1
    assert world.files.writes == []


class _Broken:
    name = "Broken"

    def pre_run_pod_sandbox(self, request: object, snapshot: object) -> HookResult:
        raise RuntimeError("bug")


def test_a_failing_hook_or_a_crafted_parent_costs_only_that_pod(tmp_path: Path) -> None:
    from hookserver.hooks.plugins import BatchResourcePlugin

    world = make_world(tmp_path / "cg", plugins=[BatchResourcePlugin(), _Broken()])
    a = world.be_pod("a")
    world.be_pod("evil", cgroup_parent="/kubepods/../../etc")
    report = world.engine.run(trigger="start")
    # the pod level of every pod fails (all or none), the containers are still corrected
    assert world.values(world.pod_dir(a)) == KUBELET_BE
    assert world.values(world.container_dir(a, a.container_ids["main"])) == WANT
    assert report.error_count == 2
    assert any("Broken failed: bug" in e for e in report.errors)
    assert any("evil" in e and "'..'" in e for e in report.errors)


def test_systemd_v2_tree_names_container_scopes_from_the_runtime_prefix(tmp_path: Path) -> None:
    world = make_world(tmp_path / "cg", version="v2", driver="systemd")
    pod = world.be_pod("sd", make_dirs=False)
    pod_dir = world.layout.pod_dir("besteffort", pod.uid)
    assert pod_dir == f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{pod.uid.replace('-', '_')}.slice"
    from dataclasses import replace

    docker_id = "d" * 64
    world.store.upsert_pod(replace(pod, container_ids=MappingProxyType({"main": f"docker://{docker_id}"})))
    world.tree.cgroup(pod_dir, **{"cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max"})
    ctr = f"{pod_dir}/docker-{docker_id}.scope"
    world.tree.cgroup(ctr, **{"cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max"})
    report = world.engine.run(trigger="start")
    # shares 1024 -> weight 1 + (1024 - 2) * 9999 // 262142 = 39; quota 200000 keeps the period
    for rel in (pod_dir, ctr):
        assert world.tree.read(rel, "cpu.weight") == "39"
        assert world.tree.read(rel, "cpu.max").split()[0] == "200000"  # the kernel keeps the period; a plain file does not
        assert world.tree.read(rel, "memory.max") == "1073741824"
    assert report.corrections == 6
    world.tree.path(ctr, "cpu.weight").write_text("1\n")  # reset: the v2 canary sees it
    world.clock.now += 10
    assert world.engine.run(trigger="periodic").drifted == 1
    assert world.tree.read(ctr, "cpu.weight") == "39"


def test_writes_view_shows_the_previous_value(world: World) -> None:
    world.be_pod("job")
    world.engine.run(trigger="start")
    rows = writes_view(world.store, path_contains="cpu.shares")
    assert rows and all(r["previous"] == "2" for r in rows)


def test_explain_lists_the_containers_the_informer_reported(world: World) -> None:
    world.be_pod("informed", containers=2)
    world.engine.run(trigger="start")
    assert explain_view(world.store, "default", "informed")["pod"]["containers"] == ["c1", "main"]


def test_a_pod_whose_hooks_ran_adds_nothing_to_the_audit(world: World) -> None:
    from hookserver.hooks.context import PodRequest, frozen_map
    from hookserver.hooks.stages import Stage

    pod = world.be_pod("hooked", source="proxy", containers=1, **WANT)  # its cgroups already hold the values
    request = PodRequest(namespace="default", name="hooked", uid=pod.uid, labels=pod.labels,
                         annotations=frozen_map(dict(pod.annotations)), cgroup_parent=world.pod_dir(pod))
    world.dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, request, door="proxy", rpc="PreRunPodSandboxHook")
    decisions = len(world.store.audit.decisions())
    report = world.engine.run(trigger="pods", uids={pod.uid})
    assert report.corrections == 0 and report.written == 0
    assert len(world.store.audit.decisions()) == decisions  # explain keeps showing the proxy's decision
    doors = {h["door"] for g in explain_view(world.store, "default", "hooked")["decisions"] for h in g["hooks"]}
    assert doors == {"proxy"}


def test_a_pass_writes_only_the_knobs_batchresource_owns(world: World) -> None:
    """qos/framework/knobs.py gives BE pods' and containers' shares, quota and memory limit to batchresource (the hook
    and this reconciler); CPU burst owns LS pods' quota, CPU suppress the BE tier's. A pass over a BE pod
    and an LS pod (a kubelet-made Burstable one, with CPU burst's quota on it) writes inside that claim only."""
    import uuid as _uuid
    from types import MappingProxyType as _M

    from hookserver.store import PodRecord as _Pod
    from qos.framework.knobs import OWNERSHIP

    be = world.be_pod("batch", containers=2)
    ls_uid = str(_uuid.uuid4())
    cid = _uuid.uuid4().hex
    ls = _Pod(uid=ls_uid, namespace="default", name="web", labels=_M({"koordinator.sh/qosClass": "LS"}),
              qos_class="LS", kube_qos="Burstable", phase="Running", source="apiserver",
              container_ids=_M({"main": f"containerd://{cid}"}))
    world.store.upsert_pod(ls)
    ls_dir = world.layout.pod_dir("burstable", ls_uid)
    burst = {"cpu.shares": "1024", "cpu.cfs_quota_us": "150000", "memory.limit_in_bytes": "1073741824"}
    world.tree.cgroup(ls_dir, **burst)
    world.tree.cgroup(f"{ls_dir}/{cid}", **burst)
    world.engine.run(trigger="start")
    claims = {(c.file, c.level) for c in OWNERSHIP["batchresource"] if c.qos == "BE"}
    pod_dir = world.pod_dir(be)
    assert world.files.writes, "the BE pod's kubelet values were corrected"
    for path, _value in world.files.writes:
        assert pod_dir in path, f"{path}: the pass wrote outside the BE pod"
        level = "pod" if path.rsplit("/", 2)[-2] == pod_dir.rsplit("/", 1)[-1] else "container"
        assert (path.rsplit("/", 1)[-1], level) in claims, f"{path}: not a batchresource knob"
    assert {name: world.tree.read(ls_dir, name) for name in burst} == burst  # CPU burst's quota left alone


def test_a_pass_over_many_pods_writes_in_plans_of_a_few_pods_with_a_hot_gate_pause_between(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass after a restart writes every pod: one plan for all of them held the GIL for ~120 ms of CPU at
    500 pods, so a hook arriving meanwhile waited switch interval after switch interval. The writes now go
    in plans of `_PODS_PER_PLAN` pods, the hot gate's pause between two plans (never inside one), and a
    crafted parent in one plan still costs only its own pod."""
    from hookserver.reconciler import reconcile

    writes_at_pause: list[int] = []
    monkeypatch.setattr(reconcile, "pause", lambda: writes_at_pause.append(len(world.files.writes)))
    pods = [world.be_pod(f"p{i:02d}") for i in range(40)]
    world.be_pod("evil", cgroup_parent="/kubepods/../../etc")
    report = world.engine.run(trigger="start")
    for pod in pods:
        assert world.values(world.pod_dir(pod)) == WANT
        assert world.values(world.container_dir(pod, pod.container_ids["main"])) == WANT
    assert any("evil" in e and "'..'" in e for e in report.errors)
    # Pauses between the plans: the writes done between two of them are at most a plan's worth (3 files at
    # the pod and 3 at the container level, 16 pods), and every pod was written (40 pods: 3 plans, 2 pauses
    # between them, plus the pass's own pauses before the writes and after them).
    marks = [0, *writes_at_pause, len(world.files.writes)]
    per_stretch = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    assert max(per_stretch) <= reconcile._PODS_PER_PLAN * 6
    assert len(world.files.writes) == 40 * 6
    assert sum(1 for n in per_stretch if n > 0) >= 3
