"""The QoS runner: one loop on the daemon's event loop that runs every due reconciler, carries its plan
out through the resource executor and the eviction guard, and audits every plan.

A round: build one snapshot (in a worker thread: it reads a few cgroup files), then per due reconciler:
gate and NodeSLO check, `plan` (or `plan_disabled`), execute unless dry run, record, commit the state.
Evictions talk to the apiserver (seconds when it is slow or down), so they run on their own worker thread:
a slow eviction never delays CPU suppress, and an evicting reconciler does not plan again until its last
batch has finished (its cool-down then starts from what really happened).
One reconciler's exception is caught, counted, logged once per distinct message and shown by `hookctl
qos`; the others still run. Dry run (global `--qos-dry-run` or per reconciler) plans, audits and shows,
and writes and evicts nothing; its state advances as if it had (so the plans shown follow the same
cool-downs a real run would).
"""

from __future__ import annotations

import datetime as _dt
import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol

from hookserver.aio.hotgate import pause, paced
from hookserver.aio.periodic import run_every
from hookserver.errors import ConfigError, HookServerError, InputError
from hookserver.eviction import EvictionResult, EvictionStatus
from hookserver.executor.plan import CookieOp, FileWrite, NetCommand, ResourceExecutor
from hookserver.store.audit import EvictionRecord, PlanRecord
from hookserver.store.state import StateStore

from qos.framework.evict_round import walk
from qos.framework.evictions import EvictionGuard
from hookserver.featuregates import GateValues
from qos.framework.metrics import QoSMetrics
from qos.framework.plan import PlannedEviction, QoSPlan
from qos.framework.reconciler import Reconciler, RoundOutcome, Verdict
from qos.settings import QoSSettings
from qos.snapshot.model import QoSSnapshot

__all__ = ["QoSRunner", "ReconcilerStatus", "RoundRecorder", "SnapshotSource", "SystemFiles"]

log = logging.getLogger(__name__)

_EPSILON_S = 0.05
# Writes and evictions kept per plan in the audit (with the totals): 4096 plans of 200 pods stay small.
AUDIT_PLAN_ITEMS = 10
_HOUR_S = 3600.0


class SystemFiles(Protocol):
    """Carries out a plan's `files` (hookserver.executor.sysfiles.SystemFileExecutor; the daemon wires it)."""

    def apply(self, writes: Sequence[FileWrite]) -> Sequence[Any]: ...


class NetCommands(Protocol):
    """Carries out a plan's `commands` (hookserver.executor.netcmd.TcExecutor; the daemon wires it)."""

    def apply(self, commands: Sequence[NetCommand]) -> Sequence[Any]: ...


class CookieCarrier(Protocol):
    """Carries out a plan's `cookies` (hookserver.executor.coresched.CookieExecutor; the daemon wires it)."""

    def apply(self, ops: Sequence[CookieOp]) -> Sequence[Any]: ...


class RoundRecorder(Protocol):
    """Keeps each round's snapshot and plans (hookserver.recorder.FlightRecorder; the daemon wires it). Must not
    raise: a recorder's trouble is its own, never the round's."""

    def record_round(self, snapshot: QoSSnapshot, plans: Sequence[QoSPlan]) -> bool: ...


class SnapshotSource(Protocol):
    def build(self, *, evicted: frozenset[str] = frozenset()) -> QoSSnapshot: ...


@dataclass
class ReconcilerStatus:
    """What `hookctl qos` shows per reconciler (mutable, owned by the runner)."""

    rounds: int = 0
    errors: int = 0
    last_run: float = 0.0
    last_mono: float = -1e18
    last_duration_s: float = 0.0
    last_summary: str = ""
    last_verdict: Verdict = field(default_factory=lambda: Verdict(False, "not run yet"))
    last_error: str = ""
    last_error_at: float = 0.0
    last_plan: dict[str, Any] = field(default_factory=dict)
    last_outcome: RoundOutcome | None = None


# `hookctl qos` names the pods of the last evictions (whom, when, why); `hookctl events` lists them all.
_LAST_EVICTIONS = 5
# Pods whose last eviction result the runner remembers (to log and audit changes, not repeats).
_EVICTION_STATES_MAX = 4096


def _eviction_row(record: EvictionRecord) -> dict[str, Any]:
    return {
        "time": _dt.datetime.fromtimestamp(record.ts, _dt.timezone.utc).isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "pod": record.pod_key, "reconciler": record.reconciler, "reason": record.reason, "status": record.status,
        "backend": record.backend, "message": record.message, "detail": record.detail, "error": record.error,
    }


class QoSRunner:
    def __init__(
        self,
        reconcilers: Sequence[Reconciler],
        *,
        gates: GateValues,
        snapshots: SnapshotSource,
        store: StateStore,
        executor: ResourceExecutor | None,
        evictions: EvictionGuard,
        settings: QoSSettings | None = None,
        metrics: QoSMetrics | None = None,
        clock: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
        evict_in_background: bool = True,
        system_files: SystemFiles | None = None,
        ready: Callable[[], bool] | None = None,
        recorder: RoundRecorder | None = None,
        net_commands: NetCommands | None = None,
        cookies: CookieCarrier | None = None,
    ) -> None:
        names = [r.name for r in reconcilers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"qos: reconciler name(s) registered twice: {', '.join(duplicates)}")
        self.settings = settings or QoSSettings()
        unknown = sorted(set(self.settings.reconcilers) - set(names))
        if unknown:
            raise ConfigError(f"qos.reconcilers: unknown reconciler(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        self.reconcilers: dict[str, Reconciler] = {r.name: r for r in reconcilers}
        self.gates = gates
        for r in reconcilers:
            for gate in r.gates:
                gates.enabled(gate.name)  # KeyError here means the daemon forgot to register the gate
        # What planners of multi-gate reconcilers read (`QoSSnapshot.gate_on`): the gates do not change at run time.
        self._gate_map = MappingProxyType({name: value.enabled for name, value in gates.values.items()})
        self.snapshots = snapshots
        # Nothing acts before the informer's first sync: a round on the default NodeSLO (threshold strategies
        # off) would "restore" BE to every CPU for the second it takes the real NodeSLO to arrive.
        self._ready = ready
        self._was_ready = ready is None
        self.store = store
        # The flight recorder gets every round's snapshot and plans (it decides which to keep).
        self.recorder = recorder
        self.executor = executor
        self.system_files = system_files
        self.net_commands = net_commands
        self.cookies = cookies
        self.evictions = evictions
        # pod UID -> the status of its last eviction result; repeated refusals are counted, not re-audited
        self._eviction_states: dict[str, str] = {}
        self.refusals_repeated = 0
        self.metrics = metrics
        self._clock = clock
        self._mono = mono
        self._lock = threading.Lock()
        now = clock()
        self._state: dict[str, Any] = {r.name: r.initial_state(now) for r in reconcilers}
        self.status_of: dict[str, ReconcilerStatus] = {r.name: ReconcilerStatus() for r in reconcilers}
        self._logged_errors: dict[str, str] = {}
        self._last_recorded: dict[str, tuple[str, str]] = {}
        self.round_errors = 0
        self.last_round_error = ""
        self.waiting = ""
        self._state_lock = threading.Lock()
        self._pending: dict[str, Future[None]] = {}
        self._evict_pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookserver-qos-evict") if evict_in_background else None
        )

    # -- configuration ---------------------------------------------------------------------------
    def dry_run(self, name: str) -> bool:
        per = self.settings.reconcilers.get(name)
        return self.settings.dry_run or bool(per is not None and per.dry_run)

    def tick_s(self) -> float:
        return min((r.interval_s for r in self.reconcilers.values()), default=1.0)

    # -- the loop ---------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        async def tick() -> None:
            await asyncio.to_thread(self.round)

        try:
            await run_every(self.tick_s(), tick, stop, name="qos", on_error=self._round_failed)
        finally:
            if self._evict_pool is not None:
                self._evict_pool.shutdown(wait=False, cancel_futures=True)

    def wait_evictions(self, timeout_s: float | None = None) -> None:
        """Block until every eviction batch handed to the worker has finished (tests, benchmarks)."""
        for future in list(self._pending.values()):
            try:
                future.result(timeout=timeout_s)
            except Exception:  # noqa: BLE001 - the batch's own failure is already counted and shown
                pass

    def _round_failed(self, exc: BaseException) -> None:
        self.round_errors += 1
        self.last_round_error = f"{type(exc).__name__}: {exc}"

    def due(self, now_mono: float) -> list[Reconciler]:
        return [
            r for r in self.reconcilers.values()
            if now_mono - self.status_of[r.name].last_mono >= r.interval_s - _EPSILON_S
        ]

    def round(self) -> list[QoSPlan]:
        """One pass over the due reconcilers. Returns their plans (for tests and the benchmark)."""
        started = self._mono()
        if not self._was_ready:
            assert self._ready is not None
            if not self._ready():
                self.waiting = "waiting for the informer's first sync (pods, node, NodeSLO)"
                return []
            self._was_ready, self.waiting = True, ""
        due = self.due(started)
        if not due:
            return []
        pause()  # a round that falls due in a wave of calls starts after it (building the snapshot is O(pods))
        with self._lock:
            try:
                snapshot = self.with_gates(self.snapshots.build(evicted=self.evictions.recently_evicted()))
            except Exception as exc:  # noqa: BLE001 - no snapshot, no round; counted and shown
                self._round_failed(exc)
                log.warning("qos: cannot build the snapshot: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
                return []
            plans = [self._run_one(r, snapshot, started) for r in paced(due)]
            done = [p for p in plans if p is not None]
            if self.recorder is not None:
                self.recorder.record_round(snapshot, done)
        if self.metrics is not None:
            self.metrics.round_duration.observe(self._mono() - started)
        return done

    def _run_one(self, reconciler: Reconciler, snapshot: QoSSnapshot, started: float) -> QoSPlan | None:
        name = reconciler.name
        status = self.status_of[name]
        status.last_mono = started
        pending = self._pending.get(name)
        if pending is not None and not pending.done():
            status.last_summary = "waiting: the evictions of its last round are still in progress"
            return None
        status.last_run = self._clock()
        status.rounds += 1
        with self._state_lock:
            state = self._state.get(name)
        t0 = self._mono()
        try:
            verdict = self._verdict(reconciler, snapshot)
            status.last_verdict = verdict
            if verdict.enabled:
                plan = reconciler.plan(snapshot, state)
            else:
                plan = reconciler.plan_disabled(snapshot, state, verdict.reason)
        except Exception as exc:  # noqa: BLE001 - one reconciler's bug must not stop the others
            self._failed(reconciler, exc, "plan")
            return None
        duration = self._mono() - t0
        status.last_duration_s = duration
        if self.metrics is not None:
            self.metrics.plan_duration.labels(name).observe(duration)
            self.metrics.rounds.labels(name, "planned" if verdict.enabled else "disabled").inc()
        dry = self.dry_run(name)
        status.last_summary = plan.summary
        status.last_plan = plan.describe(max_items=AUDIT_PLAN_ITEMS)
        self._record_plan(plan, "dry_run" if dry else "applied", duration)
        try:
            writes_ok, writes_failed = self._apply_writes(plan, dry)
            if plan.evictions and not dry and self._evict_pool is not None:
                self._pending[name] = self._evict_pool.submit(
                    self._evict_and_commit, reconciler, plan, snapshot, state, writes_ok, writes_failed)
            else:
                self._evict_and_commit(reconciler, plan, snapshot, state, writes_ok, writes_failed)
        except Exception as exc:  # noqa: BLE001 - as above: counted, logged, shown
            self._failed(reconciler, exc, "execute")
            return plan
        if self.metrics is not None and not plan.skipped:
            self.metrics.export(name, dict(reconciler.gauges(plan)))
        return plan

    def with_gates(self, snapshot: QoSSnapshot) -> QoSSnapshot:
        return replace(snapshot, feature_gates=self._gate_map)

    def _verdict(self, reconciler: Reconciler, snapshot: QoSSnapshot) -> Verdict:
        """A reconciler runs when any of its gates is on; which of its modes act is the planner's to read."""
        gates = reconciler.gates
        if not any(self.gates.enabled(g.name) for g in gates):
            if len(gates) == 1:
                return Verdict(False, f"feature gate {gates[0].name} is off ({self.gates.values[gates[0].name].source})")
            return Verdict(False, f"feature gates {', '.join(g.name for g in gates)} are all off")
        return reconciler.enabled(snapshot)

    def _failed(self, reconciler: Reconciler, exc: BaseException, phase: str) -> None:
        status = self.status_of[reconciler.name]
        status.errors += 1
        status.last_error = f"{phase}: {type(exc).__name__}: {exc}"
        status.last_error_at = self._clock()
        if self.metrics is not None:
            self.metrics.rounds.labels(reconciler.name, "error").inc()
        if self._logged_errors.get(reconciler.name) != status.last_error:
            self._logged_errors[reconciler.name] = status.last_error
            self._last_recorded.pop(reconciler.name, None)
            log.error("qos %s failed (%s); the other reconcilers go on", reconciler.name, status.last_error,
                      exc_info=exc)
        self.store.audit.record_plan(PlanRecord(
            ts=status.last_error_at, reconciler=reconciler.name, mode="error", summary="failed",
            error=status.last_error,
        ))

    # -- execution --------------------------------------------------------------------------------
    def _apply_writes(self, plan: QoSPlan, dry: bool) -> tuple[int, int]:
        """cgroup writes through the executor, then node files through the system-file executor, `tc`
        commands through the tc executor, and core-sched cookies through theirs."""
        ok = failed = 0
        if dry:
            return ok, failed
        if plan.writes:
            if self.executor is None:
                raise HookServerError("no resource executor is wired: cannot carry out cgroup writes")
            for resource_plan in plan.writes:
                report = self.executor.apply(resource_plan)
                ok += sum(1 for r in report.results if r.ok)
                failed += len(report.errors)
        steps: tuple[tuple[Sequence[Any], SystemFiles | NetCommands | CookieCarrier | None, str], ...] = (
            (plan.files, self.system_files, "no system-file executor is wired: cannot write sysctls or resctrl"),
            (plan.commands, self.net_commands, "no tc executor is wired: cannot change the network interface"),
            (plan.cookies, self.cookies, "no core-sched executor is wired: cannot set cookies"),
        )
        for items, carrier, missing in steps:
            if not items:
                continue
            if carrier is None:
                raise HookServerError(missing)
            results = carrier.apply(items)
            ok += sum(1 for r in results if r.ok)
            failed += sum(1 for r in results if not r.ok)
        return ok, failed

    def _evict_and_commit(
        self, reconciler: Reconciler, plan: QoSPlan, snapshot: QoSSnapshot, state: Any, writes_ok: int, writes_failed: int
    ) -> None:
        """Evict (on the worker thread when there is anything to evict), then keep the state the outcome
        calls for. A failure here is the reconciler's failure: counted and shown, its state unchanged."""
        dry = self.dry_run(reconciler.name)
        try:
            evicted, released, statuses = self._evict(reconciler, plan, snapshot, dry)
            outcome = RoundOutcome(dry_run=dry, writes_ok=writes_ok, writes_failed=writes_failed, evicted=evicted,
                                   released=released, statuses=statuses)
            new_state = reconciler.commit(plan, outcome, state, snapshot.now)
        except Exception as exc:  # noqa: BLE001 - counted, logged, shown; the other reconcilers go on
            self._failed(reconciler, exc, "evict")
            return
        with self._state_lock:
            self._state[reconciler.name] = new_state
        self.status_of[reconciler.name].last_outcome = outcome

    def _evict(
        self, reconciler: Reconciler, plan: QoSPlan, snapshot: QoSSnapshot, dry: bool
    ) -> tuple[int, float, dict[str, int]]:
        """Evict in plan order until the plan's release target is covered; a refused or failed eviction
        does not count, so the next candidate is tried (koordlet's order of work). A plan with release
        targets (a round across modes) is walked by `qos.evict_round.walk` with the real outcomes."""
        terminating = {p.uid for p in snapshot.pods if p.terminating}
        statuses: dict[str, int] = {}

        def evict_one(item: PlannedEviction) -> bool:
            if dry:
                result = EvictionResult(item.request, EvictionStatus.DRY_RUN, detail="dry run: nothing done")
            else:
                result = self.evictions.evict(item.request, terminating=item.request.pod_uid in terminating)
            statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
            self._record_eviction(reconciler, result)
            return result.done or result.status in (EvictionStatus.DRY_RUN, EvictionStatus.REPORTED)

        if plan.release_targets:
            walked = walk(plan.release_targets, plan.evictions, evict_one)
            picked = walked.picked()
            # in the first goal's unit (the round's goals may count different things: requests, usage)
            first = plan.release_targets[0]
            keys = [f"{first.kind}/{res}" for res in first.resources]
            return len(picked), float(sum(i.releases.get(k, 0.0) for i in picked for k in keys)), statuses
        target = float(plan.numbers.get("release_target", 0) or 0)
        released = 0.0
        evicted = 0
        for item in plan.evictions:
            if target > 0 and released >= target:
                break
            if evict_one(item):
                released += float(item.numbers.get("releases", 0) or 0)
                evicted += 1
        return evicted, released, statuses

    def _record_eviction(self, reconciler: Reconciler, result: EvictionResult) -> None:
        """Audit, count and log one eviction result. A refusal that repeats (a PodDisruptionBudget holding
        the pod round after round) is counted only: the audit and the log get changes of state."""
        r = result.request
        status = result.status.value
        repeated = result.status is EvictionStatus.REFUSED and self._eviction_states.get(r.pod_uid) == status
        self._eviction_states[r.pod_uid] = status
        if len(self._eviction_states) > _EVICTION_STATES_MAX:
            self._eviction_states.pop(next(iter(self._eviction_states)))
        if repeated:
            self.refusals_repeated += 1
            if self.metrics is not None:
                self.metrics.evictions.labels(reconciler.name, r.reason, status).inc()
            log.debug("qos %s: evict %s (%s): still refused: %s", reconciler.name, r.key, r.reason, result.detail)
            return
        self.store.audit.record_eviction(EvictionRecord(
            ts=self._clock(), reconciler=reconciler.name, pod_key=r.key, pod_uid=r.pod_uid, reason=r.reason,
            message=r.message, status=result.status.value, backend=self.evictions.kind if result.status not in (
                EvictionStatus.DRY_RUN,) else "dry_run",
            detail=result.detail, error=result.error,
        ))
        if self.metrics is not None:
            self.metrics.evictions.labels(reconciler.name, r.reason, result.status.value).inc()
            if result.done:
                self.metrics.pod_eviction.inc(self.metrics.node, r.reason)
        level = logging.WARNING if result.status in (EvictionStatus.FAILED,) else logging.INFO
        log.log(level, "qos %s: evict %s (%s): %s: %s%s", reconciler.name, r.key, r.reason, result.status.value,
                result.detail or "-", f" error: {result.error}" if result.error else "")

    def _record_plan(self, plan: QoSPlan, mode: str, duration: float) -> None:
        """Plans that change something are always recorded; a plan that does nothing is recorded when its
        summary differs from the reconciler's last one (a quiet node does not flood the audit)."""
        last = self._last_recorded.get(plan.reconciler)
        if plan.empty and last == (mode, plan.summary):
            return
        self._last_recorded[plan.reconciler] = (mode, plan.summary)
        self.store.audit.record_plan(PlanRecord(
            ts=self._clock(), reconciler=plan.reconciler, mode=mode, summary=plan.summary,
            plan=plan.describe(max_items=AUDIT_PLAN_ITEMS), duration_s=duration,
        ))

    # -- reports ----------------------------------------------------------------------------------
    def state_of(self, name: str) -> Any:
        with self._state_lock:
            return self._state.get(name)

    def report(self) -> dict[str, Any]:
        """`hookctl qos`."""
        now = self._clock()
        recent = self.store.audit.evictions(since=now - _HOUR_S)
        rows = []
        for name, reconciler in self.reconcilers.items():
            st = self.status_of[name]
            gate = self.gates.values[reconciler.gate.name]
            all_gates = [self.gates.values[g.name] for g in reconciler.gates]
            done = [e for e in recent if e.reconciler == name and e.status in ("evicted", "killed")]
            rows.append({
                **reconciler.describe(),
                "gate": {"name": gate.name, "enabled": gate.enabled, "source": gate.source, "default": gate.default},
                "gates": [{"name": g.name, "enabled": g.enabled, "source": g.source, "default": g.default}
                          for g in all_gates],
                "enabled": st.last_verdict.enabled and any(g.enabled for g in all_gates),
                "reason": st.last_verdict.reason,
                "dry_run": self.dry_run(name),
                "last_run": st.last_run or None,
                "last_duration_ms": round(st.last_duration_s * 1000, 3),
                "last_summary": st.last_summary,
                "last_numbers": st.last_plan.get("numbers", {}),
                "last_notes": st.last_plan.get("notes", []),
                "last_error": st.last_error,
                "last_error_at": st.last_error_at or None,
                "rounds": st.rounds,
                "errors": st.errors,
                "evictions_last_hour": len(done),
                "eviction_attempts_last_hour": len([e for e in recent if e.reconciler == name]),
            })
        return {
            "enabled": self.settings.enabled,
            "dry_run": self.settings.dry_run,
            "evictor": self.evictions.kind,
            "eviction_cooldown_s": self.evictions.cooldown_s,
            "eviction_refusals_repeated": self.refusals_repeated,
            "waiting": self.waiting,
            "round_errors": self.round_errors,
            "last_round_error": self.last_round_error,
            "gates": self.gates.describe(),
            "reconcilers": rows,
            # "" when the kubelet's BE tier cgroup is there; else why not (one calm state, not a failed write)
            "be_tier_missing": str(getattr(self.snapshots, "tier_problem", "") or ""),
            # "" when the tier has the cpu and cpuset controllers; else which not and what that leaves unavailable
            "be_tier_controllers": str(getattr(self.snapshots, "controllers_problem", "") or ""),
            "last_evictions": [_eviction_row(e) for e in self.store.audit.evictions(limit=_LAST_EVICTIONS)],
        }

    def replay(self, name: str, snapshot: QoSSnapshot) -> dict[str, Any]:
        """`hookctl qos plan NAME`: plan now on `snapshot`, keep nothing, write and evict nothing."""
        reconciler = self.reconcilers.get(name)
        if reconciler is None:
            known = ", ".join(sorted(self.reconcilers))
            raise InputError(f"unknown reconciler {name!r} (known: {known})", field="name")
        state = self.state_of(name)  # not the round's lock: a replay never waits on a round or an eviction
        gate = self.gates.values[reconciler.gate.name]
        all_gates = [self.gates.values[g.name] for g in reconciler.gates]
        snapshot = self.with_gates(snapshot)
        verdict = reconciler.enabled(snapshot)
        t0 = self._mono()
        plan = reconciler.plan(snapshot, state) if verdict.enabled else reconciler.plan_disabled(snapshot, state, verdict.reason)
        duration = self._mono() - t0
        notes = []
        if not any(g.enabled for g in all_gates):
            names = ", ".join(g.name for g in all_gates)
            notes.append(f"feature gate {names} is off ({gate.source}): the runner would not act on this plan"
                         if len(all_gates) == 1 else f"feature gates {names} are all off: the runner would not act on this plan")
        if self.dry_run(name):
            notes.append("this reconciler runs in dry run: the runner would not act on this plan either")
        self.store.audit.record_plan(PlanRecord(
            ts=self._clock(), reconciler=name, mode="replay", summary=plan.summary,
            plan=plan.describe(max_items=AUDIT_PLAN_ITEMS), duration_s=duration,
        ))
        would_evict = []
        pending_release: list[dict[str, Any]] = []
        if plan.release_targets:
            walked = walk(plan.release_targets, plan.evictions, lambda item: True)
            would_evict = [i.describe() for i in walked.picked()]
            pending_release = [i.describe() for i in walked.pending()]
        else:
            target = float(plan.numbers.get("release_target", 0) or 0)
            covered = 0.0
            for item in plan.evictions:
                if target > 0 and covered >= target:
                    break
                covered += float(item.numbers.get("releases", 0) or 0)
                would_evict.append(item.describe())
        return {
            "reconciler": name,
            "slo_origin": snapshot.slo_origin,
            "gate": {"name": gate.name, "enabled": gate.enabled, "source": gate.source},
            "gates": [{"name": g.name, "enabled": g.enabled, "source": g.source} for g in all_gates],
            "enabled": verdict.enabled,
            "reason": verdict.reason,
            "plan_ms": round(duration * 1000, 3),
            "notes": notes,
            "plan": plan.describe(),
            "would_evict": would_evict,
            "pending_release": pending_release,
        }

