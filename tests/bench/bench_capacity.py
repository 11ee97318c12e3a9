"""Capacity publisher costs and behaviour (issue 18), side by side in one run:

* the formula at 200 pods (target <= 1 ms p50), and what gathering its inputs from the store costs;
* Node status writes in one simulated hour of steady, noisy load at 200 pods (target <= 12 + one per real
  change; one real change happens at minute 30);
* reaction time from a step up of half the node's CPU in LS usage to a smaller offer on the Node, with the
  defaults (target <= 60 s), next to koord-manager's chain emulated on the same samples (report every 60 s over
  a 300 s average, then the 10 % rule).

`python -m tests.bench capacity` runs only this module.
"""

from __future__ import annotations

import random
import time

from hookserver.capacity import CapacitySettings, compute_capacity, gather_inputs
from hookserver.capacity.node_facts import node_facts
from hookserver.koord_resources import BATCH_CPU
from hookserver.slo.colocation import ColocationStrategy
from tests.bench.common import BenchRow, summarize
from tests.capacity.world import GI, World, ls_pod

PODS = 200


def _node(pods: int = PODS, seed: int = 7) -> World:
    world = World(node_cpu="96", node_memory="384Gi")
    rng = random.Random(seed)
    for i in range(pods):
        cls = ("koord-prod", "koord-prod", "koord-batch", "koord-mid")[i % 4]
        world.add_pod(ls_pod(f"p{i:03d}", cpu="250m", memory="1Gi", priority_class=cls),
                      rng.uniform(0.05, 0.3), rng.uniform(0.2, 0.9) * GI)
    return world


def _formula_rows() -> list[BenchRow]:
    world = _node()
    world.sample(300)
    snapshot = world.store.snapshot()
    strategy = ColocationStrategy(enable=True)
    node = node_facts(snapshot.node)  # type: ignore[arg-type]
    now = world.clock.t
    pods, usage, _, _ = gather_inputs(snapshot, world.store.series, now=now, window_s=300.0, fast_window_s=15.0)
    formula_s: list[float] = []
    gather_s: list[float] = []
    for _ in range(300):
        start = time.perf_counter()
        compute_capacity(strategy, node, pods, usage, prod_reclaimable=None)
        formula_s.append(time.perf_counter() - start)
    for _ in range(30):
        start = time.perf_counter()
        gather_inputs(world.store.snapshot(), world.store.series, now=now, window_s=300.0, fast_window_s=15.0)
        gather_s.append(time.perf_counter() - start)
    publisher = world.publisher()
    tick_s: list[float] = []
    for _ in range(30):
        world.clock.t += 0.001
        start = time.perf_counter()
        publisher.tick()
        tick_s.append(time.perf_counter() - start)
    f, g, t = summarize(formula_s[20:]), summarize(gather_s[3:]), summarize(tick_s[3:])
    return [
        BenchRow("capacity", f"formula, {PODS} pods (batch + mid, every term)", f"{f['p50_ms'] * 1000:.0f} us",
                 f"p99 {f['p99_ms'] * 1000:.0f} us; target 1 ms -> ratio {f['p50_ms'] / 1.0:.2f}"),
        BenchRow("capacity", f"inputs from the store, {PODS} pods x 300 s of 1 s samples", f"{g['p50_ms']:.1f} ms",
                 f"p99 {g['p99_ms']:.1f} ms; two windows per series, one ring copy each; on a worker thread"),
        BenchRow("capacity", "whole tick (inputs + formula + rules), every 10 s", f"{t['p50_ms']:.1f} ms",
                 f"p99 {t['p99_ms']:.1f} ms; {t['p50_ms'] / 10_000 * 100:.3f} % of one core"),
    ]


def _writes_in_an_hour(settings: CapacitySettings, *, change_at_s: float | None) -> tuple[int, int]:
    """(writes, ticks) over one hour of steady noisy load, ticking every `settings.interval_s`."""
    world = _node(seed=11)
    rng = random.Random(3)
    base = dict(world.pod_usage)
    world.sample(300)
    publisher = world.publisher(**settings.model_dump())
    start = world.clock.t
    next_tick = start
    ticks = 0
    while world.clock.t - start < 3600:
        elapsed = world.clock.t - start
        factor = 1.5 if change_at_s is not None and elapsed >= change_at_s else 1.0
        for uid, (cpu, mem) in base.items():
            world.pod_usage[uid] = (cpu * factor * rng.uniform(0.85, 1.15), mem * rng.uniform(0.97, 1.03))
        world.sample(1)
        if world.clock.t >= next_tick:
            publisher.tick()
            ticks += 1
            next_tick += settings.interval_s
    writes = sum(1 for call in world.sink.calls if call[0] == "apply")
    return writes, ticks


def _reaction_s(settings: CapacitySettings, *, tick_every_s: float) -> tuple[float, int, int]:
    """Seconds from a step of half the node's CPU in one LS pod's usage to the first smaller offer on the Node."""
    world = _node(seed=5)
    world.sample(600)
    publisher = world.publisher(**settings.model_dump())
    publisher.tick()
    before = int(world.node.allocatable[BATCH_CPU])
    world.add_pod(ls_pod("step", cpu="1", memory="1Gi"), 0.1, 1.0 * GI)
    world.sample(60)
    publisher.tick()
    step_at = world.clock.t
    world.pod_usage["uid-step"] = (48.0, 1.0 * GI)  # half the node's 96 cores
    offset = tick_every_s - ((world.clock.t - step_at) % tick_every_s)
    next_tick = world.clock.t + offset
    while world.clock.t - step_at < 900:
        world.sample(1)
        if world.clock.t >= next_tick:
            next_tick += tick_every_s
            if publisher.tick().action == "write" and int(world.node.allocatable[BATCH_CPU]) < before:
                return world.clock.t - step_at, before, int(world.node.allocatable[BATCH_CPU])
    return float("inf"), before, before


def _behaviour_rows() -> list[BenchRow]:
    defaults = CapacitySettings(warmup_s=10.0)
    steady, ticks = _writes_in_an_hour(defaults, change_at_s=None)
    changed, _ = _writes_in_an_hour(defaults, change_at_s=1800.0)
    reaction, before, after = _reaction_s(defaults, tick_every_s=defaults.interval_s)
    # koord-manager's chain on the same samples: a NodeMetric report every 60 s (300 s average), the 10 % rule.
    koord = CapacitySettings(warmup_s=10.0, fast_window_s=0.0, grow_hold_s=0.0, interval_s=60.0)
    koord_reaction, _, koord_after = _reaction_s(koord, tick_every_s=60.0)
    return [
        BenchRow("capacity", f"Node writes in 1 h of steady noisy load, {PODS} pods", f"{steady}",
                 f"{ticks} ticks; target <= 12 -> ratio {steady / 12:.2f}"),
        BenchRow("capacity", "  the same hour with one real change (+50 % LS load at 30 min)", f"{changed}",
                 f"target <= 13 -> ratio {changed / 13:.2f}"),
        BenchRow("capacity", "reaction: half the node's CPU steps up -> smaller offer", f"{reaction:.0f} s",
                 f"defaults (10 s ticks, 15 s fast window); batch-cpu {before} -> {after}; target 60 s -> ratio "
                 f"{reaction / 60:.2f}"),
        BenchRow("capacity", "  koord-manager's chain on the same samples", f"{koord_reaction:.0f} s",
                 f"report every 60 s of a 300 s average, 10 % rule; -> {koord_after}; "
                 f"hookserver / koord-manager {reaction / koord_reaction:.2f}"),
    ]


def run() -> list[BenchRow]:
    return _formula_rows() + _behaviour_rows()
