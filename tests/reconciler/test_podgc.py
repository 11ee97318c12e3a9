"""Forgetting pods whose cgroups are gone: grace period, informer-listed pods, caches and series."""

from __future__ import annotations

import shutil
from pathlib import Path

from hookserver.store import series_key
from tests.reconciler.conftest import World, make_world


def _remove(world: World, rel: str) -> None:
    for sub in ("cpu", "memory", "cpuset", "blkio"):
        shutil.rmtree(world.tree.root / sub / rel, ignore_errors=True)


def test_pod_gone_for_the_grace_period_is_dropped_with_its_caches_and_series(world: World) -> None:
    gone = world.be_pod("gone", source="proxy", cgroup_parent="/kubepods/besteffort/podgone-1")
    kept = world.be_pod("kept", source="proxy", cgroup_parent="/kubepods/besteffort/podkept-1")
    world.engine.run(trigger="start")
    series = world.store.series
    series.append(series_key("pod_cpu_usage", pod=gone.uid), 1.0)
    series.append(series_key("pod_cpu_usage", pod=kept.uid), 1.0)
    cached_before = len(world.executor.cache)
    assert cached_before == 12  # 2 pods x (pod + container) x 3 files
    _remove(world, world.pod_dir(gone))

    report = world.engine.run(trigger="periodic")
    assert report.collected == 0 and report.skipped == {"no_cgroup": 1}  # inside the grace: still known
    assert gone.uid in world.store.snapshot().pods and len(world.engine.gc) == 1

    world.clock.now += 61
    report = world.engine.run(trigger="periodic")
    assert report.collected == 1
    snap = world.store.snapshot()
    assert set(snap.pods) == {kept.uid}
    assert [c.pod_uid for c in snap.containers.values()] == []  # the store held no container records here
    assert len(world.executor.cache) == 6  # only the kept pod's files
    assert [k.label("pod") for k in series.keys("pod_cpu_usage")] == [kept.uid]
    assert world.engine.status()["targets_cached"] == 2 and world.engine.status()["plans_cached"] == 1
    assert len(world.engine.gc) == 0 and world.engine.totals["collected"] == 1


def test_pod_an_informer_lists_is_never_collected(tmp_path: Path) -> None:
    listed: set[str] = set()
    world = make_world(tmp_path / "cg", lists_pod=listed.__contains__)
    pod = world.be_pod("listed")
    listed.add(pod.uid)
    _remove(world, world.pod_dir(pod))
    world.engine.run(trigger="periodic")
    world.clock.now += 3600
    assert world.engine.run(trigger="periodic").collected == 0
    assert pod.uid in world.store.snapshot().pods
    listed.clear()  # the source dropped it but (say) the delete event was lost: now it goes
    assert world.engine.run(trigger="periodic").collected == 1


def test_cgroup_back_before_the_grace_ends_resets_the_clock(world: World) -> None:
    pod = world.be_pod("flap", source="nri")
    world.engine.run(trigger="start")
    _remove(world, world.pod_dir(pod))
    world.engine.run(trigger="periodic")
    world.clock.now += 50
    world.tree.cgroup(world.pod_dir(pod))
    world.engine.run(trigger="periodic")
    _remove(world, world.pod_dir(pod))
    world.engine.run(trigger="periodic")
    world.clock.now += 50  # 100 s since it first went, but only 50 s since it went again
    assert world.engine.run(trigger="periodic").collected == 0
    assert pod.uid in world.store.snapshot().pods
    world.clock.now += 11
    assert world.engine.run(trigger="periodic").collected == 1


def test_pod_sync_passes_never_collect(world: World) -> None:
    pod = world.be_pod("synced", source="proxy", make_dirs=False)
    world.engine.run(trigger="pods", uids={pod.uid})
    world.clock.now += 120
    assert world.engine.run(trigger="pods", uids={pod.uid}).collected == 0
    assert world.engine.run(trigger="periodic").collected == 1


def test_removed_pods_leave_no_memo_behind(world: World) -> None:
    pods = [world.be_pod(f"p{i}") for i in range(3)]
    world.engine.run(trigger="start")
    assert world.engine.status()["plans_cached"] == 3
    for pod in pods:
        world.store.remove_pod(pod.uid)  # informer delete / NRI RemovePodSandbox
        world.engine.pod_removed(pod.uid)
    world.engine.run(trigger="periodic")
    status = world.engine.status()
    assert (status["plans_cached"], status["targets_cached"], len(world.executor.cache)) == (0, 0, 0)


def test_metrics_count_corrections_errors_passes_and_collections(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry

    from hookserver.reconciler import ReconcilerMetrics

    world = make_world(tmp_path / "cg")
    registry = CollectorRegistry()
    world.engine.metrics = ReconcilerMetrics(registry)
    pod = world.be_pod("m", source="proxy")
    world.be_pod("evil", cgroup_parent="/kubepods/../../x")
    world.engine.run(trigger="start")
    _remove(world, world.pod_dir(pod))
    world.engine.run(trigger="periodic")
    world.clock.now += 61
    world.engine.run(trigger="periodic")

    def value(name: str, **labels: str) -> float:
        got = registry.get_sample_value(name, labels)
        return 0.0 if got is None else got

    assert value("hookserver_reconciler_corrections_total", resource="cpu.shares", trigger="start") == 2
    assert value("hookserver_reconciler_corrections_total", resource="memory.limit_in_bytes", trigger="start") == 2
    assert value("hookserver_reconciler_errors_total", kind="target") == 3  # the crafted parent, every pass
    assert value("hookserver_reconciler_passes_total", trigger="periodic") == 2
    assert value("hookserver_reconciler_pass_duration_seconds_count", trigger="start") == 1
    assert value("hookserver_reconciler_pods_collected_total") == 2  # "m" and the pod no cgroup can be named for


def test_a_crafted_pod_is_collected_without_breaking_the_pass(world: World) -> None:
    world.be_pod("evil", source="proxy", cgroup_parent="/kubepods/../../etc", make_dirs=False)
    world.engine.run(trigger="periodic")
    world.clock.now += 61
    report = world.engine.run(trigger="periodic")
    assert report.collected == 1 and not world.store.snapshot().pods
