"""The NRI hot path: CreateContainer, UpdateContainer and RunPodSandbox (the dedicated rpc and its StateChange
form) run inline on the event loop.

They run right where the request frame is read, and the reply is queued at once: a hand-off to a worker
thread cost ~0.2 ms, more than the whole hook, and the runtime serialises every plugin call, so every
container start on the node waited for it. The trade-off: code on the loop cannot be pre-empted from
outside, so a hook that runs long makes *that* call late. Fail-open is kept another way:

* every hook run is timed against its budget, and a hook that keeps overrunning (or runs once far over)
  trips its breaker (`hookserver.hooks.breaker`): it is skipped, its part of the answer is "no change",
  the audit says why, and `hookctl nri`/`status` and a metric show it;
* while any hook is suspect (overran lately, or a half-open probe is due), a call returns None here and
  takes the protected path instead (a worker thread under `asyncio.timeout`, `handlers.PluginService`),
  so a probe never runs on the loop;
* the call itself is protected where it can be: each inline call notes its due time (the call's budget,
  half the runtime's request timeout; no system call), and the watchdog thread signals the loop thread
  (SIGALRM) once it is past due, which interrupts a hook still running (`hookserver.hooks.deadline`:
  only a hook, never the bookkeeping around it; main thread only), so the runtime still gets "no change"
  (Ignore) or DEADLINE_EXCEEDED (Fail) inside its deadline, and the hook's breaker trips;
* the same watchdog thread (`watchdog.LoopWatchdog`) reports a call that holds the loop too long (a hook
  stuck in C code cannot be interrupted), with where the loop is, while it happens.

The reply goes out before the call's bookkeeping: the dispatcher leaves an answered call's learning,
audit and metrics in `later`, and the connection calls `after_reply` once the reply is written, so the
runtime (which holds its plugin lock until it has the answer) waits for the hooks, not for the books.
A call's books are always kept before the next call is decided (`after_reply` runs first in each).
RunPodSandbox under Ignore goes further: its answer is empty whatever the hooks decide (NRI has no pod-level
adjustment; the pod's cgroup values are ours to write), so the whole pod dispatch (hooks, learning, the pod
cgroup's writes) comes after the reply. Through containerd/nri's runtime library that was 0.26 ms of every pod
start the runtime waited for (`python -m tests.bench nri_go`, "RunPodSandbox alone"). Under Fail a refusal must
fail the pod start, so there the pod is dispatched before the answer.

The pod of each request is translated once per pod (`translate.PodRequestCache`), a stage whose hooks
all declare `pure_decision` reuses its outcome for the same pod, container name, resources, NodeSLO and node
(`hooks.memo.StageMemo`, one per connection), and the encoded reply is memoized per hook value
(`translate.adjustment_bytes`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from hookserver.api import nri_pb2
from hookserver.dispatch import Deferred, DispatchResult, HookDispatcher, HookRejected
from hookserver.errors import HookServerError
from hookserver.hooks.context import ContainerRequest
from hookserver.hooks.deadline import CallDeadline
from hookserver.hooks.memo import StageMemo
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.stages import Stage
from hookserver.nri.conn import InlineHandler
from hookserver.nri.events import Event
from hookserver.nri.hostmounts import prepare_mounts
from hookserver.nri.status import NriStatus
from hookserver.nri.translate import PodRequestCache, adjustment_bytes, container_request, update_for
from hookserver.nri.ttrpc import Code, StatusError
from hookserver.nri.watchdog import LoopWatchdog

__all__ = ["InlineHotPath", "decode"]

log = logging.getLogger(__name__)

DOOR = "nri"
_M = TypeVar("_M", bound=Message)
# (rpc, pod key, container, result, error, started) -> None: the door's audit + metrics of a call it ends.
Record = Callable[[str, str, str, str, str, float], None]


def decode(request_type: type[_M], method: str, payload: bytes | memoryview) -> _M:
    request: _M = request_type()
    try:
        request.ParseFromString(payload)
    except DecodeError as exc:
        raise StatusError(
            Code.INVALID_ARGUMENT, f"{method}: {request_type.DESCRIPTOR.full_name} does not decode: {exc}"
        ) from exc
    return request


class InlineHotPath:
    """One connection's inline handlers (a fresh one per connection, like the Plugin service)."""

    def __init__(
        self,
        *,
        dispatcher: HookDispatcher,
        status: NriStatus,
        policy: FailurePolicy,
        budget: Callable[[float | None], float],
        record: Record,
        watchdog: LoopWatchdog | None = None,
        deadline: CallDeadline | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._status = status
        self._policy = policy
        self._budget = budget
        self._record = record
        self._watchdog = watchdog
        self._deadline = deadline
        self._pods = PodRequestCache()
        self._later: list[Deferred] = []
        # RunPodSandbox calls answered under Ignore whose pod is still to be dispatched: (rpc, pod, deadline).
        self._pods_later: list[tuple[str, nri_pb2.PodSandbox, float | None]] = []
        self.memo = StageMemo()
        status.memo = self.memo  # `hookctl nri`: decision_memo

    def methods(self) -> dict[str, InlineHandler]:
        return {
            "CreateContainer": self.create_container, "UpdateContainer": self.update_container,
            "RunPodSandbox": self.run_pod_sandbox, "StateChange": self.state_change,
        }

    def run_pod_sandbox(self, payload: bytes, deadline_s: float | None) -> bytes | None:
        """nri v0.12's dedicated RunPodSandbox, inline: the runtime holds the pod's start (and its plugin lock)
        until it has the answer. On a worker thread this cost 0.6 ms a pod start through containerd/nri's own
        runtime library (`make bench-go`), 4x a Go plugin's whole pod start; the hand-off was most of it.

        Under Ignore the answer is empty whatever the hooks decide or the kernel says (NRI has no pod-level
        adjustment: the pod's values are ours to write), so the pod is answered first and dispatched right after
        the reply (`after_reply`), before the next call is read; under Fail a refusal must fail the pod start,
        so the pod is dispatched before the answer."""
        self.after_reply()
        if self._dispatcher.breakers.needs_guard():
            return None
        req = decode(nri_pb2.RunPodSandboxRequest, "RunPodSandbox", payload)
        self._status.calls["RunPodSandbox"] += 1
        self._pod_answered("RunPodSandbox", req.pod, deadline_s)
        return b""  # RunPodSandboxResponse is empty

    def state_change(self, payload: bytes, deadline_s: float | None) -> bytes | None:
        """nri <= v0.11 sends RunPodSandbox as StateChange(event 1): that one inline, as above; every other
        event (bookkeeping) takes the task path."""
        if self._dispatcher.breakers.needs_guard():
            return None
        req = decode(nri_pb2.StateChangeEvent, "StateChange", payload)
        if int(req.event) != Event.RUN_POD_SANDBOX.value or req.HasField("container"):
            return None
        self.after_reply()
        self._status.calls["StateChange"] += 1
        self._pod_answered("StateChange(RunPodSandbox)", req.pod, deadline_s)
        return b""  # Empty

    def _pod_answered(self, rpc: str, pod: nri_pb2.PodSandbox, deadline_s: float | None) -> None:
        """The pod's PreRunPodSandbox: after the reply under Ignore (see `run_pod_sandbox`), now under Fail."""
        if self._policy is FailurePolicy.FAIL:
            self._pod_inline(rpc, pod, deadline_s)
        else:
            self._pods_later.append((rpc, pod, deadline_s))

    def _pod_inline(self, rpc: str, pod: nri_pb2.PodSandbox, deadline_s: float | None) -> None:
        """PreRunPodSandbox here, on the loop, within the call's budget where a hook can be interrupted: the
        pod is learnt and its values written to its cgroup before the answer, as on the task path (a write
        the kernel refuses may refuse the pod under Fail). Raises StatusError for Fail's refusals."""
        preq = self._pods.get(pod)
        watchdog, deadline = self._watchdog, self._deadline
        if watchdog is not None:
            watchdog.enter(rpc, preq.key)
        armed = deadline is not None and deadline.arm(self._budget(deadline_s))
        started = time.perf_counter()
        try:
            self._dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, preq, door=DOOR, rpc=rpc)
        except HookRejected as exc:
            if armed and self._timed_out(rpc, preq.key, "", started):
                raise StatusError(Code.DEADLINE_EXCEEDED, f"{rpc}: {exc}") from exc
            self._status.rejections += 1
            raise StatusError(Code.UNKNOWN, str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - the front-door boundary: policy decides, nothing is lost
            self._error(rpc, preq.key, "", exc, started)
            return
        finally:
            if armed:
                deadline.disarm()  # type: ignore[union-attr]
            if watchdog is not None:
                watchdog.leave()
        if armed:
            self._timed_out(rpc, preq.key, "", started)

    def after_reply(self) -> None:
        """Keep the books of the calls answered since the last time, and dispatch the pods answered under Ignore
        (the connection calls this right after it wrote an inline reply; each call calls it first, for callers
        that do not)."""
        if self._later:
            self._status.errors += self._dispatcher.record_later(self._later)
        if self._pods_later:
            pods, self._pods_later = self._pods_later, []
            for rpc, pod, deadline_s in pods:
                try:
                    self._pod_inline(rpc, pod, deadline_s)
                except StatusError as exc:  # a refusal after the answer (Ignore): logged, nothing left to fail
                    log.warning("nri %s for %s/%s after its answer: %s", rpc, pod.namespace, pod.name, exc)

    def create_container(self, payload: bytes, deadline_s: float | None) -> bytes | None:
        self.after_reply()  # for a caller that did not call it: the last call's books first
        if self._dispatcher.breakers.needs_guard():
            return None  # a hook is suspect: take the protected path (worker + deadline) for now
        self._status.calls["CreateContainer"] += 1
        req = decode(nri_pb2.CreateContainerRequest, "CreateContainer", payload)
        creq = container_request(self._pods.get(req.pod), req.container)
        result = self._inline("CreateContainer", Stage.PRE_CREATE_CONTAINER, creq, deadline_s)
        if result is None:
            return b""  # "no change": an empty CreateContainerResponse
        outcome = result.outcome  # mounts and devices ride on the stage outcome (DispatchResult has envs only)
        if outcome is not None and (outcome.mounts or outcome.devices) and result.result == "ok":
            return adjustment_bytes(result.resources, result.envs, prepare_mounts(outcome.mounts), outcome.devices)
        return adjustment_bytes(result.resources, result.envs)

    def update_container(self, payload: bytes, deadline_s: float | None) -> bytes | None:
        self.after_reply()
        if self._dispatcher.breakers.needs_guard():
            return None
        self._status.calls["UpdateContainer"] += 1
        req = decode(nri_pb2.UpdateContainerRequest, "UpdateContainer", payload)
        wanted = req.linux_resources if req.HasField("linux_resources") else None
        creq = container_request(self._pods.get(req.pod), req.container, wanted)
        result = self._inline("UpdateContainer", Stage.PRE_UPDATE_CONTAINER_RESOURCES, creq, deadline_s)
        if result is None:
            return b""
        try:
            update = update_for(req.container.id, result.resources)
        except HookServerError as exc:
            return self._inline_error("UpdateContainer", creq, exc, time.perf_counter())
        data: bytes = nri_pb2.UpdateContainerResponse(update=[update] if update is not None else []).SerializeToString()
        return data

    def _inline(
        self, rpc: str, stage: Stage, creq: ContainerRequest, deadline_s: float | None
    ) -> DispatchResult | None:
        """Dispatch `creq` here, on the loop, within the call's budget where a hook can be interrupted, and
        apply the failure policy to what goes wrong. (Flat on purpose: no closure, no per-call formatting;
        the pod key is formatted only when something is reported.)"""
        watchdog, deadline = self._watchdog, self._deadline
        if watchdog is not None:
            watchdog.enter(rpc, creq)
        armed = deadline is not None and deadline.arm(self._budget(deadline_s))
        started = time.perf_counter()
        try:
            result = self._dispatcher.dispatch_container(
                stage, creq, door=DOOR, rpc=rpc, later=self._later, memo=self.memo
            )
        except HookRejected as exc:
            if armed and self._timed_out(rpc, creq.pod.key, creq.name, started):
                raise StatusError(Code.DEADLINE_EXCEEDED, f"{rpc}: {exc}") from exc
            self._status.rejections += 1
            raise StatusError(Code.UNKNOWN, str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - the front-door boundary: policy decides, nothing is lost
            self._inline_error(rpc, creq, exc, started)
            return None
        finally:
            if armed:
                deadline.disarm()  # type: ignore[union-attr]
            if watchdog is not None:
                watchdog.leave()
        if armed and self._timed_out(rpc, creq.pod.key, creq.name, started):
            return None  # Ignore: the interrupted hook's part is "no change", and so is the answer
        return result

    def _timed_out(self, rpc: str, pod_key: str, container: str, started: float) -> bool:
        """Whether the deadline interrupted a hook in this call; if so it is counted and audited as a timeout."""
        deadline = self._deadline
        if deadline is None or not deadline.fired:
            return False
        self._status.timeouts += 1
        message = f"a hook was interrupted at the {deadline.seconds * 1000:.0f} ms budget"
        store = self._dispatcher.store
        # The dispatcher already counted the call (as its error); this event says why, for `hookctl`.
        store.audit.add_event(
            store.clock(), DOOR, rpc, pod_key, container, time.perf_counter() - started, "timeout", message
        )
        log.warning("nri %s for %s: %s (%s)", rpc, pod_key or "-", message,
                    "failing" if self._policy is FailurePolicy.FAIL else "answering no change")
        return True

    def _inline_error(self, rpc: str, creq: ContainerRequest, exc: Exception, started: float) -> bytes:
        return self._error(rpc, creq.pod.key, creq.name, exc, started)

    def _error(self, rpc: str, pod_key: str, container: str, exc: Exception, started: float) -> bytes:
        """An internal error: Ignore answers "no change" (b"" is every empty reply), Fail answers INTERNAL."""
        self._status.errors += 1
        self._record(rpc, pod_key, container, "error", f"internal error: {exc}", started)
        log.error("nri %s for %s: internal error: %s", rpc, pod_key or "-", exc, exc_info=True)
        if self._policy is FailurePolicy.FAIL:
            raise StatusError(Code.INTERNAL, f"{rpc}: {exc}") from exc
        return b""
