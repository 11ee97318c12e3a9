"""What the agent costs the apiserver, against the HTTP fake: no request that the watch makes needless, lists the
watch cache can answer, connections reused, waits that spread the nodes and honour Retry-After.

Waits are recorded through the reflector's injectable sleep (the delay each one chose), never measured."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookserver.aio.periodic import sleep_or_stop
from hookserver.config import Settings
from hookserver.informer import Informer, InformerSettings, build_informer
from hookserver.informer.last_seen import LastSeen
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.informer.reflector import _ResettingBackoff
from hookserver.informer.spread import ListSpread, phase_of
from hookserver.informer.transport import ApiClientTransport, load_client_configuration, retry_after_s
from hookserver.store import StateStore
from tests.informer.conftest import NODE, api_settings, eventually, run
from tests.informer.fake_apiserver import FakeApiServer, make_node, make_pod

NODEMETRIC = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"


class Waits:
    """Records each wait a reflector chooses, then sleeps a token 10 ms so tests stay fast.

    `now` is the node's wall clock as its relist points see it (running_with hands it to the spread): it starts at
    0, where every node's point is phase x window, and moves by the waits `clocked` (one resource) chooses, as if
    they had been slept in full."""

    def __init__(self, clocked: str = "") -> None:
        self.chosen: list[tuple[str, float]] = []
        self.informer: Informer | None = None
        # the informer's status as each wait began, by resource and delay: a node's resources relisting at its
        # point choose the same delay, and one's status must not overwrite another's
        self.status_at: dict[tuple[str, float], dict[str, Any]] = {}
        self.clocked = clocked
        self.now = 0.0

    def for_(self, name: str) -> Any:
        async def sleep(stop: asyncio.Event, delay: float) -> bool:
            self.chosen.append((name, delay))
            if name == self.clocked:
                self.now += delay
            if self.informer is not None:
                self.status_at[(name, delay)] = self.informer.status()
            return await sleep_or_stop(stop, min(delay, 0.01))
        return sleep

    def of(self, name: str) -> list[float]:
        return [d for n, d in self.chosen if n == name]


@contextlib.asynccontextmanager
async def running_with(settings: Settings, waits: Waits | None = None,
                       store: StateStore | None = None) -> AsyncIterator[Informer]:
    informer = build_informer(settings, store=store or StateStore(), registry=CollectorRegistry())
    if waits is not None:
        waits.informer = informer
        for reflector in informer.reflectors:
            reflector._sleep = waits.for_(reflector.kind.name)
            reflector._spread._clock = lambda: waits.now
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    try:
        yield informer
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)


def _nodemetric(status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                           "metadata": {"name": NODE}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}}
    if status is not None:
        obj["status"] = status
    return obj


def _lists(fake: FakeApiServer, path: str) -> list[dict[str, str]]:
    return [q for p, q in fake.requests if p == path and q.get("watch") not in ("1", "true") and "method" not in q]


def _watches(fake: FakeApiServer, path: str) -> list[dict[str, str]]:
    return [q for p, q in fake.requests if p == path and q.get("watch") in ("1", "true")]


# -- no needless requests ------------------------------------------------------------------------------------------
def test_nodemetric_status_is_patched_from_the_watched_object_without_a_get(fake: FakeApiServer, tmp_path: Path) -> None:
    """Before: every report was a GET of nodemetrics/<node> and then the PATCH (2 of 3.8 requests a minute)."""
    fake.apply("nodes", make_node(NODE))
    fake.apply("nodemetrics", _nodemetric(status={"old": {"x": 1}}))

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path)) as informer:
            assert await informer.wait_synced(5)
            assert informer.transport is not None
            writer = NodeMetricStatusWriter(informer.transport, node_name=NODE, seen=informer.nodemetric_seen,
                                            sleep=lambda s: None)
            rv = fake.get("nodemetrics", NODE)["metadata"]["resourceVersion"]
            for n in range(3):
                result = await asyncio.to_thread(writer.deliver, {"updateTime": f"t{n}", "nodeMetric": {"n": n}})
                assert (result.result, result.attempts) == ("ok", 1), result
            assert fake.paths_requested(f"{NODEMETRIC}/{NODE}") == 0 and writer.reads == 0
            patches = [p for k, _n, p in fake.patches if k == "nodemetrics"]
            assert patches[0]["metadata"] == {"resourceVersion": rv}
            assert patches[0]["status"]["old"] is None  # the diff was taken against the watched status
            # each later report carries the version its predecessor's answer gave, not a 409 and a re-read
            assert fake.get("nodemetrics", NODE)["status"] == {"updateTime": "t2", "nodeMetric": {"n": 2}}

    run(scenario())


def test_a_stale_cached_nodemetric_conflicts_once_then_reads_and_succeeds(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodemetrics", _nodemetric(status={"a": 1}))
    seen = LastSeen()
    seen.record(fake.get("nodemetrics", NODE))
    fake.update_as("koord-manager", "nodemetrics", NODE, {"status": {"a": 2}}, subresource="status")
    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))
    try:
        writer = NodeMetricStatusWriter(transport, node_name=NODE, seen=seen, sleep=lambda s: None)
        result = writer.deliver({"b": 1})
        assert (result.result, result.attempts, writer.reads) == ("ok", 2, 1)
        assert fake.get("nodemetrics", NODE)["status"] == {"b": 1}
        assert seen.get() is not None and seen.get().resource_version == result.resource_version  # type: ignore[union-attr]
    finally:
        transport.close()


def test_no_periodic_relist_while_watches_are_healthy(fake: FakeApiServer, tmp_path: Path) -> None:
    """Before: every 30 minutes (the resync period) a full relist of every resource on every node."""
    assert InformerSettings().resync_period_s == 0
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path, watch_timeout_s=1)) as informer:
            assert await informer.wait_synced(5)
            # the server ends each watch after 1-2 s; the reflector re-watches, it does not relist
            await eventually(lambda: len(_watches(fake, "/api/v1/pods")) >= 3, timeout_s=15, what="re-watches")
            assert len(_lists(fake, "/api/v1/pods")) == 1 and len(_lists(fake, "/api/v1/nodes")) == 1

    run(scenario())


def test_watch_connections_are_reused_across_rewatches(fake: FakeApiServer, tmp_path: Path) -> None:
    """Before: every watch the server ended closed its socket, and the next watch opened a new connection (a TLS
    handshake on a real apiserver)."""
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path, watch_timeout_s=1)) as informer:
            assert await informer.wait_synced(5)
            await eventually(lambda: len(_watches(fake, "/api/v1/pods")) >= 2, timeout_s=15, what="a first re-watch")
            settled = fake.connections
            before = sum(len(_watches(fake, p)) for p in ("/api/v1/pods", "/api/v1/nodes"))
            await eventually(lambda: len(_watches(fake, "/api/v1/pods")) >= 5, timeout_s=20, what="re-watches")
            after = sum(len(_watches(fake, p)) for p in ("/api/v1/pods", "/api/v1/nodes"))
            assert after - before >= 4
            assert fake.connections == settled, (fake.connections, settled)
            assert informer.transport is not None
            stats = informer.transport.connection_stats()  # type: ignore[attr-defined]
            assert stats.requests > stats.opened  # urllib3's own count agrees: requests share connections

    run(scenario())


def test_gzip_is_offered_and_a_compressed_list_is_decoded(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.gzip_min_bytes = 2000  # kube-apiserver's threshold is 128 KiB; a small list shows the same path
    fake.apply("nodes", make_node(NODE))
    uids = {fake.apply("pods", make_pod(f"p{i}"))["metadata"]["uid"] for i in range(20)}
    store = StateStore()

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path), store=store) as informer:
            assert await informer.wait_synced(5)
            assert uids <= set(store.snapshot().pods)

    run(scenario())
    assert fake.gzipped >= 1
    assert fake.accept_encodings and all("gzip" in e for e in fake.accept_encodings)


# -- lists the watch cache answers -----------------------------------------------------------------------------------
def test_first_list_asks_the_cache_and_a_relist_carries_the_last_resource_version(
    fake: FakeApiServer, tmp_path: Path,
) -> None:
    """Before: lists went without a resourceVersion (quorum reads from etcd) and with limit=500."""
    fake.apply("nodes", make_node(NODE))
    fake.apply("pods", make_pod("a"))

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path)) as informer:
            assert await informer.wait_synced(5)
            first = _lists(fake, "/api/v1/pods")[0]
            assert first["resourceVersion"] == "0" and first["fieldSelector"] == f"spec.nodeName={NODE}"
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            for i in range(3):  # other nodes' pods: only bookmarks move this watch's version
                fake.apply("pods", make_pod(f"o{i}", node="node-b"))
            target = str(fake.resource_version)
            await eventually(lambda: pods.resource_version == target, what="the bookmark")
            fake.expire_watches("pods")
            await eventually(lambda: len(_lists(fake, "/api/v1/pods")) == 2, what="the relist")
            relist = _lists(fake, "/api/v1/pods")[1]
            assert relist["resourceVersion"] == target
            assert relist["resourceVersionMatch"] == "NotOlderThan"
            assert "limit" not in relist  # with a limit, kube-apiserver <= 1.30 sends it to etcd

    run(scenario())


def test_bookmarks_keep_the_watch_resource_version_across_rewatches(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path, watch_timeout_s=1)) as informer:
            assert await informer.wait_synced(5)
            listed = _lists(fake, "/api/v1/pods")[0]
            for i in range(3):
                fake.apply("pods", make_pod(f"o{i}", node="node-b"))
            target = fake.resource_version
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            await eventually(lambda: int(pods.resource_version) >= target, what="the bookmark")
            count = len(_watches(fake, "/api/v1/pods"))
            await eventually(lambda: len(_watches(fake, "/api/v1/pods")) > count, timeout_s=10, what="a re-watch")
            assert int(_watches(fake, "/api/v1/pods")[-1]["resourceVersion"]) >= target
            assert _lists(fake, "/api/v1/pods") == [listed] and pods.events == 0

    run(scenario())


# -- waits that spread the nodes -------------------------------------------------------------------------------------
def test_the_first_list_waits_this_nodes_part_of_the_spread_window(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    waits = Waits()

    async def scenario() -> None:
        settings = api_settings(fake, tmp_path, first_list_spread_s=30)
        async with running_with(settings, waits) as informer:
            assert await informer.wait_synced(5)
            phases = {r._spread.phase for r in informer.reflectors}
            assert len(phases) == 1 and len({id(r._spread) for r in informer.reflectors}) == 1  # one per node
            (phase,) = phases
            for reflector in informer.reflectors:
                assert waits.of(reflector.kind.name)[0] == pytest.approx(phase * 30)

    run(scenario())
    # nodes draw apart: twenty agents of twenty nodes spread over the window; an agent restarted on the same node
    # keeps its node's phase (its name's hash)
    phases = []
    for name in [f"node-{i}" for i in range(20)] + ["node-0"]:
        settings = api_settings(fake, tmp_path, first_list_spread_s=30).model_copy(update={"node_name": name})
        informer = build_informer(settings, store=StateStore(), registry=CollectorRegistry())
        phases.append(informer.reflectors[0]._spread.phase)
        assert informer.transport is not None
        informer.transport.close()
    assert len(set(phases)) == 20 and max(phases) - min(phases) > 0.5
    assert phases[-1] == phases[0] == phase_of("node-0")


def test_the_phase_is_as_uniform_over_a_clusters_node_names_as_a_random_draw() -> None:
    """5,000 names as a cluster names its nodes: each tenth of the window holds 500 +- 4 standard deviations."""
    phases = [phase_of(f"ip-10-0-{i // 250}-{i % 250}.ec2.internal") for i in range(5000)]
    assert all(0 <= p < 1 for p in phases)
    deciles = [0] * 10
    for p in phases:
        deciles[int(p * 10)] += 1
    assert all(500 - 85 <= n <= 500 + 85 for n in deciles), deciles


def test_a_relist_forced_by_a_410_waits_the_nodes_slot_after_an_outage_and_on_a_healthy_watch(
    fake: FakeApiServer, tmp_path: Path,
) -> None:
    """On a healthy watch too: in the 200-node load test the apiserver expired every node's NodeSLO watch in the
    same second some 10 s after its restart (the CRD's storage reset), and relisting at once made 13 % of the
    nodes list in that second."""
    fake.apply("nodes", make_node(NODE))
    fake.apply("pods", make_pod("a"))
    waits = Waits()

    async def scenario() -> None:
        settings = api_settings(fake, tmp_path, relist_spread_s=40)
        async with running_with(settings, waits) as informer:
            assert await informer.wait_synced(5)
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            phase = pods._spread.phase
            fake.expire_watches("pods")  # a 410 on a healthy watch: the node's slot too
            await eventually(lambda: len(_lists(fake, "/api/v1/pods")) == 2, what="the healthy relist")
            assert waits.of("pods")[-1] == pytest.approx(phase * 40)
            # the relist's watch is open before the outage (a kill while it was being opened could leave the pods
            # reflector unaware of the outage for its whole watch timeout: once in a `make test` run)
            await eventually(lambda: fake.watch_count("pods") >= 2, what="the pods watch after the relist")
            # an outage during which the history is compacted: the reconnect gets 410 and relists, spread
            fake.kill()
            await eventually(lambda: informer.store.snapshot().stale, what="stale")
            fake.apply("pods", make_pod("b"))
            fake.compact()
            fake.start()
            await eventually(lambda: len(_lists(fake, "/api/v1/pods")) == 3, timeout_s=10, what="the outage relist")
            # the node's slot: phase x window from the first 410 of any of its resources (a moment earlier)
            assert phase * 40 - 1 < waits.of("pods")[-1] <= phase * 40 + 1e-6
            during = waits.status_at[("pods", waits.of("pods")[-1])]  # while it waited for its slot: stale, and says why
            assert during["stale"] is True
            assert any(r.startswith("pods: relist in") and "410" in r for r in during["stale_reasons"])
            await eventually(lambda: not informer.store.snapshot().stale, what="fresh again")

    run(scenario())


def test_429_waits_the_retry_after_and_does_not_grow_the_backoff(fake: FakeApiServer, tmp_path: Path) -> None:
    """Before: a 429 counted as a failure like any other, so while a restarted apiserver loaded its caches the
    backoff grew and NodeSLO and NodeMetric stayed stale 40 s after it was ready."""
    fake.apply("nodes", make_node(NODE))
    fake.throttle_next(4, retry_after_s=3, path_prefix="/api/v1/pods")
    waits = Waits()

    async def scenario() -> None:
        settings = api_settings(fake, tmp_path, backoff_initial_s=0.5, backoff_max_s=8, backoff_jitter=0.0)
        async with running_with(settings, waits) as informer:
            assert await informer.wait_synced(5)
            assert waits.of("pods") == [3.0, 3.0, 3.0, 3.0]
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            assert pods.throttled == 4
            # a real failure afterwards starts the backoff from its initial delay: the 429s did not grow it
            fake.kill()
            await eventually(lambda: len(waits.of("pods")) >= 6, timeout_s=10, what="two retries")
            assert waits.of("pods")[4:6] == [0.5, 1.0]
            fake.start()
            await eventually(lambda: not informer.store.snapshot().stale, what="fresh again")

    run(scenario())


def test_a_503_after_an_outage_retries_from_the_initial_delay(fake: FakeApiServer, tmp_path: Path) -> None:
    """A restarted kube-apiserver answers 503 for a custom resource until its CRD handler is ready. Before, the
    retry after that 503 waited the delay the outage had grown (up to 45 s), so the resource's 410 came late and
    its relist a window later: at 200 nodes the last 410 came 17 s after the apiserver answered and the last node
    was fresh after 56.6 s."""
    fake.apply("nodes", make_node(NODE))
    waits = Waits()

    async def scenario() -> None:
        settings = api_settings(fake, tmp_path, backoff_initial_s=0.5, backoff_max_s=8, backoff_jitter=0.0)
        async with running_with(settings, waits) as informer:
            assert await informer.wait_synced(5)
            fake.kill()
            await eventually(lambda: waits.of("pods")[-1:] == [8.0], timeout_s=10, what="the outage's backoff")
            fake.unavailable_next(2, path_prefix="/api/v1/pods")
            fake.start()
            await eventually(lambda: not informer.store.snapshot().stale, timeout_s=10, what="fresh again")
            after = waits.of("pods")[waits.of("pods").index(8.0):]
            assert after[-2:] == [0.5, 1.0], after  # the two 503s: from the initial delay, growing again

    run(scenario())


def test_stale_reason_says_why_and_what_happens_next(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.throttle_next(1000, retry_after_s=7, path_prefix="/api/v1/pods")

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path, backoff_jitter=0.0)) as informer:
            await eventually(lambda: any("429" in r for r in informer.status()["stale_reasons"]), what="a reason")
            status = informer.status()
            assert status["stale"] is True
            (reason,) = [r for r in status["stale_reasons"] if r.startswith("pods:")]
            assert "429" in reason and "Retry-After 7 s" in reason
            pods = next(s for s in status["sources"] if s["resource"] == "pods")
            assert 0 < pods["next_attempt_in_s"] <= 7
            fake._throttle.clear()

    run(scenario())


def test_backoff_resets_only_after_a_healthy_period(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("hookserver.informer.reflector.time.monotonic", lambda: now[0])
    settings = InformerSettings(backoff_initial_s=1, backoff_max_s=8, backoff_jitter=0, backoff_reset_s=60)
    backoff = _ResettingBackoff(settings, rand=lambda: 0.5)
    delays = []
    for _ in range(5):
        delays.append(backoff.next_delay())
        now[0] += 10  # a failure every 10 s: a list that succeeds in between does not reset it
    assert delays == [1, 2, 4, 8, 8]
    now[0] += 60
    assert backoff.next_delay() == 1


def test_backoff_reset_must_outlast_the_longest_delay() -> None:
    with pytest.raises(ValueError, match="backoff_reset_s"):
        InformerSettings(backoff_max_s=30, backoff_jitter=0.5, backoff_reset_s=40)


def test_retry_after_header_values() -> None:
    assert retry_after_s("3") == 3.0
    assert retry_after_s(" 1.5 ") == 1.5
    assert retry_after_s("3600") == 60.0  # a proxy's hour is not trusted
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after_s(None) == 0.0 and retry_after_s("-4") == 0.0


def test_the_pool_holds_every_watch_and_writer(fake: FakeApiServer, tmp_path: Path) -> None:
    configuration = load_client_configuration(fake.kubeconfig(str(tmp_path / "kc")))
    configuration.connection_pool_maxsize = 2  # what cpu_count * 5 gives no machine, but a small pool anyway
    transport = ApiClientTransport(configuration, pool_maxsize=16)
    try:
        assert transport._api.rest_client.pool_manager.connection_pool_kw["maxsize"] == 16
    finally:
        transport.close()


def test_probe_is_skipped_when_the_apiserver_answered_recently(fake: FakeApiServer, tmp_path: Path) -> None:
    clock = [100.0]
    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))),
                                   clock=lambda: clock[0])
    try:
        transport.get_json("/api/v1/nodes", {}, timeout_s=5)
        clock[0] += 30
        assert transport.confirm_alive(60, 2) and transport.probes == 0 and fake.paths_requested("/version") == 0
        clock[0] += 31
        assert transport.confirm_alive(60, 2) and transport.probes == 1 and fake.paths_requested("/version") == 1
        fake.kill()
        clock[0] += 61
        assert not transport.confirm_alive(60, 2)
        assert transport.last_probe_error
    finally:
        transport.close()


def test_every_410_waits_for_the_nodes_next_relist_point_on_the_clock() -> None:
    """Before, the slot was anchored at the node's first 410 and a 410 that came after the slot relisted at once:
    the CRDs' second wave of 410s after an apiserver restart relisted every node whose slot had passed in the same
    second or two (11 % of 200 nodes in one second with a 30 s window)."""
    now = [500.0]
    spread = ListSpread(first_list_s=5, relist_s=30, phase=0.5, clock=lambda: now[0])
    assert spread.first_list_delay() == 2.5
    # the node's points: t mod 30 = 15, i.e. ..., 495, 525, 555
    assert spread.relist_delay() == 25.0  # a 410 at 500 waits for 525
    now[0] = 504.0
    assert spread.relist_delay() == 21.0  # a sibling resource's 410 4 s later: the same point
    now[0] = 525.0
    assert spread.relist_delay() == 0.0  # on the point
    now[0] = 526.0
    assert spread.relist_delay() == 29.0  # after it (a second wave, a retry after 429): the next point, not at once
    now[0] = 555.0 - 1e-12
    assert 0.0 <= spread.relist_delay() < 1e-9
    assert ListSpread(first_list_s=5, relist_s=0, phase=0.5, clock=lambda: now[0]).relist_delay() == 0.0


def test_500_nodes_stay_under_5_percent_a_second_whatever_the_waves_of_410s() -> None:
    """The restart as the 500-node load test saw it, on the default window: the core resources' 410s as each node
    reconnects (0-15 s after the apiserver answers), the custom resources' 410s in waves (their storage rebuilt,
    at 5 s and again at 20 s for a third of the nodes), and a relist refused by a 429 for some. A node lists only
    at its own points, so no second holds more than the nodes whose point falls in it, and every node is fresh
    within its last 410 + the window."""
    window = InformerSettings().relist_spread_s
    rng = random.Random(25)
    start = 1_790_000_000.0  # a wall-clock time: the points are laid on the clock
    listing: dict[int, set[str]] = collections.defaultdict(set)
    late = 0.0  # seconds after its last 410 until a node listed
    for i in range(500):
        name = f"lt5a2c1-n{i:04d}"
        now = [0.0]
        spread = ListSpread(first_list_s=5, relist_s=window, phase=phase_of(name), clock=lambda: start + now[0])
        reconnect = rng.uniform(0, 15)
        gone = [reconnect, max(reconnect, 5.0) + rng.uniform(0, 0.5)]  # core resources, then the CRDs
        if i % 3 == 0:
            gone.append(20.0 + rng.uniform(0, 0.5))
        for t in gone:
            now[0] = t
            at = t + spread.relist_delay()
            if i % 7 == 0:  # the relist got a 429 (Retry-After 1 s): its retry waits for the node's point again
                now[0] = at + 1.0 + rng.uniform(0, 0.5)
                at = now[0] + spread.relist_delay()
                assert at - now[0] < window
            else:
                late = max(late, at - t)
            listing[int(at)].add(name)
    worst = max(len(nodes) for nodes in listing.values())
    assert worst <= 25, f"{worst} of 500 nodes relisted in one second"
    assert late < window


def test_a_relist_refused_with_429_is_retried_at_the_nodes_next_point(fake: FakeApiServer, tmp_path: Path) -> None:
    """Before, the retry came Retry-After (+ jitter) after the refusal: the nodes a loaded apiserver refused in one
    second came back together in the next, out of their slots."""
    fake.apply("nodes", make_node(NODE))
    fake.apply("pods", make_pod("a"))
    waits = Waits(clocked="pods")

    async def scenario() -> None:
        settings = api_settings(fake, tmp_path, relist_spread_s=40, backoff_jitter=0.0)
        async with running_with(settings, waits) as informer:
            assert await informer.wait_synced(5)
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            phase = pods._spread.phase
            fake.throttle_next(1, retry_after_s=2, path_prefix="/api/v1/pods")  # the relist's list
            fake.expire_watches("pods")
            # the first list, the relist refused, the relist at the next point
            await eventually(lambda: len(_lists(fake, "/api/v1/pods")) == 3, timeout_s=10, what="the relist")
            assert waits.of("pods") == pytest.approx([phase * 40, 2.0, 40 - 2.0])
            assert waits.now == pytest.approx(40 + phase * 40)  # the node's next point

    run(scenario())


def test_a_resource_backing_off_reconnects_when_a_sibling_reaches_the_apiserver() -> None:
    """Each resource backs off on its own, so after a long outage one node's resources came back up to 45 s apart
    and relisted in as many seconds; now the first to reach the apiserver wakes the others."""
    async def scenario() -> None:
        spread = ListSpread(first_list_s=0, relist_s=0, phase=0)
        stop = asyncio.Event()
        waiting = asyncio.create_task(spread.backoff(stop, 3600, sleep_or_stop))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        spread.answered()
        assert await asyncio.wait_for(waiting, 5) is False  # woken, not stopped
        stopped = asyncio.create_task(spread.backoff(stop, 3600, sleep_or_stop))
        await asyncio.sleep(0.01)
        stop.set()
        assert await asyncio.wait_for(stopped, 5) is True

    run(scenario())


def test_watches_ended_early_by_a_shutting_down_apiserver_count_as_an_outage(
    fake: FakeApiServer, tmp_path: Path,
) -> None:
    """A kube-apiserver that shuts down ends every watch cleanly; the reconnect to its successor then answers 410.
    Such a clean end long before timeoutSeconds is an outage, not a watch that ran its course: the relist waits the
    node's slot and `hookctl status` says it follows an outage."""
    fake.apply("nodes", make_node(NODE))
    waits = Waits()

    async def scenario() -> None:
        async with running_with(api_settings(fake, tmp_path, relist_spread_s=40, watch_timeout_s=600),
                                waits) as informer:
            assert await informer.wait_synced(5)
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            pods._spread.phase = 0.5  # a slot (20 s) no backoff delay could be mistaken for
            count = len(_watches(fake, "/api/v1/pods"))
            await asyncio.sleep(1.2)  # a watch that ran a while (one closed within 1 s is retried with backoff)
            fake.quiet(True)  # no bookmark moves the watch past what is compacted next
            fake.apply("pods", make_pod("elsewhere", node="node-b"))
            fake.compact()
            fake.end_watches()
            fake.quiet(False)
            await eventually(lambda: len(_lists(fake, "/api/v1/pods")) == 2, timeout_s=10, what="the relist")
            assert len(_watches(fake, "/api/v1/pods")) > count
            phase = pods._spread.phase
            assert phase * 40 - 1 < waits.of("pods")[-1] <= phase * 40 + 1e-6  # the node's relist slot
            during = waits.status_at[("pods", waits.of("pods")[-1])]
            assert any(r.startswith("pods: relist in") and "after an outage" in r for r in during["stale_reasons"])

    run(scenario())
