from __future__ import annotations

from collections.abc import Callable

import pytest

from hookserver.predictor.settings import PredictorSettings
from hookserver.predictor.service import PredictorService
from hookserver.store.state import StateStore
from hookserver.store.timeseries import make_labels
from tests.predictor.helpers import NOW


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> StateStore:
    return StateStore(clock=clock)


@pytest.fixture
def make_service(store: StateStore, clock: Clock, tmp_path) -> Callable[..., PredictorService]:
    def build(**overrides: object) -> PredictorService:
        settings = PredictorSettings(**overrides)  # type: ignore[arg-type]
        return PredictorService(settings, store=store, checkpoint_dir=str(tmp_path / "predictor"), clock=clock)

    return build


def feed(store: StateStore, *, uid: str, cpu: list[float], memory: list[float], end: float, step: float = 1.0,
         qos: str = "LS", priority: str = "") -> None:
    """One sample a `step` for each value, the last at `end`."""
    n = len(cpu)
    for i in range(n):
        ts = end - (n - 1 - i) * step
        store.series.append(("pod_cpu_usage", make_labels(pod=uid, qos=qos, priority=priority)), cpu[i], ts=ts)
        store.series.append(("pod_memory_usage", make_labels(pod=uid, qos=qos, priority=priority)), memory[i], ts=ts)


def feed_node(store: StateStore, *, cpu: list[float], memory: list[float], end: float, step: float = 1.0) -> None:
    n = len(cpu)
    for i in range(n):
        ts = end - (n - 1 - i) * step
        store.series.append(("node_cpu_usage", ()), cpu[i], ts=ts)
        store.series.append(("node_memory_usage", ()), memory[i], ts=ts)
