"""The one stage runner behind every hook front door (proxy gRPC, NRI, reconciler).

A front door translates its wire request into a context and calls `dispatch_pod` or
`dispatch_container`; the reconciler, which writes leveled batches itself, calls `decide_pod` and
`decide_container`. Here, and only here: the skip label is honoured, the failure policy is applied,
the store learns the pod/container (`learning.py`), pod-level values are written to the pod cgroup (neither
the proxy nor NRI carries them), and every decision, call and write is audited and counted (`books.py`). A failed hook
never leaves a partial set of values: the result is all of them or none.

Hooks run on the caller's thread (no hand-off: it costs more than the hook). Each hook is timed against
its budget by `breakers` (`hookserver.hooks.breaker`): a hook that keeps overrunning is skipped, answered
"no change" for that hook, and shown in the audit, the metrics and `hookctl`. Hooks read a typed
`NodeView` of the store (`hookserver.view`), taken once per call before the call's own bookkeeping
writes, so a new container never forces the store to rebuild its snapshot on the hot path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from hookserver.dispatch.books import CallBooks
from hookserver.dispatch.learning import StoreLearner
from hookserver.dispatch.result import Deferred, DispatchResult, HookRejected, HostAppDecision
from hookserver.errors import ExecutorError
from hookserver.executor.layout import CgroupLayout
from hookserver.executor.plan import ApplyReport, ResourceExecutor, ResourcePlan, pod_level_writes
from hookserver.hooks.breaker import BreakerSettings, BreakerState, HookBreakers
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.memo import StageMemo
from hookserver.hooks.outcome import FailurePolicy, HookResult, StageOutcome
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.runner import run_stage
from hookserver.hooks.stages import Stage
from hookserver.observability.metrics import HookMetrics
from hookserver.store.state import StateStore, StoreSnapshot
from hookserver.system.cgroupnames import normalize_cgroup_dir
from hookserver.view import GpuSource, NodeView, NodeViews

__all__ = ["Deferred", "DispatchResult", "HookDispatcher", "HookRejected"]

log = logging.getLogger("hookserver.dispatch")


class HookDispatcher:
    def __init__(
        self,
        *,
        registry: HookRegistry,
        store: StateStore,
        executor: ResourceExecutor | None,
        policy: FailurePolicy = FailurePolicy.IGNORE,
        metrics: HookMetrics | None = None,
        perf_clock: Callable[[], float] = time.perf_counter,
        breakers: HookBreakers | None = None,
        breaker_settings: BreakerSettings | None = None,
        gpus: GpuSource | None = None,
    ) -> None:
        """`gpus`: the node's GPU inventory for the hooks' view (GPUEnvInject checks allocations against it)."""
        self.registry = registry
        self.store = store
        self.executor = executor
        self.policy = policy
        self.metrics = metrics
        self._perf = perf_clock
        self._views = NodeViews(gpus)
        self.breakers = (
            breakers if breakers is not None else HookBreakers(breaker_settings, on_change=self._breaker_changed)
        )
        self.learner = StoreLearner(store)
        self.books = CallBooks(store, self.learner, metrics=metrics, perf_clock=perf_clock)
        # Bound once: the hot path calls these per container, without a second attribute lookup.
        self._fill_pod_gaps = self.learner.fill_pod_gaps
        self._learn_pod = self.learner.learn_pod
        self._learn_container = self.learner.learn_container
        self._finish = self.books.finish

    def view(self) -> NodeView:
        """The hooks' view of the store as it is now."""
        return self._views.of(self.store.snapshot())

    def breaker_status(self) -> dict[str, Any]:
        return self.breakers.status()

    def _breaker_changed(self, plugin: str, stage: Stage, state: BreakerState, why: str) -> None:
        if self.metrics is not None:
            self.metrics.observe_breaker(plugin, stage.value, state.value)

    # -- pods ------------------------------------------------------------------------------------
    def dispatch_pod(self, stage: Stage, request: PodRequest, *, door: str, rpc: str) -> DispatchResult:
        started = self._perf()
        self._learn_pod(stage, request)
        request = self._fill_pod_gaps(request)
        if request.skips_hooks():
            return self._finish(DispatchResult(stage, result="skipped"), door, rpc, request.key, "", started)
        outcome = run_stage(
            self.registry, stage, request, self.view(), stop_on_error=self.policy is FailurePolicy.FAIL,
            breakers=self.breakers,
        )
        self.store.audit.add_decisions(
            self.store.clock(), door, stage.value, request.key, request.uid, "", outcome.outcomes
        )
        if outcome.failed:
            return self._fail(stage, outcome, door, rpc, request.key, "", started)
        report: ApplyReport | None = None
        if stage is Stage.PRE_RUN_POD_SANDBOX and not outcome.resources.is_empty():
            try:
                report = self._write_pod(request, outcome)
            except ExecutorError as exc:
                return self._fail_error(
                    stage, f"pod cgroup {request.cgroup_parent!r}: {exc}", "cgroup_parent", door, rpc,
                    request.key, "", started, outcome,
                )
        result = DispatchResult(
            stage, resources=outcome.resources, envs=outcome.envs, outcome=outcome, pod_writes=report
        )
        if report is not None and not report.ok:
            # Each file reports separately; a kernel refusal is audited and counted, never raised.
            result = DispatchResult(
                stage, resources=outcome.resources, envs=outcome.envs, outcome=outcome, pod_writes=report,
                result="error", error="; ".join(f"{r.path}={r.value}: {r.error}" for r in report.errors),
            )
        return self._finish(result, door, rpc, request.key, "", started)

    # -- containers ------------------------------------------------------------------------------
    def dispatch_container(
        self, stage: Stage, request: ContainerRequest, *, door: str, rpc: str, later: list[Deferred] | None = None,
        memo: StageMemo | None = None,
    ) -> DispatchResult:
        """Run the stage's hooks for one container and do the call's bookkeeping (learn, audit, count).

        `later`: for a caller that can answer before it keeps books (the NRI hot path writes its reply
        first): an "ok" call's bookkeeping is appended there instead, and `record_later(later)` does it,
        exactly as it would have been done here, before the caller's next call. The hooks never see the
        call's own bookkeeping either way (they read a snapshot taken before it). Skips and failures keep
        their books at once.

        `memo` (only with `later`, one caller thread): a stage whose hooks all declare `pure_decision`
        reuses the outcome of the same pod, container name, resources, NodeSLO and node (`hooks.memo`).
        A reused outcome is audited like a run one (its decisions are the run's that made them); the
        breakers and the plugin-duration metrics see only real runs."""
        started = self._perf()
        # One snapshot for the whole call: pods, node and NodeSLO current, containers not copied (see the module doc).
        snap = self.store.pods_snapshot()
        learnt = request  # the store learns the container as the door sent it, gaps unfilled
        filled = self._fill_pod_gaps(request.pod, snap)
        if filled is not request.pod:
            request = replace(request, pod=filled, cgroup_parent=request.cgroup_parent or filled.cgroup_parent)
        pod = request.pod
        pod_key = pod.key
        if pod.skips_hooks():
            self._learn_container(stage, learnt, snap)
            return self._finish(DispatchResult(stage, result="skipped"), door, rpc, pod_key, request.name, started)
        view = self._views.of(snap)
        reused: StageOutcome | None = None
        handlers = None
        if memo is not None and later is not None and self.registry.memoizable(stage):
            handlers = self.registry.handlers(stage)
            reused = memo.get(stage, handlers, request, view)
        if reused is None:
            outcome = run_stage(
                self.registry, stage, request, view, stop_on_error=self.policy is FailurePolicy.FAIL,
                breakers=self.breakers,
            )
            if memo is not None and handlers is not None and not self.breakers.needs_guard():
                memo.put(stage, handlers, request, view, outcome)  # no breaker suspect: no skip in this outcome
        else:
            outcome = reused
        # (stage, resources, envs, result, error, outcome), positional: the hot path's cheapest call
        result = DispatchResult(stage, outcome.resources, outcome.envs, "ok", "", outcome)
        if later is not None and not outcome.failed:
            later.append((learnt, snap, door, rpc, result, self._perf() - started, reused is None))
            return result
        self._learn_container(stage, learnt, snap)
        self.store.audit.add_decisions(
            self.store.clock(), door, stage.wire, pod_key, pod.uid, request.name, outcome.outcomes
        )
        if outcome.failed:
            return self._fail(stage, outcome, door, rpc, pod_key, request.name, started)
        return self._finish(result, door, rpc, pod_key, request.name, started)

    def record_later(self, later: list[Deferred]) -> int:
        """Do the bookkeeping `dispatch_container` left in `later`, in call order, and empty it
        (`CallBooks.record_later`); returns how many records failed."""
        return self.books.record_later(later)

    # -- decisions only (the reconciler) ----------------------------------------------------------
    def decide_pod(self, stage: Stage, request: PodRequest, snapshot: StoreSnapshot) -> DispatchResult:
        """The values the hooks want for a running pod: the same skip label, gap filling, hooks and
        all-or-none rule as `dispatch_pod`, but nothing is learnt, written or audited. The reconciler
        writes the values itself (leveled, through the cache) and audits with `record_decisions` only
        what changed, so a pass over an unchanged node leaves the audit alone. The hooks read the same
        typed view of `snapshot` as on the hot path; the breakers are not consulted (the pass runs on a
        worker thread, off the runtime's deadline, and its timings must not trip the hot path's breakers)."""
        request = self._fill_pod_gaps(request, snapshot)
        if request.skips_hooks():
            return DispatchResult(stage, result="skipped")
        return self._decided(
            stage, run_stage(self.registry, stage, request, self._views.of(snapshot), stop_on_error=True)
        )

    def decide_container(self, stage: Stage, request: ContainerRequest, snapshot: StoreSnapshot) -> DispatchResult:
        """`decide_pod` for one container of a running pod."""
        outcome = self.container_decider(stage, snapshot)(request)
        return DispatchResult(stage, result="skipped") if outcome is None else self._decided(stage, outcome)

    def container_decider(
        self, stage: Stage, snapshot: StoreSnapshot
    ) -> Callable[[ContainerRequest], StageOutcome | None]:
        """`decide_container` on one snapshot for many containers, one after another (an NRI Synchronize decides a
        node's worth), returning the stage outcome, or None for a pod with the skip label; `failed(stage, outcome)`
        is what a failed one means. The hooks' view is taken once, and a pod's gap filling and skip label are
        looked at once for its containers, which come one after another: with the result records, 2 of the 7 µs
        a container took at 500 pods. One decider per thread."""
        view = self._views.of(snapshot)
        registry = self.registry
        # The pod of the last container (as the door sent it), that pod with its gaps filled, and whether it skips.
        last: list[Any] = [None, None, False]

        def decide(request: ContainerRequest) -> StageOutcome | None:
            pod = request.pod
            if pod is not last[0]:
                filled = self._fill_pod_gaps(pod, snapshot)  # from the same snapshot as the hooks read
                last[0], last[1], last[2] = pod, filled, filled.skips_hooks()
            if last[2]:
                return None
            filled = last[1]
            if filled is not pod:
                request = replace(request, pod=filled, cgroup_parent=request.cgroup_parent or filled.cgroup_parent)
            return run_stage(registry, stage, request, view, stop_on_error=True)

        return decide

    def failed(self, stage: Stage, outcome: StageOutcome) -> str:
        """A failed decision's error (`DispatchResult.error`), counted in the plugin metrics as `decide_*` does."""
        result = self._decided(stage, outcome)
        return result.error

    # -- a whole node at once (NRI Synchronize) ---------------------------------------------------
    def learn_synced(self, pods: Sequence[PodRequest], containers: Sequence[ContainerRequest]) -> StoreSnapshot:
        """Learn every pod and container of a sync, then take one snapshot for all its decisions
        (`StoreLearner.learn_synced`)."""
        return self.learner.learn_synced(pods, containers)

    def settle_pod(self, request: PodRequest, snapshot: StoreSnapshot, *, door: str, rpc: str) -> DispatchResult:
        """PreRunPodSandbox's pod-level values for a running pod, decided on `snapshot` and written to its
        cgroup: `dispatch_pod` without the learning (`learn_synced` did it) or the per-call event. Under
        Fail a rejection raises `HookRejected` like `dispatch_pod`; a failed write is a result, not a raise."""
        stage = Stage.PRE_RUN_POD_SANDBOX
        decided = self.decide_pod(stage, request, snapshot)
        outcome = decided.outcome
        if outcome is None:
            return decided  # skipped
        self.record_decisions(door, outcome, request)
        if decided.result != "ok":
            if self.policy is FailurePolicy.FAIL:
                raise HookRejected(decided.error)
            return decided
        if outcome.resources.is_empty():
            return decided
        try:
            report = self._write_pod(request, outcome)
        except ExecutorError as exc:
            return replace(decided, result="error", error=f"pod cgroup {request.cgroup_parent!r}: {exc}")
        if report is not None and not report.ok:
            return replace(
                decided, pod_writes=report, result="error",
                error="; ".join(f"{r.path}={r.value}: {r.error}" for r in report.errors),
            )
        return replace(decided, pod_writes=report)

    def decide_host_apps(self, snapshot: StoreSnapshot) -> list[HostAppDecision]:
        """What the plugins that handle host applications want for each of the NodeSLO's `hostApplications`, on
        `snapshot`'s view (koordlet's host-app reconciler). Nothing is written or audited here: the reconciler
        writes through its cache. A plugin's exception is a not-applied `error:` result, never a raise."""
        handlers = self.registry.host_app_handlers()
        view = self._views.of(snapshot)
        apps = view.node_slo.host_applications
        if not handlers or not apps:
            return []
        out: list[HostAppDecision] = []
        for app in apps:
            for name, handler in handlers:
                try:
                    result = handler(app, view)
                except Exception as exc:  # noqa: BLE001 - a plugin's failure becomes a value, as in run_stage
                    log.warning("hook %s failed for host application %s: %s", name, app.name, exc)
                    result = HookResult(applied=False, reason=f"error: {type(exc).__name__}: {exc}")
                out.append(HostAppDecision(app, name, result))
        return out

    def record_decisions(self, door: str, outcome: StageOutcome, pod: PodRequest, container: str = "") -> None:
        """Audit each plugin's decision for `pod` (and `container`) as coming from `door`."""
        self.books.record_decisions(door, outcome, pod, container)

    def _decided(self, stage: Stage, outcome: StageOutcome) -> DispatchResult:
        if outcome.failed:
            first = outcome.first_error
            assert first is not None
            if self.metrics is not None:
                self.metrics.observe_plugin(first.plugin, stage.value, first.duration_s, first.error_type)
            return DispatchResult(
                stage, result="error", error=f"hook {first.plugin} failed: {first.error}", outcome=outcome
            )
        # (stage, resources, envs, result, error, outcome), positional: the cheapest call (a sync makes thousands)
        return DispatchResult(stage, outcome.resources, outcome.envs, "ok", "", outcome)

    # -- internals -------------------------------------------------------------------------------
    def _write_pod(self, request: PodRequest, outcome: StageOutcome) -> ApplyReport | None:
        if self.executor is None or not request.cgroup_parent:
            return None
        owners = ",".join(o.plugin for o in outcome.outcomes if o.result is not None and o.result.applied)
        reason = " | ".join(o.result.reason for o in outcome.outcomes if o.result is not None and o.result.applied)
        sandbox_dir = self._sandbox_dir(request) if outcome.resources.cpuset_cpus else ""
        writes = pod_level_writes(
            request.cgroup_parent, outcome.resources, sandbox_dir=sandbox_dir, owner=owners, reason=reason
        )
        if not writes:
            return None
        report = self.executor.apply(ResourcePlan.single(writes))
        if sandbox_dir and not report.ok:
            # A sandbox whose cgroup is gone (a Synchronize lists stopped sandboxes too) or not made yet is no
            # error of this call: the reconciler pins it once it is there. The executor audited the attempt.
            report = ApplyReport(tuple(r for r in report.results if not (
                r.write.cgroup_dir == sandbox_dir and r.gone)))
        return report

    def _sandbox_dir(self, request: PodRequest) -> str:
        """The sandbox container's cgroup where a door can name it (NRI; the proxy's PreRunPodSandbox comes before
        the runtime makes the sandbox): the cgroup the runtime says it made (containerd's sandbox `cgroups_path`),
        else the sandbox ID under the pod's parent by the node's naming. Raises PathEscapeError for a name that is
        not a safe path."""
        if request.sandbox_cgroup:
            return normalize_cgroup_dir(request.sandbox_cgroup)
        layout = getattr(self.executor, "layout", None)
        if not request.sandbox_id or not isinstance(layout, CgroupLayout):
            return ""
        return layout.sandbox_dir(request.cgroup_parent, request.sandbox_id)

    def _fail(
        self, stage: Stage, outcome: StageOutcome, door: str, rpc: str, pod_key: str, container: str, started: float
    ) -> DispatchResult:
        first = outcome.first_error
        assert first is not None
        return self._fail_error(
            stage, f"hook {first.plugin} failed: {first.error}", first.error_field, door, rpc, pod_key,
            container, started, outcome,
        )

    def _fail_error(
        self, stage: Stage, message: str, field_name: str, door: str, rpc: str, pod_key: str, container: str,
        started: float, outcome: StageOutcome | None,
    ) -> DispatchResult:
        if self.policy is FailurePolicy.FAIL:
            self._finish(DispatchResult(stage, result="rejected", error=message), door, rpc, pod_key, container, started)
            raise HookRejected(message, field=field_name)
        log.warning("%s %s for %s: %s (policy Ignore: request passes unchanged)", door, rpc, pod_key, message)
        return self._finish(
            DispatchResult(stage, result="error", error=message, outcome=outcome), door, rpc, pod_key, container,
            started,
        )

