"""hookserver's own Prometheus registry and the hook metrics. No module touches the global registry.

The hook-call metrics sit on the hot path, where prometheus_client's locked counters and histograms
cost ~3 µs a call. So a call is queued as one tuple (an atomic deque append) and folded into the real
metrics when someone reads them (a scrape, `get_sample_value`: a collector registered first drains the
queue) or, once `_FOLD_AT` calls are queued, by a `metrics-fold` thread. Nothing is dropped; a scrape sees
every call made before it.

The fold is never the hot path's: folding 2,048 calls takes ~3 ms, and when the call that crossed the
threshold folded them itself, that one call in every 2,048 took 3-5 ms (the same call of the busy bench's
sequence in every run, idle daemon and busy alike, with no scrape). The folder waits at the hot gate before
each slice of `_FOLD_SLICE` calls, so a pod wave's calls are not held up by it either. Should the queue still
reach `_INLINE_AT` (the folder cannot run), the caller folds: memory stays bounded.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

from hookserver.aio.hotgate import GATE, HotGate
from hookserver.observability.koordlet_metrics import KoordletHookMetrics

__all__ = ["HookMetrics", "LATENCY_BUCKETS_S"]

log = logging.getLogger(__name__)

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5)
_FOLD_AT = 2048  # queued calls that wake the folder thread
_FOLD_SLICE = 256  # calls folded between two waits at the hot gate (~0.4 ms of work)
_INLINE_AT = 16 * _FOLD_AT  # the backstop: the caller folds (no folder thread could run)


class PluginRun(Protocol):
    """One plugin's run as the metrics read it (`hookserver.hooks.outcome.HookOutcome` is one)."""

    @property
    def plugin(self) -> str: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def error_type(self) -> str: ...


class _Drain:
    """Registered before the hook metrics, so every collect() folds the queued calls in first."""

    def __init__(self, fold: Any) -> None:
        self._fold = fold

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        self._fold()
        return ()


class HookMetrics:
    """Hook calls by door, rpc and result; call latency; per-plugin duration; cgroup writes."""

    def __init__(
        self, registry: CollectorRegistry, *, koordlet: KoordletHookMetrics | None = None, gate: HotGate = GATE,
    ) -> None:
        self.registry = registry
        self._gate = gate
        self._due = threading.Event()
        self._folder: threading.Thread | None = None
        self._folder_lock = threading.Lock()
        # koordlet's runtime-hook histogram, fed from the same plugin observations (koordlet_metrics.py).
        self.koordlet = koordlet
        # (door, rpc, result, latency_s, stage, plugin runs) per call, folded lazily. The runs are the
        # dispatcher's own outcome records (anything with .plugin, .duration_s, .error_type), read at fold
        # time: the hot path builds nothing for the metrics.
        self._pending: deque[tuple[str, str, str, float, str, Sequence[PluginRun]]] = deque()
        self._fold_lock = threading.Lock()
        # A scrape folds too, a slice at a time with the folder's waits at the hot gate: it is another background
        # thread taking the GIL, and a scrape that lands in a pod wave can wait for the wave.
        registry.register(_Drain(lambda: self.fold(paced=True)))
        self.calls = Counter(
            "hookserver_hook_calls_total",
            "Hook calls by front door, rpc and result (ok, skipped, error, rejected).",
            ["door", "rpc", "result"],
            registry=registry,
        )
        self.latency = Histogram(
            "hookserver_hook_latency_seconds",
            "Hook call latency inside the server, by front door and rpc.",
            ["door", "rpc"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.plugin_duration = Histogram(
            "hookserver_hook_plugin_duration_seconds",
            "Time one hook plugin took for one stage.",
            ["plugin", "stage"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.plugin_errors = Counter(
            "hookserver_hook_plugin_errors_total",
            "Hook plugin failures by plugin, stage and error type.",
            ["plugin", "stage", "error_type"],
            registry=registry,
        )
        self.cgroup_writes = Counter(
            "hookserver_cgroup_writes_total",
            "cgroup writes by resource file and result (ok, skipped, error).",
            ["resource", "result"],
            registry=registry,
        )
        self.breaker_open = Gauge(
            "hookserver_hook_breaker_open",
            "1 while a hook's breaker is open or half-open (the hook is skipped: it overran its time budget).",
            ["plugin", "stage"],
            registry=registry,
        )
        self.breaker_transitions = Counter(
            "hookserver_hook_breaker_transitions_total",
            "Hook breaker state changes by plugin, stage and new state (open, half-open, closed).",
            ["plugin", "stage", "state"],
            registry=registry,
        )
        self.nri_sync_partial = Counter(
            "hookserver_nri_sync_partial_total",
            "NRI Synchronize answers cut short by the runtime's deadline: the updates decided so far were "
            "answered and the rest of the pods handed to the reconciler at once.",
            registry=registry,
        )
        # `labels()` costs a few microseconds per call; the hot path looks its children up here instead.
        self._children: dict[tuple[str, ...], Any] = {}

    def queue_call(
        self, door: str, rpc: str, result: str, latency_s: float, stage: str = "", runs: Sequence[PluginRun] = (),
    ) -> None:
        """The hot path: one call and the plugin runs of its `stage`, queued as they are."""
        pending = self._pending
        pending.append((door, rpc, result, latency_s, stage, runs))
        if len(pending) >= _FOLD_AT:
            if len(pending) >= _INLINE_AT:
                self.fold(wait=False)
            elif not self._due.is_set():
                self._wake_folder()

    def fold(self, *, wait: bool = True, paced: bool = False) -> None:
        """Fold queued calls into the Prometheus metrics (any thread; one folder at a time).

        `wait=False`: if another thread is folding already, go on instead of queueing behind it (a convoy of
        every worker thread behind one fold). `paced`: the folder thread's way, a slice at a time, each after
        waiting at the hot gate.
        """
        if not self._fold_lock.acquire(blocking=wait):
            return
        try:
            while self._pending:
                if paced:
                    self._gate.pause()
                self._fold_some(_FOLD_SLICE if paced else len(self._pending))
        finally:
            self._fold_lock.release()

    def _wake_folder(self) -> None:
        if self._folder is None:
            with self._folder_lock:
                if self._folder is None:
                    self._folder = threading.Thread(target=self._fold_when_due, name="metrics-fold", daemon=True)
                    self._folder.start()
        self._due.set()

    def _fold_when_due(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            try:
                self.fold(paced=True)
            except Exception:  # noqa: BLE001 - a failed fold must not end folding (the calls stay queued)
                log.exception("metrics: folding queued hook calls failed")

    def _fold_some(self, limit: int) -> None:
        """Fold up to `limit` queued calls (the fold lock held)."""
        pending = self._pending
        calls: dict[tuple[str, str, str], list[float]] = {}
        runs: dict[tuple[str, str, bool], list[float]] = {}
        errors: list[tuple[str, str, str]] = []
        for _ in range(limit):
            try:
                door, rpc, result, latency_s, stage, plugin_runs = pending.popleft()
            except IndexError:
                break
            calls.setdefault((door, rpc, result), []).append(latency_s)
            for run in plugin_runs:
                error_type = run.error_type
                runs.setdefault((run.plugin, stage, bool(error_type)), []).append(run.duration_s)
                if error_type:
                    errors.append((run.plugin, stage, error_type))
        # One update per series and bucket, not one locked update per observation.
        for (door, rpc, result), latencies in calls.items():
            counter, histogram = self._call_children(door, rpc, result)
            counter.inc(len(latencies))
            _observe_all(histogram, latencies)
        for (plugin, stage, failed), durations in runs.items():
            _observe_all(self._plugin_child(plugin, stage), durations)
            if self.koordlet is not None:  # koordlet's histogram is in milliseconds
                _observe_all(self.koordlet.child(plugin, stage, failed), [d * 1000.0 for d in durations])
        for plugin, stage, error_type in errors:
            self.plugin_errors.labels(plugin, stage, error_type).inc()

    def _call_children(self, door: str, rpc: str, result: str) -> tuple[Any, Any]:
        key = ("call", door, rpc, result)
        pair = self._children.get(key)
        if pair is None:
            pair = (self.calls.labels(door, rpc, result), self.latency.labels(door, rpc))
            self._children[key] = pair
        return pair

    def _plugin_child(self, plugin: str, stage: str) -> Any:
        key = ("plugin", plugin, stage)
        child = self._children.get(key)
        if child is None:
            child = self.plugin_duration.labels(plugin, stage)
            self._children[key] = child
        return child

    def observe_call(self, door: str, rpc: str, result: str, latency_s: float) -> None:
        """Count one front-door call and its latency."""
        counter, histogram = self._call_children(door, rpc, result)
        counter.inc()
        histogram.observe(latency_s)

    def observe_plugin(self, plugin: str, stage: str, duration_s: float, error_type: str = "") -> None:
        """One plugin run; `error_type` is set when it failed."""
        self._plugin_child(plugin, stage).observe(duration_s)
        if error_type:
            self.plugin_errors.labels(plugin, stage, error_type).inc()
        if self.koordlet is not None:
            self.koordlet.observe(plugin, stage, duration_s, bool(error_type))

    def observe_sync_partial(self) -> None:
        """An NRI Synchronize answered only part of its updates (`hookserver.nri.sync`)."""
        self.nri_sync_partial.inc()

    def observe_breaker(self, plugin: str, stage: str, state: str) -> None:
        """A hook's breaker changed state (rare: not on the hot path)."""
        self.breaker_transitions.labels(plugin, stage, state).inc()
        self.breaker_open.labels(plugin, stage).set(0.0 if state == "closed" else 1.0)


def _observe_all(histogram: Any, values: list[float]) -> None:
    """`histogram.observe(v)` for each value, as one update per bucket.

    prometheus_client's Histogram keeps per-bucket counters (`_buckets`, non-cumulative), a `_sum` and its
    `_upper_bounds` (ending in +Inf); observe() adds 1 to the first bucket whose bound is >= the value.
    If a future client lays this out differently, fall back to observing one by one.
    """
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            histogram.observe(value)
        return
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect_left(bounds, value)] += 1
    total.inc(sum(values))
    for index, count in enumerate(counts):
        if count:
            buckets[index].inc(count)
