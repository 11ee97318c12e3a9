"""The Eviction API backend against the HTTP fake apiserver: version discovery, PDB refusals (429), the
Event, terminating and vanished pods, and the runner's no-double-eviction, dry run and replay."""

from __future__ import annotations

from dataclasses import replace

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.eviction import EvictionRequest, EvictionStatus
from hookserver.informer.evictor import ApiEvictor
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.store import StateStore
from qos.framework.evictions import EvictionGuard
from qos.eviction.memory import EvictState, MemoryEvict
from qos.registry import gate_registry
from qos.framework.runner import QoSRunner
from qos.settings import QoSSettings
from qos.snapshot.model import NodeUsage
from tests.informer.fake_apiserver import FakeApiServer, make_pod
from tests.qos.helpers import run_round, FixedSnapshots, node, pod, slo, snapshot

NS = "i9-evict"


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("urllib3").setLevel(logging.ERROR)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer(token="t0ken").start()
    try:
        yield server
    finally:
        server.kill()


def _evictor(fake: FakeApiServer, tmp_path: Path) -> ApiEvictor:
    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))
    return ApiEvictor(transport, node_name="node-a", timeout_s=5)


def _pod(fake: FakeApiServer, name: str, **kw: object) -> dict[str, object]:
    return fake.apply("pods", make_pod(name, namespace=NS, uid=f"uid-{name}", qos="BE", **kw))  # type: ignore[arg-type]


def _request(name: str, uid: str = "") -> EvictionRequest:
    return EvictionRequest(pod_uid=uid or f"uid-{name}", namespace=NS, name=name, reason="EvictPodByNodeMemoryUsage",
                           message="node memory usage 72% >= threshold 70%: release 400000000 bytes")


@pytest.mark.parametrize("served", [["policy/v1", "policy/v1beta1"], ["policy/v1beta1"]])
def test_version_is_discovered_once_and_used(fake: FakeApiServer, tmp_path: Path, served: list[str]) -> None:
    fake.policy_versions = served
    _pod(fake, "a")
    _pod(fake, "b")
    evictor = _evictor(fake, tmp_path)
    results = [evictor.evict(_request("a")), evictor.evict(_request("b"))]
    assert [r.status for r in results] == [EvictionStatus.EVICTED] * 2
    assert {r.api_version for r in results} == {served[0]}
    assert [e["apiVersion"] for e in fake.evictions] == [served[0]] * 2
    assert sum(1 for p, _ in fake.requests if p == "/apis/policy") == 1
    assert fake.eviction_posts[0]["deleteOptions"]["preconditions"] == {"uid": "uid-a"}


def test_the_event_says_why(fake: FakeApiServer, tmp_path: Path) -> None:
    _pod(fake, "a")
    result = _evictor(fake, tmp_path).evict(_request("a"))
    assert result.event_created
    (event,) = fake.events
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": "a", "uid": "uid-a",
                                       "resourceVersion": event["involvedObject"]["resourceVersion"]}
    assert event["reason"] == "evictPodSuccess" and event["type"] == "Warning"
    assert "reason: EvictPodByNodeMemoryUsage" in event["message"] and "release 400000000 bytes" in event["message"]
    assert event["source"] == {"component": "hookserver", "host": "node-a"}


def test_pdb_refusal_is_reported_then_retried(fake: FakeApiServer, tmp_path: Path) -> None:
    _pod(fake, "a")
    fake.pdb_refusals[f"{NS}/a"] = 1
    evictor = _evictor(fake, tmp_path)
    t = [1000.0]
    evictor._clock = lambda: t[0]
    first = evictor.evict(_request("a"))
    assert first.status is EvictionStatus.REFUSED and "disruption budget" in first.detail
    assert fake.events == [] and evictor.refused == 1
    t[0] += 10.0
    assert evictor.evict(_request("a")).status is EvictionStatus.EVICTED


def test_pdb_refusal_honours_the_servers_retry_after(fake: FakeApiServer, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Issue 21: a 429 with `retryAfterSeconds: 10` was retried every second and logged each time. Inside the
    retry-after nothing is sent (the refusal is answered and counted here); the state change is logged once."""
    _pod(fake, "a")
    fake.pdb_refusals[f"{NS}/a"] = 100
    evictor = _evictor(fake, tmp_path)
    t = [1000.0]
    evictor._clock = lambda: t[0]
    caplog.set_level(logging.INFO, logger="hookserver.informer.evictor")
    assert evictor.evict(_request("a")).status is EvictionStatus.REFUSED
    posts = len(fake.eviction_posts)
    for _ in range(9):  # one round a second, inside the server's 10 s
        t[0] += 1.0
        held = evictor.evict(_request("a"))
        assert held.status is EvictionStatus.REFUSED and "retry-after" in held.detail
    assert len(fake.eviction_posts) == posts and evictor.refused == 1 and evictor.held == 9
    t[0] += 1.5
    assert evictor.evict(_request("a")).status is EvictionStatus.REFUSED  # asked again: refused again
    assert len(fake.eviction_posts) == posts + 1 and evictor.refused == 2
    refusals_logged = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals_logged) == 1 and "10 s" in refusals_logged[0].getMessage()
    fake.pdb_refusals[f"{NS}/a"] = 0
    t[0] += 11.0
    assert evictor.evict(_request("a")).status is EvictionStatus.EVICTED
    assert any("after 2 refusal(s)" in r.getMessage() for r in caplog.records)


def test_a_429_without_retry_after_waits_the_default(fake: FakeApiServer, tmp_path: Path) -> None:
    from hookserver.informer.evictor import DEFAULT_RETRY_AFTER_S

    _pod(fake, "a")
    fake.pdb_refusals[f"{NS}/a"] = 100
    fake.pdb_retry_after_s = 0
    evictor = _evictor(fake, tmp_path)
    t = [1000.0]
    evictor._clock = lambda: t[0]
    evictor.evict(_request("a"))
    t[0] += DEFAULT_RETRY_AFTER_S - 0.5
    evictor.evict(_request("a"))
    assert evictor.refused == 1 and evictor.held == 1


def test_terminating_gone_and_replaced_pods_are_not_evicted(fake: FakeApiServer, tmp_path: Path) -> None:
    evictor = _evictor(fake, tmp_path)
    _pod(fake, "a")
    assert evictor.evict(_request("a")).status is EvictionStatus.EVICTED
    assert evictor.evict(_request("a")).status is EvictionStatus.TERMINATING  # deletionTimestamp now set
    assert evictor.evict(_request("ghost")).status is EvictionStatus.NOT_FOUND
    _pod(fake, "c")
    assert evictor.evict(_request("c", uid="uid-old-c")).status is EvictionStatus.NOT_FOUND
    assert [e["pod"] for e in fake.evictions] == [f"{NS}/a"]


def test_apiserver_down_is_a_failed_result_not_an_exception(fake: FakeApiServer, tmp_path: Path) -> None:
    evictor = _evictor(fake, tmp_path)
    fake.kill()
    result = evictor.evict(_request("a"))
    assert result.status is EvictionStatus.FAILED and result.error


def _memory_runner(fake: FakeApiServer, tmp_path: Path, **settings: object) -> tuple[QoSRunner, StateStore, list[float]]:
    for name in ("p1", "p2", "p3"):
        _pod(fake, name)
    pods = (pod("p1", mem=300e6, namespace=NS), pod("p2", mem=500e6, namespace=NS), pod("p3", mem=100e6, namespace=NS))
    snap = snapshot(node=node(memory=10_000_000_000), pods=pods, usage=NodeUsage(memory_bytes=7.25e9), slo=slo(enable=True))
    clock = [1000.0]
    store = StateStore(clock=lambda: clock[0])
    reconcilers = [MemoryEvict()]
    gates = gate_registry(reconcilers).resolve([("flag --feature-gates", {"BEMemoryEvict": True})])
    runner = QoSRunner(
        reconcilers, gates=gates, snapshots=FixedSnapshots(snap, clock=clock, mark_evicted=True), store=store, executor=None,
        evictions=EvictionGuard(_evictor(fake, tmp_path), cooldown_s=300, clock=lambda: clock[0]),
        settings=QoSSettings(**settings), clock=lambda: clock[0], mono=lambda: clock[0],  # type: ignore[arg-type]
    )
    runner._state["MemoryEvict"] = EvictState(0.0)  # past the startup cool-down
    return runner, store, clock


def test_runner_evicts_through_the_api_and_never_twice(fake: FakeApiServer, tmp_path: Path) -> None:
    runner, store, clock = _memory_runner(fake, tmp_path)
    run_round(runner)
    # release 400 MB: p2 (500 MB) covers it.
    assert [e["pod"] for e in fake.evictions] == [f"{NS}/p2"]
    assert len(fake.events) == 1
    clock[0] += 2.0
    run_round(runner)  # 2 s: cooling down
    assert len(fake.evictions) == 1
    clock[0] += 2.0
    # 4 s: memory still high, but p2 is still present and on its way out: its 500 MB count as pending release
    # (≥ 400 MB), so the slow termination is not answered with more evictions.
    plans = run_round(runner)
    assert [e["pod"] for e in fake.evictions] == [f"{NS}/p2"]
    assert plans[0].numbers["BEMemoryEvict.pending_pods"] == 1 and plans[0].numbers["BEMemoryEvict.would_evict"] == 0
    # p2 gone from the node: p1 (300 MB) and p3 (100 MB) now cover the 400 MB.
    runner.snapshots.snap = replace(runner.snapshots.snap, pods=tuple(p for p in runner.snapshots.snap.pods if p.name != "p2"))
    clock[0] += 1.0
    run_round(runner)
    assert [e["pod"] for e in fake.evictions] == [f"{NS}/p2", f"{NS}/p1", f"{NS}/p3"]
    assert [e.status for e in store.audit.evictions()] == ["evicted"] * 3
    row = runner.report()["reconcilers"][0]
    assert row["evictions_last_hour"] == 3 and row["gate"]["source"] == "flag --feature-gates"


def test_dry_run_and_replay_leave_the_apiserver_untouched(fake: FakeApiServer, tmp_path: Path) -> None:
    runner, store, _ = _memory_runner(fake, tmp_path, dry_run=True)
    out = runner.replay("MemoryEvict", runner.snapshots.build())
    assert [e["pod"] for e in out["would_evict"]] == [f"{NS}/p2"]
    run_round(runner)
    assert fake.posts == [] and fake.evictions == [] and fake.events == []
    assert [e.status for e in store.audit.evictions()] == ["dry_run"]
    assert [p.mode for p in store.audit.plans()] == ["replay", "dry_run"]


@pytest.mark.parametrize(
    ("body_s", "header", "plain", "wait_s"),
    [
        (0, "30", False, 30.0),  # a Status without retryAfterSeconds, the header says 30 s
        (10, "30", False, 30.0),  # both: the longer one
        (20, "5", False, 20.0),
        (0, "45", True, 45.0),  # a proxy's plain-text 429: only the header
        (0, "Thu, 01 Jan 1970 00:17:20 GMT", False, 40.0),  # an HTTP date: 1040 s since the epoch, now 1000
        (0, "soon", False, 5.0),  # unreadable: the default (DEFAULT_RETRY_AFTER_S)
        (0, "900", False, 600.0),  # capped at 10 minutes
    ],
)
def test_a_429_honours_the_retry_after_header(fake: FakeApiServer, tmp_path: Path, body_s: int, header: str,
                                              plain: bool, wait_s: float) -> None:
    _pod(fake, "a")
    fake.pdb_refusals[f"{NS}/a"] = 100
    fake.pdb_retry_after_s = body_s
    fake.pdb_retry_after_header = header
    fake.pdb_plain_refusal = plain
    evictor = _evictor(fake, tmp_path)
    t = [1000.0]
    evictor._clock = lambda: t[0]
    first = evictor.evict(_request("a"))
    assert first.status is EvictionStatus.REFUSED and f"next try in {wait_s:.0f} s" in first.detail, first.detail
    t[0] += wait_s - 0.5
    assert evictor.evict(_request("a")).status is EvictionStatus.REFUSED
    assert evictor.refused == 1 and evictor.held == 1  # still inside the wait: nothing sent
    t[0] += 1.0
    evictor.evict(_request("a"))
    assert evictor.refused == 2  # past it: asked again
