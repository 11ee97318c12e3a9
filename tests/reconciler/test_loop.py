"""The reconciler loop: start pass, pod syncs (rate-limited), rule changes, periodic passes, status, stop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.config import load_settings
from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.errors import ConfigError
from hookserver.reconciler import Reconciler, TokenBucket
from hookserver.slo import NodeSLOSpec
from hookserver.store import ContainerRecord, NodeRecord
from tests.executor.conftest import FakeClock
from tests.reconciler.conftest import KUBELET_BE, WANT, World, make_world


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(rate_per_s=5, burst=10, clock=clock)
    assert sum(bucket.take() for _ in range(20)) == 10
    assert bucket.wait_s() == pytest.approx(0.2)
    clock.now += 1.0
    assert sum(bucket.take() for _ in range(20)) == 5
    clock.now += 100.0
    assert sum(bucket.take() for _ in range(20)) == 10  # never more than the burst saved
    with pytest.raises(ValueError):
        TokenBucket(rate_per_s=0, burst=1, clock=clock)


async def _until(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _loop(world: World, **settings: float) -> Reconciler:
    values = {"interval_s": 60.0, **settings}
    return Reconciler(ReconcilerSettings(**values), store=world.store, engine=world.engine)


def test_start_pass_pod_sync_and_rule_change(world: World) -> None:
    early = world.be_pod("early")  # created while the agent was stopped

    async def scenario() -> None:
        reconciler = _loop(world)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await _until(lambda: reconciler.last is not None, "the start pass")
        assert reconciler.last is not None and reconciler.last.trigger == "start"
        assert world.values(world.pod_dir(early)) == WANT
        # a pod the informer reports now: a pod-sync pass for it alone
        late = world.be_pod("late")
        await _until(lambda: reconciler.status()["passes"].get("pods", 0) == 1, "the pod-sync pass")
        assert world.values(world.pod_dir(late)) == WANT
        assert reconciler.last is not None and reconciler.last.trigger == "pods" and reconciler.last.pods == 1
        # the NodeSLO switches BE CPU suppression to cfsQuota: every BE quota at once, without waiting 60 s
        world.store.set_node_slo(NodeSLOSpec.model_validate(
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}))
        await _until(lambda: reconciler.last is not None and reconciler.last.trigger == "rules", "the rules pass")
        for pod in (early, late):
            assert world.tree.read(world.pod_dir(pod), "cpu.cfs_quota_us") == "-1"
        # a node annotation is a rule input too (the quota stays -1 under cfsQuota suppress: nothing to fix)
        passes = dict(reconciler.status()["passes"])
        world.store.set_node(NodeRecord(name="n", annotations=MappingProxyType(
            {"node.koordinator.sh/cpu-normalization-ratio": "2"})))
        await _until(lambda: reconciler.status()["passes"].get("rules", 0) == passes["rules"] + 1, "ratio pass")
        status = reconciler.status()
        assert status["state"] == "running" and status["corrections_total"] == 6 + 6 + 4  # early, late, 4 quotas
        assert status["last_pass"]["trigger"] == "rules" and status["last_pass"]["at"].endswith("Z")
        stop.set()
        await asyncio.wait_for(task, 2.0)
        assert reconciler.status()["state"] == "stopped"

    asyncio.run(scenario())


def test_periodic_pass_corrects_a_reset_within_one_interval(world: World) -> None:
    pod = world.be_pod("job")

    async def scenario() -> None:
        reconciler = _loop(world, interval_s=0.3)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await _until(lambda: world.values(world.pod_dir(pod)) == WANT, "the start pass")
        # shares last: the reconciler's canary; a pass that runs between these writes sees nothing yet
        for name in ("memory.limit_in_bytes", "cpu.cfs_quota_us", "cpu.shares"):
            world.tree.path(world.pod_dir(pod), name).write_text(KUBELET_BE[name] + "\n")
        reset_at = time.monotonic()
        await _until(lambda: world.values(world.pod_dir(pod)) == WANT, "the periodic pass", timeout_s=3.0)
        # within one interval, plus a poll and the pass itself (generous: this machine is shared)
        assert time.monotonic() - reset_at < 0.3 + 2.0
        await _until(lambda: reconciler.engine.totals["corrections"] == 6 + 3, "the pass's report")
        assert reconciler.status()["passes"].get("periodic", 0) >= 1
        stop.set()
        await asyncio.wait_for(task, 2.0)

    asyncio.run(scenario())


def test_pod_syncs_are_rate_limited_and_batched(tmp_path: Path) -> None:
    world = make_world(tmp_path / "cg")

    async def scenario() -> None:
        reconciler = _loop(world, pod_sync_rate_per_s=2, pod_sync_burst=1)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await _until(lambda: reconciler.last is not None, "the start pass")
        started = time.monotonic()
        pods = []
        for i in range(30):
            pods.append(world.be_pod(f"p{i}"))
            await asyncio.sleep(0.01)
        await _until(lambda: all(world.values(world.pod_dir(p)) == WANT for p in pods), "all pods", timeout_s=5)
        elapsed = time.monotonic() - started
        # 30 syncs over ~0.3 s at 2 passes/s with a burst of 1: a handful of passes, each taking many pods
        assert reconciler.status()["passes"]["pods"] <= 2 + int(elapsed * 2) + 1
        stop.set()
        await asyncio.wait_for(task, 2.0)

    asyncio.run(scenario())


def test_settings_are_validated_with_a_clear_error() -> None:
    settings = load_settings(environ={"HOOKSERVER_RECONCILER__INTERVAL_S": "2.5"})
    assert settings.reconciler.interval_s == 2.5 and settings.reconciler.gc_grace_s == 60.0
    with pytest.raises(ConfigError, match=r"reconciler.interval_s.*greater than 0.*got '0'"):
        load_settings(environ={"HOOKSERVER_RECONCILER__INTERVAL_S": "0"})
    with pytest.raises(ConfigError, match=r"reconciler.pod_sync_burst"):
        load_settings(overrides={"reconciler": {"pod_sync_burst": 0}})


def test_first_pass_waits_for_the_informer_sync(world: World) -> None:
    pod = world.be_pod("early")
    synced = False

    async def scenario() -> None:
        reconciler = Reconciler(ReconcilerSettings(), store=world.store, engine=world.engine, ready=lambda: synced)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await asyncio.sleep(0.3)
        assert reconciler.last is None and reconciler.status()["state"].startswith("waiting")
        assert world.values(world.pod_dir(pod)) == KUBELET_BE  # nothing decided from default rules
        world.store.set_node_slo(NodeSLOSpec.model_validate(
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}))
        nonlocal synced
        synced = True
        await _until(lambda: reconciler.last is not None, "the start pass")
        assert world.tree.read(world.pod_dir(pod), "cpu.cfs_quota_us") == "-1"  # the synced rule, first time
        stop.set()
        await asyncio.wait_for(task, 2.0)

    asyncio.run(scenario())


def test_a_persistent_error_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    world = make_world(tmp_path / "cg")
    world.be_pod("evil", cgroup_parent="/kubepods/../../etc")

    async def scenario() -> None:
        reconciler = _loop(world, interval_s=0.1)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await _until(lambda: sum(reconciler.status()["passes"].values()) >= 4, "a few passes")
        stop.set()
        await asyncio.wait_for(task, 2.0)
        assert reconciler.status()["errors_total"] >= 4 and "'..'" in reconciler.status()["last_error"]

    caplog.set_level("INFO", logger="hookserver.reconciler")
    asyncio.run(scenario())
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "evil" in warnings[0].getMessage()


def test_catch_up_reconciles_the_pods_at_once_past_the_rate_limit(world: World) -> None:
    """What an NRI Synchronize could not finish: a pass for exactly those pods at the next poll, not at the
    next periodic pass (60 s here) and not after the pod-sync rate limit (its only token is spent)."""
    pod = world.be_pod("synced")

    async def scenario() -> None:
        reconciler = _loop(world, pod_sync_rate_per_s=0.001, pod_sync_burst=1)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await _until(lambda: reconciler.last is not None and reconciler.last.trigger == "start", "the start pass")
        world.be_pod("spends-the-token")
        await _until(lambda: reconciler.status()["passes"].get("pods", 0) == 1, "the pod-sync pass")
        for name in ("memory.limit_in_bytes", "cpu.cfs_quota_us", "cpu.shares"):
            world.tree.path(world.pod_dir(pod), name).write_text(KUBELET_BE[name] + "\n")
        world.be_pod("waits-for-a-token")  # dirty, and the bucket is empty: no pod-sync pass soon
        reconciler.catch_up({pod.uid}, "nri-sync")
        await _until(lambda: reconciler.status()["passes"].get("nri-sync", 0) == 1, "the catch-up pass")
        assert reconciler.last is not None and reconciler.last.trigger == "nri-sync" and reconciler.last.pods == 1
        assert world.values(world.pod_dir(pod)) == WANT
        status = reconciler.status()
        assert status["passes"].get("periodic", 0) == 0 and status["pending_catch_up"] == 0
        assert status["pending_pod_syncs"] == 1  # the rate-limited pod still waits its turn
        stop.set()
        await asyncio.wait_for(task, 2.0)

    asyncio.run(scenario())


def test_the_loop_polls_the_rules_without_copying_the_container_map_on_the_event_loop(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop runs on the event loop, where NRI hooks are answered, and looks at the rule inputs every POLL_S.
    Every CreateContainer records its container; a full snapshot after that copies the whole container map
    on the loop (~180 µs at 1,000 containers), inside a pod wave. The pods' snapshot is not rebuilt for it."""
    world.be_pod("first")
    full_on_loop: list[int] = []
    loop_thread = [0]  # the event loop's thread, once it runs
    full = world.store.snapshot

    def spy() -> Any:
        if world.store._snapshot is None and threading.get_ident() == loop_thread[0]:
            full_on_loop.append(world.store.version)
        return full()

    monkeypatch.setattr(world.store, "snapshot", spy)

    async def scenario() -> None:
        loop_thread[0] = threading.get_ident()
        reconciler = _loop(world)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await _until(lambda: reconciler.last is not None, "the start pass")
        before = list(full_on_loop)
        for n in range(5):  # a pod wave: a container recorded between every two polls
            world.store.upsert_container(ContainerRecord(id=f"wave-{n}", pod_uid="wave", name=f"c{n}"))
            await asyncio.sleep(0.12)
        assert full_on_loop == before  # not one copy of the container map on the loop
        # The rules are still looked at: a NodeSLO change starts a rules pass at once.
        world.store.set_node_slo(NodeSLOSpec.model_validate(
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}))
        await _until(lambda: reconciler.last is not None and reconciler.last.trigger == "rules", "the rules pass")
        stop.set()
        await asyncio.wait_for(task, 2.0)

    asyncio.run(scenario())
