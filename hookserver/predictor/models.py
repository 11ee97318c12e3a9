"""The models: one CPU and one memory histogram per UID, and the table that holds them.

UIDs follow koordlet so checkpoints and `hookctl` speak its language: a pod's UID; `__node__`;
`__node-<class>__` per priority class (`__node-__` for none); `__node-sys__` for the system (node - pods).
Every access goes through `ModelTable`'s lock; readers get a frozen `Prediction`, never a live histogram.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hookserver.predictor.histogram import CPU_BUCKETS, MEMORY_BUCKETS, DecayingHistogram

__all__ = [
    "NODE_UID",
    "SYSTEM_UID",
    "Model",
    "ModelTable",
    "Prediction",
    "model_kind",
    "priority_uid",
]

NODE_UID = "__node__"
SYSTEM_UID = "__node-sys__"
PERCENTILES = (("p60", 0.6), ("p90", 0.9), ("p95", 0.95), ("p98", 0.98), ("max", 1.0))


def priority_uid(priority_class: str) -> str:
    return f"__node-{priority_class}__"


def model_kind(uid: str) -> str:
    """pod, node, priority or system."""
    if uid == NODE_UID:
        return "node"
    if uid == SYSTEM_UID:
        return "system"
    if uid.startswith("__node-") and uid.endswith("__"):
        return "priority"
    return "pod"


class Model:
    """Two histograms plus bookkeeping. Mutated only under the table lock."""

    __slots__ = ("cpu", "first_sample", "last_checkpointed", "last_updated", "memory", "samples", "uid")

    def __init__(self, uid: str, *, cpu_half_life_s: float, memory_half_life_s: float) -> None:
        self.uid = uid
        self.cpu = DecayingHistogram(CPU_BUCKETS, cpu_half_life_s)
        self.memory = DecayingHistogram(MEMORY_BUCKETS, memory_half_life_s)
        self.first_sample = 0.0
        self.last_updated = 0.0
        self.last_checkpointed = 0.0  # 0: never, so the next checkpoint round takes it
        self.samples = 0

    def add(self, cpu_cores: float, memory_bytes: float, ts: float) -> None:
        self.cpu.add_sample(cpu_cores, 1.0, ts)
        self.memory.add_sample(memory_bytes, 1.0, ts)
        if not self.first_sample:
            self.first_sample = ts
        self.last_updated = ts
        self.samples += 1

    def predict(self) -> Prediction:
        # koordlet: int64(percentile * 1000) milli-cores, int64(percentile) bytes (truncation).
        cpu = tuple(int(self.cpu.percentile(q) * 1000.0) for _, q in PERCENTILES)
        memory = tuple(int(self.memory.percentile(q)) for _, q in PERCENTILES)
        return Prediction(self.uid, cpu, memory, self.samples, self.first_sample, self.last_updated,
                          self.last_checkpointed)


@dataclass(frozen=True, slots=True)
class Prediction:
    """p60, p90, p95, p98 and max of one model: CPU in milli-cores, memory in bytes."""

    uid: str
    cpu_milli: tuple[int, ...]
    memory_bytes: tuple[int, ...]
    samples: int
    first_sample: float
    last_updated: float
    last_checkpointed: float

    def cpu(self, name: str) -> int:
        return self.cpu_milli[_INDEX[name]]

    def memory(self, name: str) -> int:
        return self.memory_bytes[_INDEX[name]]


_INDEX = {name: i for i, (name, _) in enumerate(PERCENTILES)}


class ModelTable:
    """UID -> Model under one lock. Training, GC, checkpoints and readers all come through here."""

    def __init__(self, *, cpu_half_life_s: float, memory_half_life_s: float) -> None:
        self._cpu_half_life_s = cpu_half_life_s
        self._memory_half_life_s = memory_half_life_s
        self._lock = threading.Lock()
        self._models: dict[str, Model] = {}

    def new_model(self, uid: str) -> Model:
        return Model(uid, cpu_half_life_s=self._cpu_half_life_s, memory_half_life_s=self._memory_half_life_s)

    def train(self, samples: Iterable[tuple[str, float, float]], ts: float) -> int:
        """Add one (uid, cpu cores, memory bytes) sample per model at `ts`, creating models as needed."""
        n = 0
        with self._lock:
            models = self._models
            for uid, cpu, memory in samples:
                model = models.get(uid)
                if model is None:
                    model = models[uid] = self.new_model(uid)
                model.add(cpu, memory, ts)
                n += 1
        return n

    def put(self, model: Model) -> None:
        with self._lock:
            self._models[model.uid] = model

    def predict(self, uid: str) -> Prediction | None:
        with self._lock:
            model = self._models.get(uid)
            return None if model is None else model.predict()

    def predict_many(self, uids: Iterable[str]) -> dict[str, Prediction]:
        with self._lock:
            return {uid: m.predict() for uid in uids if (m := self._models.get(uid)) is not None}

    def uids(self) -> list[str]:
        with self._lock:
            return list(self._models)

    def expire(self, older_than: float) -> list[str]:
        """Drop models whose last update is before `older_than`; return their UIDs."""
        with self._lock:
            dead = [uid for uid, m in self._models.items() if m.last_updated < older_than]
            for uid in dead:
                del self._models[uid]
        return dead

    def checkpoint_candidates(self, *, due_before: float, limit: int, dirty_only: bool = False) -> list[str]:
        """Oldest-checkpoint-first UIDs whose last checkpoint is before `due_before`, at most `limit`
        (`dirty_only`: only models updated since their last checkpoint, for the shutdown flush)."""
        with self._lock:
            models = self._models.values()
            if dirty_only:
                models = [m for m in models if m.last_updated > m.last_checkpointed]  # type: ignore[assignment]
            ordered = sorted(models, key=lambda m: m.last_checkpointed)
        out: list[str] = []
        for model in ordered:
            if len(out) >= limit or model.last_checkpointed > due_before:
                break
            out.append(model.uid)
        return out

    def with_model(self, uid: str, fn: Callable[[Model], object]) -> object:
        """Run `fn` on one model under the lock (checkpoint encoding); None when the model is gone."""
        with self._lock:
            model = self._models.get(uid)
            return None if model is None else fn(model)

    def counts(self) -> dict[str, int]:
        out = {"pod": 0, "node": 0, "priority": 0, "system": 0}
        with self._lock:
            for uid in self._models:
                out[model_kind(uid)] += 1
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._models)
