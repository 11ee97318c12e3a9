"""The runner: plans through the executor and the eviction guard, audits every plan, isolates a failing
reconciler, honours dry run (global and per reconciler), gates and NodeSLO switches, and replays nothing."""

from __future__ import annotations

from dataclasses import dataclass

import asyncio
from typing import Any

import pytest

from hookserver.errors import ConfigError, InputError
from hookserver.eviction import EvictionRequest, EvictionStatus
from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.store import StateStore
from qos.framework.evictions import EvictionGuard
from hookserver.featuregates import FeatureGate, GateRegistry
from qos.framework.plan import PlannedEviction, QoSPlan, numbers
from qos.framework.reconciler import Reconciler, RoundOutcome, Verdict
from qos.framework.runner import QoSRunner
from qos.settings import QoSSettings, ReconcilerSettings
from qos.snapshot.model import QoSSnapshot
from tests.qos.helpers import run_round, FixedSnapshots, RecordingBackend, pod, snapshot
from tests.reference_example import PlanRecorder


class Writer(Reconciler):
    name = "Writer"
    gate = FeatureGate("WriterGate", True)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        count = (state or 0) + 1
        write = CgroupWrite("kubepods/besteffort", CgroupResource.CPU_CFS_QUOTA, 2000 * count, owner=self.name,
                            reason=f"round {count}")
        return QoSPlan(self.name, f"quota round {count}", numbers(count=count),
                       writes=(ResourcePlan.single([write]),), state=count)


class Broken(Reconciler):
    name = "Broken"
    gate = FeatureGate("BrokenGate", True)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        raise ZeroDivisionError("bad arithmetic")


class Evicter(Reconciler):
    name = "Evicter"
    gate = FeatureGate("EvicterGate", False)
    default_interval_s = 2.0

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        t = snap.slo.resource_used_threshold_with_be
        return Verdict(t.enable, "enabled" if t.enable else "resourceUsedThresholdWithBE.enable is false")

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        items = tuple(
            PlannedEviction(EvictionRequest(p.uid, p.namespace, p.name, "EvictPodByNodeMemoryUsage", "too much"),
                            numbers(releases=100.0))
            for p in snap.be_pods() if p.active
        )
        return QoSPlan(self.name, f"evict {len(items)}", numbers(release_target=150.0), evictions=items)

    def commit(self, plan: QoSPlan, outcome: RoundOutcome, state: Any, now: float) -> Any:
        return {"evicted": outcome.evicted, "released": outcome.released}


def _runner(*reconcilers: Reconciler, gates: dict[str, bool] | None = None, settings: QoSSettings | None = None,
            snap: QoSSnapshot | None = None, backend: RecordingBackend | None = None,
            clock: list[float] | None = None) -> tuple[QoSRunner, PlanRecorder, RecordingBackend, StateStore]:
    store = StateStore()
    recorder = PlanRecorder()
    backend = backend or RecordingBackend()
    t = clock if clock is not None else [100.0]
    values = GateRegistry(g for r in reconcilers for g in r.gates).resolve([("test", gates or {})])
    runner = QoSRunner(
        list(reconcilers), gates=values, snapshots=FixedSnapshots(snap or snapshot(pods=(pod("a"), pod("b"), pod("c")))),
        store=store, executor=recorder, evictions=EvictionGuard(backend, cooldown_s=60, clock=lambda: t[0]),
        settings=settings, clock=lambda: t[0], mono=lambda: t[0],
    )
    return runner, recorder, backend, store


def test_a_raising_reconciler_does_not_stop_the_others() -> None:
    runner, recorder, _, store = _runner(Broken(), Writer())
    plans = run_round(runner)
    assert [p.reconciler for p in plans] == ["Writer"]
    assert len(recorder.plans) == 1 and recorder.plans[0].all_writes()[0].value == 2000
    status = runner.report()["reconcilers"]
    broken = next(r for r in status if r["name"] == "Broken")
    assert broken["errors"] == 1 and "ZeroDivisionError: bad arithmetic" in broken["last_error"]
    assert [p.mode for p in store.audit.plans(reconciler="Broken")] == ["error"]


def test_state_carries_from_round_to_round() -> None:
    t = [100.0]
    runner, recorder, _, _ = _runner(Writer(), clock=t)
    run_round(runner)
    t[0] += 1.0
    run_round(runner)
    assert [p.all_writes()[0].value for p in recorder.plans] == [2000, 4000]
    assert runner.state_of("Writer") == 2


def test_interval_decides_which_reconcilers_are_due() -> None:
    t = [100.0]
    runner, _, _, _ = _runner(Writer(), Evicter(), gates={"EvicterGate": True}, clock=t)
    assert {p.reconciler for p in run_round(runner)} == {"Writer", "Evicter"}
    t[0] += 1.0
    assert {p.reconciler for p in run_round(runner)} == {"Writer"}
    t[0] += 1.0
    assert {p.reconciler for p in run_round(runner)} == {"Writer", "Evicter"}


def test_global_dry_run_plans_and_audits_but_writes_and_evicts_nothing() -> None:
    runner, recorder, backend, store = _runner(
        Writer(), Evicter(), gates={"EvicterGate": True}, settings=QoSSettings(dry_run=True),
    )
    plans = run_round(runner)
    assert len(plans) == 2
    assert recorder.plans == [] and backend.requests == []
    assert {p.mode for p in store.audit.plans()} == {"dry_run"}
    assert {e.status for e in store.audit.evictions()} == {"dry_run"}
    # The simulated state follows the plan: two pods of 100 cover the 150 target.
    assert runner.state_of("Evicter") == {"evicted": 2, "released": 200.0}


def test_per_reconciler_dry_run_leaves_the_others_acting() -> None:
    settings = QoSSettings(reconcilers={"Evicter": ReconcilerSettings(dry_run=True)})
    runner, recorder, backend, _ = _runner(Writer(), Evicter(), gates={"EvicterGate": True}, settings=settings)
    run_round(runner)
    assert len(recorder.plans) == 1 and backend.requests == []
    rows = {r["name"]: r for r in runner.report()["reconcilers"]}
    assert rows["Evicter"]["dry_run"] is True and rows["Writer"]["dry_run"] is False


def test_evictions_stop_when_the_target_is_covered_and_refusals_do_not_count() -> None:
    backend = RecordingBackend({"a": EvictionStatus.REFUSED})
    runner, _, backend, store = _runner(Evicter(), gates={"EvicterGate": True}, backend=backend)
    run_round(runner)
    # a refused (429): not counted; b and c evicted cover 200 >= 150.
    assert [r.name for r in backend.requests] == ["a", "b", "c"]
    assert [e.status for e in store.audit.evictions()] == ["refused", "evicted", "evicted"]
    assert runner.state_of("Evicter") == {"evicted": 2, "released": 200.0}


def test_the_same_pod_is_not_evicted_twice_within_the_cooldown() -> None:
    t = [100.0]
    runner, _, backend, store = _runner(Evicter(), gates={"EvicterGate": True}, clock=t)
    run_round(runner)
    assert [r.name for r in backend.requests] == ["a", "b"]
    t[0] += 2.0
    run_round(runner)  # the planner here ignores `terminating`; the guard still refuses a and b
    assert [r.name for r in backend.requests] == ["a", "b", "c"]
    assert [e.status for e in store.audit.evictions()][-3:] == ["already_evicted", "already_evicted", "evicted"]
    assert runner.snapshots.evicted_seen[-1] == frozenset({"uid-a", "uid-b"})  # type: ignore[attr-defined]


def test_gate_off_and_nodeslo_off_give_reasons() -> None:
    runner, _, backend, _ = _runner(Evicter())
    run_round(runner)
    row = runner.report()["reconcilers"][0]
    assert row["enabled"] is False and "feature gate EvicterGate is off (default)" in row["reason"]
    assert backend.requests == []
    runner2, _, backend2, _ = _runner(Evicter(), gates={"EvicterGate": True}, snap=snapshot(
        slo=__import__("tests.qos.helpers", fromlist=["slo"]).slo(enable=False), pods=(pod("a"),)))
    run_round(runner2)
    row2 = runner2.report()["reconcilers"][0]
    assert row2["enabled"] is False and "enable is false" in row2["reason"] and backend2.requests == []
    assert row2["gate"] == {"name": "EvicterGate", "enabled": True, "source": "test", "default": False}


def test_replay_plans_without_acting_or_keeping_state() -> None:
    runner, recorder, backend, store = _runner(Writer(), Evicter(), gates={"EvicterGate": True})
    out = runner.replay("Evicter", snapshot(pods=(pod("x"), pod("y"))))
    assert [e["pod"] for e in out["would_evict"]] == ["default/x", "default/y"]
    out2 = runner.replay("Writer", snapshot())
    assert out2["plan"]["writes"][0]["value"] == 2000
    assert recorder.plans == [] and backend.requests == []
    assert runner.state_of("Writer") is None and runner.state_of("Evicter") is None
    assert [p.mode for p in store.audit.plans()] == ["replay", "replay"]
    with pytest.raises(InputError, match="known: Evicter, Writer"):
        runner.replay("Nope", snapshot())


def test_unchanged_empty_plans_are_not_rerecorded() -> None:
    t = [100.0]
    runner, _, _, store = _runner(Evicter(), gates={"EvicterGate": True}, snap=snapshot(pods=()), clock=t)
    for _ in range(5):
        run_round(runner)
        t[0] += 2.0
    assert len(store.audit.plans(reconciler="Evicter")) == 1
    assert runner.report()["reconcilers"][0]["rounds"] == 5


def test_unknown_reconciler_settings_and_duplicates_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown reconciler"):
        _runner(Writer(), settings=QoSSettings(reconcilers={"Wrtier": ReconcilerSettings()}))
    with pytest.raises(ConfigError, match="twice"):
        _runner(Writer(), Writer())


def test_the_loop_runs_rounds_until_stopped() -> None:
    runner, recorder, _, _ = _runner(Writer(), clock=None)
    runner._mono = __import__("time").monotonic  # real loop time for run_every
    runner.reconcilers["Writer"].interval_s = 0.02

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        await asyncio.sleep(0.15)
        stop.set()
        await asyncio.wait_for(task, 2)

    asyncio.run(main())
    assert len(recorder.plans) >= 3


def test_a_slow_eviction_does_not_hold_up_the_other_reconcilers() -> None:
    import threading

    release = threading.Event()

    class Slow(RecordingBackend):
        def evict(self, request: EvictionRequest) -> Any:
            release.wait(10)
            return super().evict(request)

    t = [100.0]
    runner, recorder, backend, _ = _runner(Writer(), Evicter(), gates={"EvicterGate": True}, backend=Slow(), clock=t)
    runner.round()  # the Evicter's batch is now blocked on the worker thread
    for _ in range(3):
        t[0] += 2.0
        runner.round()
    assert len(recorder.plans) == 4  # Writer ran every round
    rows = {r["name"]: r for r in runner.report()["reconcilers"]}
    assert rows["Evicter"]["rounds"] == 1 and "still in progress" in rows["Evicter"]["last_summary"]
    release.set()
    runner.wait_evictions(5)
    assert [r.name for r in backend.requests] == ["a", "b"]
    assert runner.state_of("Evicter") == {"evicted": 2, "released": 200.0}
    t[0] += 2.0
    run_round(runner)
    assert runner.report()["reconcilers"][1]["rounds"] == 2


def test_the_audit_keeps_a_bounded_plan() -> None:
    from qos.framework.runner import AUDIT_PLAN_ITEMS

    pods = tuple(pod(f"p{i:02d}") for i in range(25))
    runner, _, _, store = _runner(Evicter(), gates={"EvicterGate": True}, snap=snapshot(pods=pods),
                                  settings=QoSSettings(dry_run=True))
    runner.round()
    record = store.audit.plans(reconciler="Evicter")[-1]
    assert len(record.plan["evictions"]) == AUDIT_PLAN_ITEMS and record.plan["evictions_total"] == 25
    assert len(runner.replay("Evicter", snapshot(pods=pods))["plan"]["evictions"]) == 25  # replay shows all


def test_files_go_to_the_system_file_executor_and_dry_run_skips_them() -> None:
    from hookserver.executor.plan import FileWrite

    class Sysctl(Reconciler):
        name = "Sysctl"
        gate = FeatureGate("SystemConfig", False)

        def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
            return QoSPlan(self.name, "min_free_kbytes", files=(
                FileWrite("proc_sys", "vm/min_free_kbytes", "335544", reason="total 32 GiB x 100 / 10000"),
            ))

    @dataclass
    class Result:
        ok: bool

    class Files:
        def __init__(self) -> None:
            self.seen: list[FileWrite] = []

        def apply(self, writes: Any) -> list[Result]:
            self.seen.extend(writes)
            return [Result(ok=True) for _ in writes]

    unwired, _, _, _ = _runner(Sysctl(), gates={"SystemConfig": True})
    unwired.round()
    row = unwired.report()["reconcilers"][0]
    assert row["errors"] == 1 and "no system-file executor is wired" in row["last_error"]
    files = Files()
    runner, _, _, store = _runner(Sysctl(), gates={"SystemConfig": True})
    runner.system_files = files
    runner.round()
    assert [w.path for w in files.seen] == ["vm/min_free_kbytes"]
    assert runner.report()["reconcilers"][0]["errors"] == 0
    assert store.audit.plans(reconciler="Sysctl")[0].plan["files"][0]["path"] == "vm/min_free_kbytes"
    dry, _, _, _ = _runner(Sysctl(), gates={"SystemConfig": True}, settings=QoSSettings(dry_run=True))
    dry.system_files = files
    files.seen.clear()
    dry.round()
    assert files.seen == [] and dry.report()["reconcilers"][0]["errors"] == 0


def test_nothing_runs_before_the_first_sync_and_an_outage_later_does_not_stop_it() -> None:
    synced = [False]
    t = [100.0]
    runner, recorder, _, _ = _runner(Writer(), clock=t)
    runner._ready, runner._was_ready = (lambda: synced[0]), False
    assert runner.round() == [] and recorder.plans == []
    assert "first sync" in runner.report()["waiting"]
    synced[0] = True
    t[0] += 1
    assert len(runner.round()) == 1 and runner.report()["waiting"] == ""
    synced[0] = False  # the apiserver goes away: the cached state keeps the node protected
    t[0] += 1
    assert len(runner.round()) == 1
