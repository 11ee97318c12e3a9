"""The publisher's decisions on a scripted node: when it writes, withdraws, waits or yields, and why."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from prometheus_client import CollectorRegistry

from hookserver.capacity import CapacityDelivery, CapacityMetrics, CapacityPublisher, CapacitySettings, LocalCapacitySink
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from tests.capacity.world import GI, World, colocation, ls_pod


def _warm(world: World, seconds: float = 30.0) -> None:
    world.sample(seconds)


def test_waits_for_samples_then_publishes_all_four_resources() -> None:
    world = World()
    publisher = world.publisher()
    world.sample(3)
    first = publisher.tick()
    assert first.state == "warming-up" and world.sink.calls == []
    world.sample(10)
    outcome = publisher.tick()
    assert outcome.state == "published" and outcome.action == "write", outcome
    (call,) = world.sink.calls
    assert call[0] == "apply" and call[2] is False
    assert set(call[1]) == {BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY}
    # 8000 - 3200 (40 % margin) - max(system 500m, kubelet 500m) - no pods = 4300 milli-cores
    assert call[1][BATCH_CPU] == "4300"
    assert world.node.allocatable[BATCH_CPU] == "4300"


def test_small_moves_wait_for_the_refresh_and_big_moves_go_at_once() -> None:
    world = World()
    publisher = world.publisher()
    _warm(world)
    publisher.tick()
    world.system = (0.7, 1.0 * GI)  # +200m system: 4300 -> 4100, under 10 %
    world.sample(40)
    outcome = publisher.tick()
    assert outcome.action == "none" and outcome.state == "published" and len(world.sink.calls) == 1, outcome
    assert "within 10%" in outcome.reason
    world.sample(300)
    refresh = publisher.tick()
    assert refresh.action == "write" and "refresh" in refresh.reason, refresh
    assert world.sink.calls[-1][1][BATCH_CPU] == "4100"
    world.system = (1.5, 1.0 * GI)  # 4100 -> 3300: -20 %
    world.sample(60)
    moved = publisher.tick()
    assert moved.action == "write" and "-20 %" in moved.reason, moved
    assert publisher.tick().action == "none"  # nothing changed since: no write


def test_a_step_up_in_ls_usage_shrinks_the_offer_within_the_fast_window_and_growth_is_slow() -> None:
    world = World()
    world.add_pod(ls_pod("web", cpu="1"), 0.2, 1.0 * GI)
    publisher = world.publisher()
    _warm(world, 400)
    publisher.tick()
    before = int(world.node.allocatable[BATCH_CPU])
    world.pod_usage["uid-web"] = (4.0, 1.0 * GI)  # half the node's 8 cores
    reacted_after = None
    for second in range(1, 61):
        world.sample(1)
        if second % 5 == 0 and publisher.tick().action == "write":
            reacted_after = second
            break
    assert reacted_after is not None and reacted_after <= 15, reacted_after
    shrunk = int(world.node.allocatable[BATCH_CPU])
    assert shrunk < before * 0.8
    # The spike ends: the 300 s report window still remembers it, so the offer comes back slowly.
    # The spike ends at once: the offer stays down for the growth hold (bursts do not make writes) ...
    world.pod_usage["uid-web"] = (0.2, 1.0 * GI)
    for _ in range(25):
        world.sample(10)
        publisher.tick()
    assert int(world.node.allocatable[BATCH_CPU]) == shrunk
    # ... and comes back once the higher figure has lasted grow_hold_s (300 s).
    for _ in range(10):
        world.sample(10)
        publisher.tick()
    assert int(world.node.allocatable[BATCH_CPU]) >= before * 0.95


def test_stale_samples_withdraw_the_offer_and_fresh_ones_bring_it_back() -> None:
    world = World()
    world.store.set_colocation(colocation(degradeTimeMinutes=1))
    publisher = world.publisher()
    _warm(world)
    publisher.tick()
    assert BATCH_CPU in world.node.allocatable
    world.clock.t += 61  # the collectors stopped: no sample for over a minute
    degraded = publisher.tick()
    assert degraded.state == "degraded" and degraded.action == "withdraw", degraded
    assert "metrics are 61 s old" in degraded.reason
    assert BATCH_CPU not in world.node.allocatable and not set(world.node.allocatable) & {MID_CPU, MID_MEMORY}
    assert publisher.tick().action == "none"  # withdrawn once
    world.sample(5)
    back = publisher.tick()
    assert back.state == "published" and back.action == "write", back


def test_no_sample_since_start_withdraws_an_old_offer_after_the_degrade_time() -> None:
    world = World()
    world.store.set_colocation(colocation(degradeTimeMinutes=1))
    world.set_offer({BATCH_CPU: "4000"}, owner="hookserver")  # left by the previous agent process
    publisher = world.publisher()
    assert publisher.tick().state == "warming-up"
    world.clock.t += 61
    outcome = publisher.tick()
    assert outcome.action == "withdraw" and "no node sample since the publisher started" in outcome.reason
    assert BATCH_CPU not in world.node.allocatable


def test_colocation_off_removes_our_offer_and_then_stays_quiet() -> None:
    world = World()
    publisher = world.publisher()
    _warm(world)
    publisher.tick()
    world.store.set_colocation(colocation(enabled=False))
    world.sample(1)
    outcome = publisher.tick()
    assert outcome.state == "disabled" and outcome.action == "withdraw"
    assert publisher.tick().action == "none" and len(world.sink.calls) == 2


def test_another_writer_is_never_overwritten() -> None:
    world = World()
    registry = CollectorRegistry()
    publisher = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10), sink=world.sink,
                                  standalone=False, clock=world.clock,
                                  metrics=CapacityMetrics(registry, node="node-a"))
    _warm(world)
    publisher.tick()
    world.other_writer("koordinator-manager", {BATCH_CPU: "1000", BATCH_MEMORY: "1Gi"})
    calls = len(world.sink.calls)
    for _ in range(5):
        world.sample(60)
        outcome = publisher.tick()
        assert outcome.state == "yielded" and "koordinator-manager" in outcome.reason
    assert len(world.sink.calls) == calls
    assert registry.get_sample_value("hookserver_capacity_yielded", {"node": "node-a", "manager": "koordinator-manager"}) == 1
    assert registry.get_sample_value("hookserver_capacity_state", {"node": "node-a", "state": "yielded"}) == 1


def test_a_conflict_from_the_apiserver_yields_too() -> None:
    world = World()
    publisher = world.publisher()
    _warm(world)
    world.sink.answers = [CapacityDelivery("conflict", "conflict with \"volcano-agent\"",
                                           conflicts=(("volcano-agent", ".status.allocatable.kubernetes.io/batch-cpu"),))]
    outcome = publisher.tick()
    assert outcome.state == "yielded" and "volcano-agent" in outcome.reason
    assert len(world.sink.calls) == 1  # not retried, not forced


def test_the_kubelet_zeroing_the_fields_is_taken_over() -> None:
    world = World()
    publisher = world.publisher()
    _warm(world)
    publisher.tick()
    world.other_writer("kubelet", {BATCH_CPU: "0", BATCH_MEMORY: "0"})  # node re-registered
    world.sample(10)
    outcome = publisher.tick()
    assert outcome.action == "write" and outcome.state == "published", outcome
    assert world.sink.calls[-1][2] is True  # force: the kubelet is not a publisher
    assert publisher.writes[-1].forced_from == ("kubelet",)


def test_a_taken_over_manager_that_keeps_coming_back_is_a_live_writer() -> None:
    world = World()
    publisher = world.publisher(take_over_from=("koordinator-manager",), max_takeovers_per_hour=2)
    _warm(world)
    for _ in range(3):
        world.other_writer("koordinator-manager", {BATCH_CPU: "1000"})
        world.sample(10)
        assert publisher.tick().action == "write"
    world.other_writer("koordinator-manager", {BATCH_CPU: "1000"})
    world.sample(10)
    outcome = publisher.tick()
    assert outcome.state == "yielded" and "koordinator-manager" in outcome.reason, outcome


def test_koord_manager_evidence_or_setting_means_no_writes() -> None:
    world = World()
    _warm(world)
    auto = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10), sink=world.sink,
                             standalone=False, clock=world.clock,
                             koord_manager_evidence=lambda: "NodeSLO node-a exists")
    outcome = auto.tick()
    assert outcome.state == "koord-manager" and "NodeSLO node-a exists" in outcome.reason
    manual = world.publisher(publisher="koord-manager")
    assert manual.tick().state == "koord-manager"
    assert world.sink.calls == []
    assert auto.last_result is not None and auto.last_result.value(BATCH_CPU) == 4300  # still computed, for hookctl


def test_a_failed_write_is_recomputed_not_repeated() -> None:
    world = World()
    publisher = world.publisher()
    _warm(world)
    world.sink.answers = [CapacityDelivery("error", "apiserver down")]
    failed = publisher.tick()
    assert failed.state == "error" and "apiserver down" in failed.reason
    world.system = (2.0, 1.0 * GI)  # the node changed during the outage
    world.sample(20)
    publisher.tick()
    assert world.sink.calls[-1][1][BATCH_CPU] == "2800"  # the fresh figure, not the one computed before


def test_a_store_copy_older_than_our_write_does_not_cause_a_second_write() -> None:
    world = World()
    publisher = world.publisher()
    _warm(world)
    world.sink.node = None  # the watch has not delivered our write yet
    world.sink.answers = [CapacityDelivery("ok")]
    publisher.tick()
    publisher._ours_rv = "99"  # what the apiserver answered
    world.sample(10)
    assert publisher.tick().action == "none"


def test_a_hung_tick_fails_liveness() -> None:
    world = World()
    mono = [0.0]
    release = threading.Event()
    publisher = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=0, hung_after_s=60),
                                  sink=world.sink, standalone=False, clock=world.clock, monotonic=lambda: mono[0])
    publisher._running = True
    world.sample(5)

    def stuck(values: object, *, force: bool = False) -> CapacityDelivery:
        mono[0] += 61
        hung, why = publisher.hung()
        assert hung and "running for 61 s" in why
        release.set()
        return CapacityDelivery("ok")

    world.sink.apply = stuck  # type: ignore[method-assign]
    publisher.tick()
    assert release.is_set()
    assert publisher.hung() == (False, "")
    mono[0] += 200  # no tick finished for too long (the loop itself is stuck)
    assert publisher.hung()[0]


def test_standalone_writes_the_offer_and_its_explanation_to_the_state_dir(tmp_path: Path) -> None:
    world = World()
    path = tmp_path / "capacity.json"
    sink = LocalCapacitySink(str(path))
    publisher = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10), sink=sink,
                                  standalone=True, clock=world.clock, document_path=str(path),
                                  koord_manager_evidence=lambda: "ignored standalone")
    _warm(world)
    publisher.tick()
    doc = json.loads(path.read_text())
    assert doc["status"]["allocatable"][BATCH_CPU] == "4300" == doc["status"]["capacity"][BATCH_CPU]
    assert doc["explanation"]["state"] == "published"
    assert doc["explanation"]["formula"][0]["formula"] == "max(8000 - 3200 - 500 - 0, 0) = 4300m"
    world.store.set_colocation(colocation(enabled=False))
    publisher.tick()
    doc = json.loads(path.read_text())
    assert doc["status"]["allocatable"] == {} and doc["explanation"]["state"] == "disabled"


def test_the_report_explains_every_term_and_the_next_write() -> None:
    world = World()
    world.add_pod(ls_pod("web", cpu="2"), 1.0, 2.0 * GI)
    publisher = world.publisher()
    _warm(world)
    publisher.tick()
    view = publisher.view()
    assert view["state"] == "published" and view["offer"][BATCH_CPU] == view["computed"][BATCH_CPU]
    cpu = view["formula"][0]
    names = [t["name"] for t in cpu["terms"]]
    assert names[:2] == ["capacity", "safety margin"] and "HP used" in names
    (line,) = view["pods"]
    assert line["pod"] == "ns/web" and line["counted_as"] == "usage" and line["used"]["cpu_milli"] == 1000
    assert view["policy"]["cpu"] == "usage" and view["policy"]["fast_window_s"] == 15.0
    assert "10%" in view["next_write"] and view["writes_last_hour"] == 1
    assert view["last_write"]["values"][BATCH_CPU] == cpu["value"].__str__()


def test_nothing_is_done_before_the_informer_has_synced() -> None:
    world = World()
    world.set_offer({BATCH_CPU: "4000"}, owner="hookserver")  # the offer of the agent before a restart
    world.store.set_colocation(None)  # what the store holds before the ConfigMap is listed: nothing
    synced = [False]
    publisher = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10), sink=world.sink,
                                  standalone=False, clock=world.clock, ready=lambda: synced[0])
    _warm(world)
    outcome = publisher.tick()
    assert outcome.state == "warming-up" and "first sync" in outcome.reason and world.sink.calls == []
    synced[0] = True
    world.store.set_colocation(colocation())
    assert publisher.tick().action == "write"  # the restarted agent recomputes, then writes (4000 -> 4300)


def test_a_stale_informer_lets_the_offer_shrink_but_not_grow() -> None:
    world = World()
    publisher = world.publisher(grow_hold_s=0)
    _warm(world)
    publisher.tick()
    world.store.set_stale(True)
    world.system = (0.1, 1.0 * GI)  # less used: 4700 would be a rise
    world.sample(20)
    held = publisher.tick()
    assert held.action == "none" and "stale" in held.reason, held
    world.system = (2.0, 1.0 * GI)  # more used: 2800 is a drop
    world.sample(20)
    shrunk = publisher.tick()
    assert shrunk.action == "write" and world.sink.calls[-1][1][BATCH_CPU] == "2800", shrunk
    assert "stale" in shrunk.reason


def test_handing_over_to_koord_manager_withdraws_only_this_agents_leftover_offer() -> None:
    world = World()
    world.set_offer({BATCH_CPU: "4000", BATCH_MEMORY: "8Gi"}, owner="hookserver")  # published before the switch
    publisher = world.publisher(publisher="koord-manager")
    _warm(world)
    outcome = publisher.tick()
    assert outcome.state == "koord-manager" and outcome.action == "withdraw", outcome
    assert BATCH_CPU not in world.node.allocatable
    assert publisher.tick().action == "none"  # once
    world.other_writer("koordinator-manager", {BATCH_CPU: "3000"})
    assert publisher.tick().action == "none" and world.node.allocatable[BATCH_CPU] == "3000"
