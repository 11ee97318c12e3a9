"""NRI Synchronize at node scale, on the wire against the test runtime: every update, multi-part under
ttrpc's 4 MiB, and a sync cut short by the runtime's deadline answering what it has and handing the rest
to the reconciler at once (`hookctl nri`, the metric). No test here times anything: how long a sync takes
is `python -m tests.bench nri_sync`."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from hookserver.api import nri_pb2
from hookserver.dispatch import HookDispatcher
from hookserver.hooks.context import ContainerRequest
from hookserver.hooks.outcome import HookResult
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.nri.sync import SyncWork
from hookserver.observability.metrics import HookMetrics
from hookserver.store.state import StateStore
from tests.nri.conftest import nri_world, run
from tests.nri.fake_runtime import GO_BUFFER, MAX_MESSAGE, wait_for
from tests.nri.scale import expected_update, node_objects


def _check_updates(reply: nri_pb2.SynchronizeResponse) -> dict[str, tuple[int, int, int]]:
    got: dict[str, tuple[int, int, int]] = {}
    for u in reply.update:
        _, index, name = u.container_id.split("-", 2)
        r = u.linux.resources
        values = (r.cpu.shares.value, r.cpu.quota.value, r.memory.limit.value)
        assert values == expected_update(int(index), name), u.container_id
        assert u.ignore_failure
        got[u.container_id] = values
    return got


def test_2500_pods_sync_in_parts_under_the_limit_with_every_update(sock_dir: Path) -> None:
    pods, ctrs = node_objects(2500, stopped_every=10)

    async def body() -> None:
        # A generous request timeout: this test is about completeness, not time (a shared CI machine).
        async with nri_world(sock_dir, pods=pods, containers=ctrs, request_timeout_ms=60_000) as w:
            conn = await w.runtime.ready_conn(timeout=60)
            assert conn.oversized_syncs >= 1 and len(conn.sync_replies) >= 4  # one message would be over 4 MiB
            assert max(conn.sync_chunk_sizes) <= MAX_MESSAGE
            assert all(r.more and not r.update for r in conn.sync_replies[:-1])
            final = conn.sync_replies[-1]
            assert not final.more and final.ByteSize() <= MAX_MESSAGE
            got = _check_updates(final)
            assert len(got) == len(final.update) == 5000  # every running container once; stopped ones none
            assert conn.max_plugin_frame <= GO_BUFFER
            status = w.plugin.status()["sync"]
            assert status["pods"] == 2500 and status["containers"] == 5250 and status["updates"] == 5000
            assert status["complete"] and status["handed_to_reconciler"] == 0 and status["partial_total"] == 0
            # After the reply the store learns the whole node and every pod's values are written.
            def learnt() -> bool:
                snap = w.store.snapshot()
                return len(snap.pods) == 2500 and len([c for c in snap.containers.values() if c.source == "nri"]) == 5000

            await wait_for(learnt, 30, "the store to learn the node")
            await wait_for(lambda: w.plugin.status()["sync"]["pods_written"] == 2500, 30, "the pod values")

    run(body(), timeout=120)


def test_64_kib_annotations_a_pod_sync_in_parts_with_every_update(sock_dir: Path) -> None:
    pods, ctrs = node_objects(150, annotation_bytes=64 << 10)

    async def body() -> None:
        async with nri_world(sock_dir, pods=pods, containers=ctrs, request_timeout_ms=60_000) as w:
            conn = await w.runtime.ready_conn(timeout=60)
            assert len(conn.sync_replies) >= 3 and max(conn.sync_chunk_sizes) <= MAX_MESSAGE
            assert len(_check_updates(conn.sync_replies[-1])) == 300
            # The store keeps its own copy of each pod's annotations (the sync's messages are gone).
            await wait_for(lambda: len(w.store.snapshot().pods) == 150, 30, "the store to learn the node")
            pod = w.store.snapshot().pods[pods[7].uid]
            assert dict(pod.annotations) == dict(pods[7].annotations)

    run(body(), timeout=120)


class _Gate:
    """BatchResource's container decision, held at the `hold_from`-th container until released."""

    name = "Gate"
    pure_decision = True

    def __init__(self, hold_from: int) -> None:
        self.hold_from = hold_from
        self.seen = 0
        self.release = threading.Event()
        self.holding = threading.Event()

    def pre_update_container_resources(self, request: ContainerRequest, view: object) -> HookResult:
        self.seen += 1
        if self.seen > self.hold_from:
            self.holding.set()
            self.release.wait(10)
        return BatchResourcePlugin().pre_update_container_resources(request, view)  # type: ignore[arg-type]


def test_a_sync_cut_short_answers_what_is_done_and_hands_the_rest_to_the_reconciler(sock_dir: Path) -> None:
    pods, ctrs = node_objects(40)
    gate = _Gate(hold_from=30)  # 15 pods' containers decided, then the hook holds past the budget
    handed: list[tuple[set[str], str]] = []
    metrics = HookMetrics(CollectorRegistry())

    async def body() -> None:
        async with nri_world(
            sock_dir, plugins=[gate], pods=pods, containers=ctrs, request_timeout_ms=400, start_plugin=False,
        ) as w:
            w.dispatcher.metrics = metrics
            w.plugin._catch_up = lambda uids, why: handed.append((set(uids), why))
            import asyncio

            w.task = asyncio.create_task(w.plugin.run(w.stop))
            conn = await w.runtime.ready_conn(timeout=10)
            gate.release.set()
            final = conn.sync_replies[-1]
            got = _check_updates(final)
            assert len(got) == 30  # what was decided: every container of the first 15 pods, nothing else
            assert {cid.split("-")[1] for cid in got} == {str(i) for i in range(15)}
            assert len(handed) == 1 and handed[0][1] == "nri-sync"
            assert handed[0][0] == {p.uid for p in pods[15:]}  # the pods the reply leaves out, and only those
            status = w.plugin.status()["sync"]
            assert not status["complete"] and status["handed_to_reconciler"] == 25 and status["partial_total"] == 1
            assert "handed to the reconciler now" in status["last_partial"]
            assert metrics.registry.get_sample_value("hookserver_nri_sync_partial_total") == 1.0
            events = [e for e in w.store.audit.events() if e.rpc == "Synchronize"]
            assert events and events[-1].result == "partial"
            # The connection lives on: the runtime got a valid answer in time.
            assert not conn.closed.is_set()

    run(body(), timeout=30)
    # `nri_world` started no plugin task of its own (start_plugin=False); ours was stopped with the world.


class _GateProbe:
    """BatchResource's decision, noting whether the hot gate counts a door call in flight while it decides, and
    whether automatic garbage collection is on."""

    name = "GateProbe"
    pure_decision = True

    def __init__(self) -> None:
        self.seen: list[bool] = []
        self.gc_on: list[bool] = []

    def pre_update_container_resources(self, request: ContainerRequest, view: object) -> HookResult:
        from hookserver.aio.hotgate import GATE

        self.seen.append(any(door.in_flight > 0 for door in GATE.doors.values()))
        self.gc_on.append(gc.isenabled())
        return BatchResourcePlugin().pre_update_container_resources(request, view)  # type: ignore[arg-type]


def test_background_work_steps_aside_while_a_sync_is_decided(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime waits for the sync's answer holding its plugin lock, so while the worker decides, the hot gate
    counts a door call in flight (collectors, QoS and the GC pacer step aside, as for CreateContainer), not only
    while the loop reads the request's frames; and the door is left once the answer is out."""
    from hookserver.aio import hotgate

    monkeypatch.setattr(hotgate.GATE, "linger_s", 0.0)  # only calls in flight count, not the last frame's linger
    pods, ctrs = node_objects(20)
    probe = _GateProbe()

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[probe], pods=pods, containers=ctrs) as w:
            conn = await w.runtime.ready_conn(timeout=10)
            assert len(_check_updates(conn.sync_replies[-1])) == 40
            await wait_for(lambda: not hotgate.GATE.busy(), 5, "the sync door to be left")
            assert hotgate.GATE.doors["nri-sync"].calls >= 1

    assert gc.isenabled()
    run(body(), timeout=30)
    assert len(probe.seen) == 40 and all(probe.seen)
    # No automatic collection inside the decisions (its young objects are the answer), and back on after: the
    # worker releases its hold after the reply and a gen-0 collection at the hot gate, which on a loaded machine
    # can come a moment after the runtime saw the reply (the suite once read gc still off right at the end).
    assert probe.gc_on == [False] * 40
    deadline = time.monotonic() + 5.0
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gc.isenabled()


def test_sync_work_decides_before_it_learns() -> None:
    """The reply's decisions come from the store as it was before the sync (as on the hot path); the store
    learns the node only after `answered` (the reply can go before the bookkeeping)."""
    pods, ctrs = node_objects(3)
    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=None)
    work = SyncWork.of(dispatcher, pods, ctrs)
    seen_at_answer: list[int] = []
    work.reply_sent.set()
    progress = work.run(lambda: seen_at_answer.append(len(store.snapshot().pods)))
    assert seen_at_answer == [0]
    assert progress.answered and progress.done and progress.decided == progress.wanted == 6
    assert len(progress.updates) == 6 and not progress.pending(pods, ctrs)
    assert len(store.snapshot().pods) == 3
    reply = nri_pb2.SynchronizeResponse.FromString(b"".join(progress.updates))
    assert len(_check_updates(reply)) == 6


def test_collection_is_held_until_the_reply_is_written_and_not_while_waiting_for_a_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ended before the reply is written, the hold would let the first allocation after it collect the whole
    answer's young objects while the loop writes the reply."""
    from hookserver.nri import sync

    monkeypatch.setattr(sync, "_REPLY_WAIT_S", 10.0)  # the worker waits for the reply as long as this test takes
    pods, ctrs = node_objects(4)
    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=None)
    work = SyncWork(dispatcher)
    seen: list[tuple[str, bool]] = []
    thread = threading.Thread(target=lambda: work.run(lambda: seen.append(("answered", gc.isenabled()))), daemon=True)
    thread.start()
    work.add(pods[:2], ctrs[:4], last=False)
    _until(lambda: work.progress.decided == 4, "the first chunk's decisions")
    seen.append(("between chunks", gc.isenabled()))
    work.add(pods[2:], ctrs[4:], last=True)
    _until(lambda: bool(seen) and seen[-1][0] == "answered", "the answer")
    time.sleep(0.02)
    seen.append(("reply not yet written", gc.isenabled()))
    work.reply_sent.set()
    thread.join(5)
    assert seen == [("between chunks", True), ("answered", False), ("reply not yet written", False)]
    assert gc.isenabled() and work.progress.done


def _worker(work: SyncWork, answered: list[str]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(work.run(lambda: answered.append("answered"))), daemon=True)
    thread.start()
    return thread, out


def _until(cond: object, what: str, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def test_a_split_sync_is_decided_chunk_by_chunk_as_the_chunks_come() -> None:
    """The worker decides a chunk's containers while the runtime sends the next one (containerd's library takes
    tens of ms to encode a 4 MiB chunk): when the last chunk comes, only its own containers are left. The reply
    still waits for the last chunk, and nothing is learnt before it."""
    pods, ctrs = node_objects(30)
    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=None)
    work = SyncWork(dispatcher)
    answered: list[str] = []
    work.reply_sent.set()
    thread, out = _worker(work, answered)
    work.add(pods[:20], ctrs[:40], last=False)
    _until(lambda: work.progress.decided == 40, "the first chunk's 40 containers to be decided")
    assert answered == [] and len(store.snapshot().pods) == 0 and not work.progress.complete
    work.add(pods[20:], ctrs[40:], last=True)
    thread.join(10)
    assert answered == ["answered"] and out and work.progress.done
    progress = work.progress
    assert progress.decided == progress.wanted == 60 and progress.decided_before_last == 40 and progress.chunks == 2
    assert progress.complete and not progress.pending(pods, ctrs)
    assert len(_check_updates(nri_pb2.SynchronizeResponse.FromString(b"".join(progress.updates)))) == 60
    assert len(store.snapshot().pods) == 30  # learnt after the answer, from every chunk


def test_a_container_listed_before_its_pod_waits_for_it_and_one_without_a_pod_gets_nothing() -> None:
    """A chunk boundary can fall between a pod and its containers (the runtime cuts pods and containers by
    count): a container whose pod comes in a later chunk is decided when it does; one whose pod never comes
    gets no update and is not pending (there is no pod to hand over)."""
    pods, ctrs = node_objects(6)
    orphan = nri_pb2.Container(id="ctr-orphan", pod_sandbox_id="no-such-sandbox", name="main", state=2)
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=StateStore(), executor=None)
    work = SyncWork(dispatcher)
    answered: list[str] = []
    work.reply_sent.set()
    thread, _ = _worker(work, answered)
    work.add(pods[:2], ctrs + [orphan], last=False)  # every container, but only two pods
    _until(lambda: work.progress.decided == 4, "the two listed pods' containers")
    assert work.progress.pending(pods, ctrs + [orphan]) == {p.uid for p in pods[2:]}
    work.add(pods[2:], [], last=True)
    thread.join(10)
    progress = work.progress
    assert answered == ["answered"] and progress.complete and progress.decided == 12
    got = _check_updates(nri_pb2.SynchronizeResponse.FromString(b"".join(progress.updates)))
    assert len(got) == 12 and "ctr-orphan" not in got


def test_a_sync_whose_runtime_goes_away_between_chunks_is_dropped() -> None:
    """The connection closes (or no chunk comes within the runtime's own deadline) between two chunks: the
    worker stops waiting, answers nothing and learns nothing; the next connection syncs afresh."""
    pods, ctrs = node_objects(4)
    for how in ("abandon", "timeout"):
        store = StateStore()
        dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=None)
        work = SyncWork(dispatcher, chunk_wait_s=0.2 if how == "timeout" else 30.0)
        answered: list[str] = []
        thread, _ = _worker(work, answered)
        work.add(pods[:2], ctrs[:4], last=False)
        _until(lambda: work.progress.decided == 4, "the first chunk")
        if how == "abandon":
            work.abandon()
        thread.join(10)
        assert not thread.is_alive(), how
        assert work.progress.abandoned and not work.progress.answered and not work.progress.done, how
        assert len(store.snapshot().pods) == 0, how


def test_a_runtime_that_goes_away_mid_sync_is_synced_afresh_on_the_next_connection(sock_dir: Path) -> None:
    """containerd restarts after sending two chunks of a split sync: the plugin drops that sync (its worker stops
    waiting, its hot-gate door is left), redials, and the next connection's sync answers every update."""
    from hookserver.aio.hotgate import GATE

    pods, ctrs = node_objects(12)
    door = GATE.door("nri-sync", threadsafe=False)
    before = door.in_flight

    async def body() -> None:
        async with nri_world(sock_dir, pods=pods, containers=ctrs, sync_chunk=8, drop_sync_after=2) as w:
            await wait_for(lambda: len(w.runtime.conns) >= 2 and w.runtime.conns[1].ready.is_set(), 10,
                           "the second connection's sync")
            first, second = w.runtime.conns[0], w.runtime.conns[1]
            assert len(first.sync_replies) == 2 and all(r.more for r in first.sync_replies)
            assert len(_check_updates(second.sync_replies[-1])) == 24
            assert door.in_flight == before  # the dropped sync's door was left, and the second's too
            status = w.plugin.status()
            assert status["connections"] == 2 and status["sync"]["complete"] and status["sync"]["updates"] == 24

    run(body(), timeout=30)


def test_closing_the_connection_mid_sync_leaves_the_sync_door() -> None:
    """`PluginService.close` (the connection's end) drops a split sync waiting for its next chunk and leaves
    its hot-gate door, so background work does not stay deferred by a sync that will never end."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from hookserver.aio.hotgate import GATE
    from hookserver.hooks.outcome import FailurePolicy
    from hookserver.nri.handlers import PluginService
    from hookserver.nri.status import NriStatus

    pods, ctrs = node_objects(4)
    registry = HookRegistry([BatchResourcePlugin()])
    dispatcher = HookDispatcher(registry=registry, store=StateStore(), executor=None)

    async def body() -> None:
        with ThreadPoolExecutor(2) as pool:
            service = PluginService(dispatcher=dispatcher, registry=registry, policy=FailurePolicy.IGNORE,
                                    status=NriStatus(plugin="00-test", socket="-"), pool=pool)
            door = GATE.doors["nri-sync"]
            before = door.in_flight
            reply = await service.synchronize(nri_pb2.SynchronizeRequest(pods=pods[:2], containers=ctrs[:4], more=True), 1.0)
            assert isinstance(reply, nri_pb2.SynchronizeResponse) and reply.more and not reply.update
            assert door.in_flight == before + 1
            service.close()
            assert door.in_flight == before
            progress = service._status.sync_progress
            await asyncio.wait_for(asyncio.to_thread(_until, lambda: progress.abandoned, "the worker to drop it"), 10)

    asyncio.run(body())


class _FailsForSidecars:
    """BatchResource's decision, except that it raises for every "sidecar" container."""

    name = "FailsForSidecars"
    pure_decision = True

    def pre_update_container_resources(self, request: ContainerRequest, view: object) -> HookResult:
        if request.name == "sidecar":
            raise ValueError("no sidecars today")
        return BatchResourcePlugin().pre_update_container_resources(request, view)  # type: ignore[arg-type]


def test_a_hook_that_fails_in_a_sync_costs_its_containers_their_update_and_nothing_else() -> None:
    """Sync never fails: a container whose hook raises gets no update, is counted as skipped, and its failed
    decision is audited and counted in the plugin metrics; every other container is answered."""
    pods, ctrs = node_objects(5)
    metrics = HookMetrics(CollectorRegistry())
    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry([_FailsForSidecars()]), store=store, executor=None, metrics=metrics)
    work = SyncWork.of(dispatcher, pods, ctrs)
    work.reply_sent.set()
    progress = work.run()
    assert progress.decided == 10 and progress.skipped == 5 and progress.complete
    got = _check_updates(nri_pb2.SynchronizeResponse.FromString(b"".join(progress.updates)))
    assert sorted(got) == sorted(f"ctr-{i}-main" for i in range(5))
    failed = [d for d in store.audit.decisions() if d.error]
    assert len(failed) == 5 and all("no sidecars today" in d.error for d in failed)
    assert metrics.registry.get_sample_value(
        "hookserver_hook_plugin_errors_total", {"plugin": "FailsForSidecars", "stage": "PreUpdateContainerResources",
                                            "error_type": "ValueError"}
    ) == 5.0


def test_the_bookkeeping_after_the_reply_steps_aside_at_the_hot_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store learning the node, the audits and the pod values come after the reply, when the runtime may
    already be creating containers: they pause at the hot gate every few pods (at 500 pods they were 30+ ms of
    CPU in one stretch, and CreateContainer calls right after a sync had a p99 of 6-11 ms); the answer does not."""
    from hookserver.aio import hotgate

    pods, ctrs = node_objects(64)
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=StateStore(), executor=None)
    work = SyncWork.of(dispatcher, pods, ctrs)
    events: list[str] = []
    monkeypatch.setattr(hotgate.GATE, "pause", lambda: events.append("pause"))
    work.reply_sent.set()
    progress = work.run(lambda: events.append("answered"))
    assert progress.done and len(progress.updates) == 128
    assert events[0] == "answered"  # nothing paused while the runtime waited for the answer
    # collecting what the answer's hold on collection put off (once, first), learning 64 pods (every 16) and 128
    # containers (every 32), auditing 128 decisions (every 64) and writing 64 pods (every 8): 1 + 4 + 4 + 2 + 8
    assert events.count("pause") == 19
