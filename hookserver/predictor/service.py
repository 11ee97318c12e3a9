"""The predictor: trains the models every interval, expires and checkpoints them, answers predictions and the
reclaimable estimate. One owner of the model table; the daemon runs `run(stop)` as a root task.

Blocking work (restore, checkpoint writes, training over the store) runs in a worker thread, so the loop
stays responsive; every tick is timed and counted. A failed tick is logged and skipped (`run_every`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from hookserver.aio.hotgate import pause, paced
from hookserver.aio.periodic import run_every
from hookserver.errors import CheckpointCorrupt
from hookserver.predictor.checkpoint import CheckpointProblem, Checkpointer, encode_checkpoint, read_koordlet_dir
from hookserver.predictor.metrics import PredictorMetrics
from hookserver.predictor.models import SYSTEM_UID, Model, ModelTable, priority_uid
from hookserver.predictor.predictors import ReclaimableReport, compute_reclaimable
from hookserver.podclass import KNOWN_PRIORITY_CLASSES, node_allocatable
from hookserver.seriesnames import POD_CPU, POD_MEMORY
from hookserver.predictor.settings import PredictorSettings
from hookserver.predictor.training import TrainingRound, collect_training_round
from hookserver.store.state import StateStore

__all__ = ["PredictorService"]

log = logging.getLogger(__name__)

_MAX_PROBLEMS = 50
_FINAL_FLUSH_BUDGET_S = 2.0
# Models trained per hold of the table's lock in a round (`train_once`), with a hot-gate pause between slices.
_TRAIN_SLICE = 32


class PredictorService:
    def __init__(
        self,
        settings: PredictorSettings,
        *,
        store: StateStore,
        checkpoint_dir: str,
        metrics: PredictorMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.table = ModelTable(cpu_half_life_s=settings.cpu_half_life_s,
                                memory_half_life_s=settings.memory_half_life_s)
        self.checkpointer = Checkpointer(checkpoint_dir)
        self._lock = threading.Lock()
        self.problems: list[CheckpointProblem] = []
        self.last_training: TrainingRound | None = None
        self.last_training_s = 0.0
        self.last_checkpoint_round: dict[str, Any] = {}
        self.restored: dict[str, Any] = {}
        self.started_at = 0.0

    # -- start -----------------------------------------------------------------------------------
    def restore(self) -> int:
        """Load every valid checkpoint; remove `*.tmp`; set bad files aside. Returns the models restored."""
        started = time.perf_counter()
        now = self.clock()
        try:
            self.checkpointer.ensure_dir()
        except OSError as exc:
            self._problem(CheckpointProblem(self.checkpointer.directory, "io", f"cannot create: {exc}", at=now))
            self._count_failure("restore")
        result = self.checkpointer.restore(self.table, now=now)
        for model in result.models:
            model.last_checkpointed = now  # what is on disk is current: no rewrite before the interval
            self.table.put(model)
        for problem in result.problems:
            self._problem(problem)
            if self.metrics is not None:
                self.metrics.checkpoints_rejected.labels(problem.reason).inc()
        koordlet = self._restore_from_koordlet(now)
        took = time.perf_counter() - started
        self.restored = {"models": len(result.models), "tmp_removed": result.tmp_removed,
                         "rejected": len(result.problems), "duration_s": round(took, 4), "at": now, **koordlet}
        if self.metrics is not None:
            self.metrics.restore_duration.set(took)
        self._update_model_counts()
        log.info("predictor: restored %d models from %s in %.3f s (%d tmp removed, %d set aside)",
                 len(result.models), self.checkpointer.directory, took, result.tmp_removed, len(result.problems))
        return len(result.models)

    def _restore_from_koordlet(self, now: float) -> dict[str, Any]:
        """Models koordlet left in its checkpoint directory, for UIDs we have none of. They are marked never
        checkpointed, so the next round writes them into our directory: from then on ours are read."""
        directory = self.settings.koordlet_checkpoint_dir
        if not directory:
            return {}
        if os.path.realpath(directory) == os.path.realpath(self.checkpointer.directory):
            log.warning("predictor: koordlet_checkpoint_dir %s is hookserver's own checkpoint directory; "
                        "not read a second time", directory)
            return {}
        result = read_koordlet_dir(directory, self.table, skip=set(self.table.uids()), now=now)
        for model in result.models:
            model.last_checkpointed = 0.0
            self.table.put(model)
        for problem in result.problems:
            self._problem(problem)
            if self.metrics is not None:
                self.metrics.checkpoints_rejected.labels(problem.reason).inc()
        if result.models or result.problems:
            log.info("predictor: read %d models from koordlet's checkpoints in %s (%d skipped)",
                     len(result.models), directory, len(result.problems))
        return {"koordlet_dir": directory, "koordlet_models": len(result.models),
                "koordlet_skipped": len(result.problems)}

    # -- the three periodic jobs -----------------------------------------------------------------
    def train_once(self, now: float | None = None) -> TrainingRound:
        at = self.clock() if now is None else now
        started = time.perf_counter()
        snapshot = self.store.snapshot()
        round_ = collect_training_round(snapshot.pods, self.store.series, now=at,
                                        window_s=self.settings.training_interval_s)
        samples = round_.samples
        for start in range(0, len(samples), _TRAIN_SLICE):  # the hot gate between slices (the table's lock is
            pause()                                            # held per slice, never across a pause)
            self.table.train(samples[start:start + _TRAIN_SLICE], at)
        took = time.perf_counter() - started
        self.last_training = round_
        self.last_training_s = took
        if self.metrics is not None:
            self.metrics.training_duration.observe(took)
            self.metrics.trained_pods.set(round_.pods_trained)
        self._update_model_counts()
        return round_

    def gc_once(self, now: float | None = None) -> list[str]:
        """Drop models not updated for `model_expiration_s`, and their checkpoints. Waits for the first training
        round (as koordlet waits for sync): a model restored after a long restart is kept if its pod still runs."""
        if self.last_training is None:
            return []
        at = self.clock() if now is None else now
        dead = self.table.expire(at - self.settings.model_expiration_s)
        for uid in dead:
            try:
                self.checkpointer.remove(uid)
            except (OSError, CheckpointCorrupt) as exc:
                log.warning("predictor: removing the checkpoint of expired model %s failed: %s", uid, exc)
                self._count_failure("remove")
        if dead:
            log.info("predictor: expired %d models not updated for %.0f s", len(dead), self.settings.model_expiration_s)
            self._update_model_counts()
        return dead

    def checkpoint_once(self, now: float | None = None, *, limit: int | None = None,
                        due_before: float | None = None, dirty_only: bool = False) -> list[str]:
        """Write the models most in need of a checkpoint (koordlet: oldest first, 12 a round, each every 10 min)."""
        at = self.clock() if now is None else now
        started = time.perf_counter()
        candidates = self.table.checkpoint_candidates(
            due_before=at - self.settings.checkpoint_interval_s if due_before is None else due_before,
            limit=self.settings.checkpoint_max_per_step if limit is None else limit,
            dirty_only=dirty_only,
        )
        written: list[str] = []
        failed = 0
        if candidates:
            try:
                self.checkpointer.ensure_dir()
            except OSError as exc:
                log.warning("predictor: checkpoint directory %s: %s", self.checkpointer.directory, exc)
        for uid in paced(candidates):  # the hot gate: step aside between checkpoints
            data = self.table.with_model(uid, encode_checkpoint)
            if not isinstance(data, bytes):
                continue  # expired meanwhile
            try:
                self.checkpointer.save(uid, data)
            except (OSError, CheckpointCorrupt) as exc:
                failed += 1
                self._count_failure("save")
                log.warning("predictor: checkpoint of %s failed: %s", uid, exc)
            else:
                written.append(uid)
            # Tried now: a failing model waits its interval instead of starving the others.
            self.table.with_model(uid, lambda m: _mark_checkpointed(m, at))
        if written:
            try:
                self.checkpointer.sync_dir()
            except OSError as exc:
                log.warning("predictor: fsync of %s failed: %s", self.checkpointer.directory, exc)
                self._count_failure("save")
        took = time.perf_counter() - started
        self.last_checkpoint_round = {"at": at, "written": len(written), "failed": failed, "duration_s": round(took, 4)}
        if self.metrics is not None:
            self.metrics.checkpoint_duration.observe(took)
            self.metrics.checkpoints_written.inc(len(written))
        return written

    def flush(self, *, budget_s: float = _FINAL_FLUSH_BUDGET_S) -> int:
        """On shutdown: checkpoint every model updated since its last checkpoint, within a time budget."""
        deadline = time.monotonic() + budget_s
        written = 0
        while time.monotonic() < deadline:
            batch = self.checkpoint_once(limit=64, due_before=self.clock(), dirty_only=True)
            written += len(batch)
            if not batch:
                break
        return written

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.to_thread(self.restore)
        self.started_at = self.clock()
        s = self.settings

        async def train() -> None:
            await asyncio.to_thread(self.train_once)

        async def gc() -> None:
            await asyncio.to_thread(self.gc_once)

        async def checkpoint() -> None:
            await asyncio.to_thread(self.checkpoint_once)

        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(run_every(s.training_interval_s, train, stop, name="predictor training",
                                            run_first_immediately=False), name="predictor:train")
                group.create_task(run_every(s.gc_interval_s, gc, stop, name="predictor gc",
                                            run_first_immediately=False), name="predictor:gc")
                group.create_task(run_every(s.checkpoint_round_s, checkpoint, stop, name="predictor checkpoint",
                                            run_first_immediately=False), name="predictor:checkpoint")
        finally:
            if stop.is_set():
                written = await asyncio.to_thread(self.flush)
                log.info("predictor: wrote %d checkpoints on shutdown", written)

    # -- answers ---------------------------------------------------------------------------------
    def pods_with_usage(self, window_s: float, now: float) -> set[str]:
        """Pods with both a CPU and a memory sample in the window (koordlet predicts only those)."""
        series = self.store.series
        have: dict[str, int] = {}
        for bit, metric in ((1, POD_CPU), (2, POD_MEMORY)):
            for key in series.keys(metric):
                uid = key.label("pod")
                if uid and have.get(uid, 0) & bit == 0 and series.values(key, window_s, now=now):
                    have[uid] = have.get(uid, 0) | bit
        return {uid for uid, bits in have.items() if bits == 3}

    def reclaimable(self, *, window_s: float = 300.0, now: float | None = None) -> ReclaimableReport:
        at = self.clock() if now is None else now
        snapshot = self.store.snapshot()
        uids = [*snapshot.pods, SYSTEM_UID, *(priority_uid(k) for k in KNOWN_PRIORITY_CLASSES)]
        report = compute_reclaimable(
            pods=snapshot.pods.values(),
            with_metrics=self.pods_with_usage(window_s, at),
            predictions=self.table.predict_many(uids),
            allocatable=node_allocatable(snapshot.node),
            now=at,
            cold_start_s=self.settings.cold_start_duration_s,
            margin_percent=self.settings.safety_margin_percent,
        )
        if self.metrics is not None:
            for result in (report.pod_based, report.priority_based, report.published):
                if result.ok:
                    self.metrics.record_reclaimable(result.name, result.cpu_milli, result.memory_bytes)
                    self.metrics.record_peak(result.name, result.peak_cpu_milli, result.peak_memory_bytes)
        return report

    def problem_list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p.as_dict() for p in self.problems]

    # -- helpers ---------------------------------------------------------------------------------
    def _problem(self, problem: CheckpointProblem) -> None:
        with self._lock:
            self.problems.append(problem)
            del self.problems[:-_MAX_PROBLEMS]

    def _count_failure(self, operation: str) -> None:
        if self.metrics is not None:
            self.metrics.checkpoint_failures.labels(operation).inc()

    def _update_model_counts(self) -> None:
        if self.metrics is not None:
            for kind, n in self.table.counts().items():
                self.metrics.models.labels(kind).set(n)

    def checkpoint_path(self, uid: str) -> str:
        return os.path.join(self.checkpointer.directory, f"{uid}.json")


def _mark_checkpointed(model: Model, at: float) -> None:
    model.last_checkpointed = at
