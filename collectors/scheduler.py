"""The collector scheduler: one `run_every` loop per interval group, each cycle on one worker thread.

Why a worker thread: a 1 s cycle on a 500-pod node reads a few thousand small files; doing that on the
event loop would add that time to hook latency. One thread (not a pool) keeps the collectors' previous
counters single-threaded and the cycle order (node, pods, host apps, then system) intact.

Each cycle resolves the pods from a store snapshot, runs the group's collectors in order, times each one,
counts failures (one collector's exception never stops the others), then appends all samples to the
time-series store in one batch. `status()` reports per collector: enabled, interval, last duration,
failures and the reason it is disabled.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from hookserver.aio.hotgate import pause
from hookserver.aio.periodic import run_every
from hookserver.store.state import StateStore
from hookserver.store.timeseries import make_labels

from collectors.base import Collector, CycleContext, SharedUsage
from collectors.settings import COLLECTOR_NAMES, CollectorSettings
from collectors.targets import TargetResolver, Targets

__all__ = ["CollectorScheduler", "CollectorState"]

log = logging.getLogger(__name__)

# Samples stored per append (`run_group`): about 0.2 ms of work between two hot-gate pauses.
_APPEND_SLICE = 500
_DURATION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(slots=True)
class CollectorState:
    """What `status()` and the exporter report for one collector. Written only on the worker thread."""

    name: str
    enabled: bool
    interval_s: float
    disabled_reason: str = ""
    runs: int = 0
    failures: int = 0
    last_run_at: float | None = None
    last_duration_s: float | None = None
    max_duration_s: float = 0.0
    last_samples: int = 0
    last_error: str = ""
    missing_total: int = 0
    read_errors_total: int = 0


def _order(name: str) -> int:
    return COLLECTOR_NAMES.index(name) if name in COLLECTOR_NAMES else len(COLLECTOR_NAMES)


class CollectorScheduler:
    def __init__(
        self,
        collectors: Sequence[Collector],
        *,
        settings: CollectorSettings,
        store: StateStore,
        resolver: TargetResolver,
        node_name: str,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        registry: CollectorRegistry | None = None,
        info: Mapping[str, str] | None = None,
        on_cycle: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.resolver = resolver
        self.clock = clock
        self.monotonic = monotonic
        self.node_labels = make_labels(node=node_name)
        self.shared = SharedUsage()
        self.info = dict(info or {})
        self._on_cycle = on_cycle
        self._on_close = on_close
        self._collectors = {c.name: c for c in sorted(collectors, key=lambda c: _order(c.name))}
        self._states: dict[str, CollectorState] = {}
        for name, collector in self._collectors.items():
            toggle = settings.toggle(name)
            state = CollectorState(name, toggle.enabled, toggle.interval_s)
            if not toggle.enabled:
                state.disabled_reason = "disabled in settings"
            self._states[name] = state
        for name, collector in self._collectors.items():
            needs = [n for n in getattr(collector, "requires", ()) if not self._states.get(n, _OFF).enabled]
            if needs and self._states[name].enabled:
                self._states[name].enabled = False
                self._states[name].disabled_reason = f"needs {', '.join(needs)}, which is disabled"
        self._probed = False
        self._problems: tuple[str, ...] = ()
        self.cycle_failures = 0
        self._duration: Histogram | None = None
        if registry is not None:
            self._duration = Histogram(
                "hookserver_collector_run_duration_seconds",
                "Time one collector took for one run.",
                ["collector"],
                buckets=_DURATION_BUCKETS_S,
                registry=registry,
            )

    # -- lifecycle -------------------------------------------------------------------------------
    def probe(self) -> None:
        """Ask each enabled collector whether it can run here (NVML present, PSI on). Once; blocking."""
        if self._probed:
            return
        self._probed = True
        for name, collector in self._collectors.items():
            state = self._states[name]
            if not state.enabled:
                continue
            try:
                reason = collector.probe()
            except Exception as exc:  # noqa: BLE001 - a collector that cannot start is disabled, never fatal
                reason = f"probe failed: {type(exc).__name__}: {exc}"
            if reason:
                state.enabled = False
                state.disabled_reason = reason
                log.info("collector %s disabled: %s", name, reason)

    def close(self) -> None:
        for collector in self._collectors.values():
            collector.close()
        if self._on_close is not None:
            self._on_close()  # e.g. the stat reader's kept-open descriptors

    def groups(self) -> dict[float, tuple[str, ...]]:
        """Enabled collectors by interval, each group in cycle order."""
        out: dict[float, list[str]] = {}
        for name, state in self._states.items():
            if state.enabled:
                out.setdefault(state.interval_s, []).append(name)
        return {interval: tuple(names) for interval, names in sorted(out.items())}

    async def run(self, stop: asyncio.Event) -> None:
        """Run every enabled collector at its interval until `stop` is set."""
        loop = asyncio.get_running_loop()
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="collectors")

        def on_error(exc: BaseException) -> None:
            self.cycle_failures += 1

        async def tick_for(names: tuple[str, ...], interval_s: float) -> None:
            await loop.run_in_executor(worker, self.run_group, names, interval_s)

        async def gc_tick() -> None:
            await loop.run_in_executor(worker, self.gc)

        try:
            await loop.run_in_executor(worker, self.probe)
            groups = self.groups()
            log.info(
                "collectors: %s",
                "; ".join(f"every {i:g}s: {', '.join(n)}" for i, n in groups.items()) or "none enabled",
            )
            async with asyncio.TaskGroup() as tg:
                for interval_s, names in groups.items():
                    tg.create_task(
                        run_every(
                            interval_s,
                            functools.partial(tick_for, names, interval_s),
                            stop,
                            name=f"collectors/{interval_s:g}s",
                            on_error=on_error,
                            clock=self.monotonic,
                        ),
                        name=f"collectors/{interval_s:g}s",
                    )
                tg.create_task(
                    run_every(
                        self.settings.gc_interval_s, gc_tick, stop, name="collectors/gc", on_error=on_error,
                        clock=self.monotonic, run_first_immediately=False,
                    ),
                    name="collectors/gc",
                )
        finally:
            worker.submit(self.close)
            worker.shutdown(wait=False)

    # -- one cycle (worker thread; tests and the benchmark call these directly) -------------------
    def targets(self) -> Targets:
        targets = self.resolver.resolve(self.store.snapshot())
        self._problems = targets.problems
        return targets

    def run_group(self, names: Sequence[str], interval_s: float) -> int:
        """Run the named collectors once, in cycle order, and store their samples. Returns samples kept."""
        pause()  # a cycle that starts in a wave of calls starts after it (the setup below is O(pods))
        if self._on_cycle is not None:
            self._on_cycle()  # e.g. drop the stat reader's memoised files
        snap = self.store.snapshot()
        targets = self.resolver.resolve(snap)
        self._problems = targets.problems
        ctx = CycleContext(
            now=self.clock(), mono=self.monotonic(), snapshot=snap, targets=targets, shared=self.shared,
            node_labels=self.node_labels,
        )
        for name in sorted(names, key=_order):
            pause()
            self._run_one(name, ctx)
        # In slices, each after the hot gate: one append of a 500-pod cycle's samples held the GIL for ms.
        kept = 0
        samples = ctx.samples
        for start in range(0, len(samples), _APPEND_SLICE):
            pause()
            kept += self.store.series.append_many(ctx.now, samples[start:start + _APPEND_SLICE], interval_s=interval_s)
        for key, value in ctx.statics.items():
            self.store.series.put_static(key, value)
        return kept

    def _run_one(self, name: str, ctx: CycleContext) -> None:
        collector = self._collectors[name]
        state = self._states[name]
        samples, missing, errors = len(ctx.samples), ctx.missing, len(ctx.errors)
        start = time.perf_counter()
        try:
            collector.collect(ctx)
        except Exception as exc:  # noqa: BLE001 - one collector failing must not stop the rest; counted, logged
            state.failures += 1
            state.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("collector %s failed: %s", name, state.last_error, exc_info=log.isEnabledFor(logging.DEBUG))
        elapsed = time.perf_counter() - start
        state.runs += 1
        state.last_run_at = ctx.now
        state.last_duration_s = elapsed
        state.max_duration_s = max(state.max_duration_s, elapsed)
        state.last_samples = len(ctx.samples) - samples
        state.missing_total += ctx.missing - missing
        state.read_errors_total += len(ctx.errors) - errors
        if len(ctx.errors) > errors:
            state.last_error = ctx.errors[-1]
        if self._duration is not None:
            self._duration.labels(name).observe(elapsed)

    def run_once(self) -> int:
        """Probe if needed, then run every enabled collector once in cycle order (tests, `hookctl`)."""
        self.probe()
        kept = 0
        for interval_s, names in self.groups().items():
            kept += self.run_group(names, interval_s)
        return kept

    def gc(self) -> int:
        return self.store.series.gc()

    # -- reporting -------------------------------------------------------------------------------
    def states(self) -> dict[str, CollectorState]:
        return dict(self._states)

    def status(self) -> dict[str, Any]:
        stats = self.store.series.stats()
        return {
            "collectors": {name: asdict(state) for name, state in self._states.items()},
            "cycle_failures": self.cycle_failures,
            "targets_problems": list(self._problems),
            "store": asdict(stats) | {"retention_s": self.store.series.retention_s},
            **self.info,
        }


_OFF = CollectorState("", False, 1.0)
