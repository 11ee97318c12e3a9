"""Evictions are in the audit an operator reads (issue 21): a standalone kill (`--evict-standalone=kill`) of a
real process in a real cgroup v1 freezer subtree is listed by `hookctl events` with the pod's name, koordlet's
reason and the numbers, and `hookctl qos` names the pods of the last evictions."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hookserver.debug.render import render
from hookserver.debug.render_qos import render_qos
from hookserver.debug.views import events_view
from hookserver.executor import CgroupLayout
from hookserver.executor.kill import CgroupKiller
from hookserver.store import StateStore
from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
from hookserver.featuregates import GateRegistry
from qos.eviction.memory import MemoryEvict
from qos.framework.runner import QoSRunner
from qos.snapshot.model import NodeUsage
from tests.qos.helpers import FixedSnapshots, node, pod, run_round, slo, snapshot
from tests.qos.test_kill_standalone import POD, freezer_pod  # noqa: F401 - the real freezer pod fixture

import pytest

CAP = 10_000_000_000
M = 1_000_000


def _runner(store: StateStore, backend: object, cgroup_dir: str, t: list[float] | None = None) -> QoSRunner:
    from dataclasses import replace

    be = replace(pod("be-mem", priority=100, mem=900 * M), cgroup_dirs=(cgroup_dir,))
    snap = snapshot(node=node(memory=CAP), pods=(be,), usage=NodeUsage(memory_bytes=7_250_000_000),
                    slo=slo(enable=True))
    reconciler = MemoryEvict()
    gates = GateRegistry(g for g in reconciler.gates).resolve([("test", {g.name: True for g in reconciler.gates})])
    t = t if t is not None else [100.0]
    return QoSRunner([reconciler], gates=gates, snapshots=FixedSnapshots(snap), store=store, executor=None,  # type: ignore[arg-type]
                     evictions=EvictionGuard(backend, cooldown_s=60, clock=lambda: t[0]),  # type: ignore[arg-type]
                     clock=lambda: t[0], mono=lambda: t[0])


@pytest.mark.cgroup
def test_a_standalone_kill_is_listed_by_hookctl_events_with_the_pod_and_the_numbers(
    freezer_pod: tuple[CgroupLayout, Path, subprocess.Popen[bytes]],
) -> None:
    layout, _top, proc = freezer_pod
    store = StateStore()
    runner = _runner(store, CgroupKiller(layout, store=store), POD)
    run_round(runner)
    assert proc.wait(timeout=5) == -9  # really killed

    [row] = [r for r in events_view(store) if r["door"] == "qos"]
    assert row["pod"] == "default/be-mem" and row["rpc"] == "evict/kill" and row["result"] == "killed"
    assert "EvictPodByNodeMemoryUsage" in row["detail"]
    assert "72" in row["detail"] and "bytes" in row["detail"]  # usage %, and how much it must release
    assert "default/be-mem" in render(events_view(store))

    report = runner.report()
    [last] = report["last_evictions"]
    assert last["pod"] == "default/be-mem" and last["status"] == "killed" and last["time"].endswith("Z")
    text = render_qos(report)
    assert "default/be-mem" in text and "killed" in text


def test_reported_evictions_are_events_too_and_keep_time_order() -> None:
    store = StateStore()
    runner = _runner(store, ReportOnlyBackend(), "kubepods/besteffort/podx")
    run_round(runner)
    rows = events_view(store)
    assert [(r["pod"], r["result"], r["rpc"]) for r in rows] == [("default/be-mem", "reported", "evict/report")]
    assert events_view(store, limit=1) == rows


def test_a_refusal_that_repeats_is_counted_not_audited_or_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 21: a pod held by its PodDisruptionBudget was logged ("refused refused (HTTP 429)") and audited
    every round. The audit and the log get the change of state; the repeats are counted."""
    import logging

    from hookserver.eviction import EvictionStatus
    from tests.qos.helpers import RecordingBackend

    store = StateStore()
    backend = RecordingBackend({"be-mem": EvictionStatus.REFUSED})
    t = [100.0]
    runner = _runner(store, backend, "kubepods/besteffort/podx", t)
    caplog.set_level(logging.INFO, logger="qos.framework.runner")
    for _ in range(4):
        run_round(runner)
        t[0] += 10.0  # past the reconciler's interval and its eviction back-off
    assert len(backend.requests) >= 2
    assert [e.status for e in store.audit.evictions()] == ["refused"]
    assert runner.report()["eviction_refusals_repeated"] == len(backend.requests) - 1
    logged = [r.getMessage() for r in caplog.records if "evict default/be-mem" in r.getMessage()]
    assert len(logged) == 1 and "refused refused" not in logged[0]
    backend.answers.clear()
    run_round(runner)
    assert [e.status for e in store.audit.evictions()] == ["refused", "evicted"]
