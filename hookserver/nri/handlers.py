"""The Plugin service we serve on mux conn 1: NRI requests in, hook dispatches, NRI replies out.

There is no hook logic here: each event becomes a `PodRequest`/`ContainerRequest` and goes through
`HookDispatcher`, exactly as the proxy's requests do. What lives here is the NRI contract:

* The hot path runs inline: CreateContainer, UpdateContainer and RunPodSandbox run on the event loop where the frame
  is read, with fail-open kept by per-hook breakers, a call deadline and a loop watchdog (`hotpath`).
* Every other answer comes inside the runtime's deadline: the rest of the events (and the hot path
  while a hook is suspect) run in a worker thread under `asyncio.timeout(budget)`, budget = half the
  request timeout from Configure (or the call's own deadline if tighter).
* Failure policy, applied once here: under Ignore a timeout or an internal error answers "no
  change" and is recorded (audit event, metrics, status). Under Fail a hook rejection answers
  status UNKNOWN (the runtime then fails the operation), a timeout DEADLINE_EXCEEDED and an
  internal error INTERNAL. Synchronize and the stop/remove bookkeeping never fail.
* Split Synchronize: chunks with `more` are gathered and answered `more=true` with no updates; the
  last chunk is answered with updates for the whole set (`sync.SyncWork`), or, when the budget runs
  out first, with the updates decided so far, the rest handed to the reconciler at once (`catch_up`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message

from hookserver.aio.hotgate import GATE, Door
from hookserver.api import nri_pb2
from hookserver.dispatch import HookDispatcher, HookRejected
from hookserver.hooks.deadline import CallDeadline
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage
from hookserver.nri.conn import Handler, InlineHandler
from hookserver.nri.events import EVENT_STAGES, Event, mask_words, subscription_mask, valid_mask_for
from hookserver.nri.status import NriStatus
from hookserver.nri.sync import CatchUp, SyncProgress, SyncWork
from hookserver.nri.hostmounts import prepare_mounts
from hookserver.nri.hotpath import InlineHotPath, decode
from hookserver.nri.translate import adjustment_for, container_request, pod_request, update_for
from hookserver.nri.ttrpc import Code, StatusError
from hookserver.nri.watchdog import LoopWatchdog

__all__ = ["BUDGET_FRACTION", "DEFAULT_REQUEST_TIMEOUT_S", "DOOR", "PLUGIN_SERVICE", "RUNTIME_SERVICE", "PluginService"]

log = logging.getLogger(__name__)

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"
DOOR = "nri"
DEFAULT_REQUEST_TIMEOUT_S = 2.0
BUDGET_FRACTION = 0.5
# After a Synchronize's budget, how long to let the worker reach its next item boundary (one item is ~0.1 ms).
_SYNC_STOP_GRACE_S = 0.02

_M = TypeVar("_M", bound=Message)
_T = TypeVar("_T")

_POD_RPCS: dict[Event, tuple[Any, Any]] = {
    Event.RUN_POD_SANDBOX: (nri_pb2.RunPodSandboxRequest, nri_pb2.RunPodSandboxResponse),
    Event.STOP_POD_SANDBOX: (nri_pb2.StopPodSandboxRequest, nri_pb2.StopPodSandboxResponse),
    Event.REMOVE_POD_SANDBOX: (nri_pb2.RemovePodSandboxRequest, nri_pb2.RemovePodSandboxResponse),
    Event.POST_UPDATE_POD_SANDBOX: (nri_pb2.PostUpdatePodSandboxRequest, nri_pb2.PostUpdatePodSandboxResponse),
}
_CONTAINER_RPCS: dict[Event, tuple[Any, Any]] = {
    Event.POST_CREATE_CONTAINER: (nri_pb2.PostCreateContainerRequest, nri_pb2.PostCreateContainerResponse),
    Event.START_CONTAINER: (nri_pb2.StartContainerRequest, nri_pb2.StartContainerResponse),
    Event.POST_START_CONTAINER: (nri_pb2.PostStartContainerRequest, nri_pb2.PostStartContainerResponse),
    Event.POST_UPDATE_CONTAINER: (nri_pb2.PostUpdateContainerRequest, nri_pb2.PostUpdateContainerResponse),
    Event.REMOVE_CONTAINER: (nri_pb2.RemoveContainerRequest, nri_pb2.RemoveContainerResponse),
}


@dataclass(slots=True)
class _SyncRun:
    """One Synchronize in progress: its worker's work, the futures the loop waits on, and its hot-gate door."""

    work: SyncWork
    answered: asyncio.Future[None]  # the updates are decided (set from the worker)
    done: asyncio.Future[Any]  # the worker has returned (after the pod values), or raised
    door: Door


def _settle(answered: asyncio.Future[None]) -> None:
    if not answered.done():
        answered.set_result(None)


def _log_sync_failure(done: asyncio.Future[Any]) -> None:
    """A Synchronize worker that raised (after its reply, too): logged here, where it is seen."""
    if not done.cancelled() and done.exception() is not None:
        log.error("nri Synchronize: the worker failed: %s", done.exception(), exc_info=done.exception())


class PluginService:
    """One connection's Plugin service. A fresh one per connection, so sync state never leaks."""

    def __init__(
        self,
        *,
        dispatcher: HookDispatcher,
        registry: HookRegistry,
        policy: FailurePolicy,
        status: NriStatus,
        pool: Executor,
        clock: Callable[[], float] = time.time,
        watchdog: LoopWatchdog | None = None,
        deadline: CallDeadline | None = None,
        catch_up: CatchUp | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._catch_up = catch_up
        self._registry = registry
        self._policy = policy
        self._status = status
        self._pool = pool
        self._clock = clock
        self._request_timeout_s = DEFAULT_REQUEST_TIMEOUT_S
        self._sync_pods: list[nri_pb2.PodSandbox] = []
        self._sync_containers: list[nri_pb2.Container] = []
        self._sync_chunks = 0
        self._sync: _SyncRun | None = None  # a split sync between its first and last chunk
        # Entered and left on the event loop's thread only (the Synchronize coroutine), like the mux's "nri" door.
        self._sync_door = GATE.door("nri-sync", threadsafe=False)
        self.configured = asyncio.Event()
        self.synchronized = asyncio.Event()
        self._hot = InlineHotPath(
            dispatcher=dispatcher, status=status, policy=policy, budget=self.budget, record=self._record,
            watchdog=watchdog, deadline=deadline,
        )

    def methods(self) -> dict[str, Handler]:
        """Method name -> wire handler. Methods not listed (UpdatePodSandbox, ValidateContainerAdjustment:
        never subscribed, no StateChange fallback) are answered UNIMPLEMENTED by the server."""
        w = self._wire
        table: dict[str, Handler] = {
            "Configure": w("Configure", nri_pb2.ConfigureRequest, self.configure),
            "Synchronize": w("Synchronize", nri_pb2.SynchronizeRequest, self.synchronize),
            "Shutdown": w("Shutdown", nri_pb2.Empty, self.shutdown),
            "CreateContainer": w("CreateContainer", nri_pb2.CreateContainerRequest, self.create_container),
            "UpdateContainer": w("UpdateContainer", nri_pb2.UpdateContainerRequest, self.update_container),
            "StopContainer": w("StopContainer", nri_pb2.StopContainerRequest, self.stop_container),
            "StateChange": w("StateChange", nri_pb2.StateChangeEvent, self.state_change),
        }
        # The dedicated per-event rpcs of nri v0.12 take the same path as their StateChange form.
        for event, (request_type, reply_type) in _POD_RPCS.items():
            table[event.word] = w(event.word, request_type, self._pod_rpc(event, reply_type))
        for event, (request_type, reply_type) in _CONTAINER_RPCS.items():
            table[event.word] = w(event.word, request_type, self._ctr_rpc(event, reply_type))
        return table

    def inline_methods(self) -> dict[str, InlineHandler]:
        """The hot path: run on the loop where the frame is read (`hotpath.InlineHotPath`)."""
        return self._hot.methods()

    def after_inline_reply(self) -> None:
        """The hot path's bookkeeping, once its reply is written (`TtrpcServer(after_inline=...)`)."""
        self._hot.after_reply()

    # -- configure and synchronize ---------------------------------------------------------------
    async def configure(self, req: nri_pb2.ConfigureRequest, budget: float) -> nri_pb2.ConfigureResponse:
        st = self._status
        st.runtime_name, st.runtime_version, st.nri_version = req.runtime_name, req.runtime_version, req.NRI_version
        st.registration_timeout_ms, st.request_timeout_ms = req.registration_timeout, req.request_timeout
        if req.request_timeout > 0:
            self._request_timeout_s = req.request_timeout / 1000
        valid = valid_mask_for(req.runtime_name, req.runtime_version, req.NRI_version)
        mask = subscription_mask(self._registry.stages(), valid)
        if mask == 0:  # 0 would subscribe us to everything: refuse rather than return it
            raise StatusError(Code.FAILED_PRECONDITION, "no event to subscribe to")
        st.event_mask, st.valid_mask = mask, valid
        if req.config:
            log.info("nri: ignoring the %d-byte plugin config the runtime passed", len(req.config))
        log.info(
            "nri: configured by %s %s (nri %s, request timeout %s ms): subscribing to %s (mask %#x)",
            req.runtime_name or "?", req.runtime_version or "?", req.NRI_version or "unknown",
            req.request_timeout or "default", ", ".join(mask_words(mask)), mask,
        )
        self.configured.set()
        return nri_pb2.ConfigureResponse(events=mask)

    async def synchronize(self, req: nri_pb2.SynchronizeRequest, budget: float) -> nri_pb2.SynchronizeResponse | bytes:
        loop = asyncio.get_running_loop()
        sync = self._sync
        if sync is None:
            sync = self._sync = self._start_sync(loop)
        self._sync_pods.extend(req.pods)
        self._sync_containers.extend(req.containers)
        self._sync_chunks += 1
        sync.work.add(req.pods, req.containers, last=not req.more)  # decided while the runtime sends the next
        if req.more:
            return nri_pb2.SynchronizeResponse(more=True)
        self._sync = None
        pods, containers = self._sync_pods, self._sync_containers
        self._sync_pods, self._sync_containers = [], []
        log.debug("nri Synchronize: last of %d chunk(s) in, %d pods, %d containers", self._sync_chunks, len(pods), len(containers))
        started = time.perf_counter()
        try:
            return await self._answer_sync(sync, pods, containers, started, budget)
        finally:
            loop.call_soon(sync.door.leave)  # once the reply is handed to the socket, as `reply_sent` below

    def _start_sync(self, loop: asyncio.AbstractEventLoop) -> _SyncRun:
        """The worker for a sync whose first chunk just came; it takes each chunk as it comes."""
        answered: asyncio.Future[None] = loop.create_future()

        def answer() -> None:  # on the worker: the updates are decided (the pod values come after)
            loop.call_soon_threadsafe(_settle, answered)

        # The runtime's one deadline covers every chunk: a chunk that has not come after it never will.
        work = SyncWork(self._dispatcher, chunk_wait_s=self._request_timeout_s + 1.0)
        done: asyncio.Future[Any] = loop.run_in_executor(self._pool, work.run, answer)
        done.add_done_callback(_log_sync_failure)
        self._status.sync_progress = work.progress
        # The runtime waits for this answer holding its plugin lock (a restarted containerd creates nothing
        # until it comes): a door call like CreateContainer, from the first chunk to the answer, so background
        # threads step aside at the hot gate and the GC pacer waits while the worker decides (their own bounds
        # still hold: `max_defer_s`).
        door = self._sync_door
        door.enter()
        return _SyncRun(work, answered, done, door)

    def close(self) -> None:
        """The connection is gone: a sync still waiting for chunks is dropped and its door left."""
        sync, self._sync = self._sync, None
        if sync is not None:
            sync.work.abandon()
            sync.door.leave()

    async def _answer_sync(
        self, sync: _SyncRun, pods: list[nri_pb2.PodSandbox], containers: list[nri_pb2.Container], started: float,
        budget: float,
    ) -> bytes:
        work, done = sync.work, sync.done
        either: set[asyncio.Future[Any]] = {sync.answered, done}
        error = ""
        try:
            async with asyncio.timeout(budget):
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            work.stop.set()  # the worker ends at its next container; wait that long, not for the rest
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_SYNC_STOP_GRACE_S):
                    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if done.done() and not done.cancelled() and done.exception() is not None:
            error = f"internal error: {done.exception()}"
        progress = work.progress
        pending = progress.pending(pods, containers)  # before the copy (see `pending`)
        updates = list(progress.updates)
        self._sync_finished(progress, updates, pending, pods, len(containers), started, error, budget * 1000)
        asyncio.get_running_loop().call_soon(work.reply_sent.set)  # once this task has handed the reply on
        return b"".join(updates)  # SynchronizeResponse{update: ...}, more=false (the default, not encoded)

    def _sync_finished(
        self, progress: SyncProgress, updates: list[bytes], pending: set[str], pods: list[nri_pb2.PodSandbox],
        containers: int, started: float, error: str, budget_ms: float,
    ) -> None:
        """Status, audit, metric and the hand-over of what is left to the reconciler."""
        st = self._status
        st.sync_pods, st.sync_containers, st.sync_updates = len(pods), containers, len(updates)
        st.sync_chunks, self._sync_chunks = self._sync_chunks, 0
        st.errors += progress.skipped
        st.rejections += progress.rejected
        st.sync_ms = round((time.perf_counter() - started) * 1000, 1)
        complete = progress.answered and not pending
        st.sync_complete = complete
        st.sync_pending_pods = len(pending)
        if complete:
            log.info("nri: synchronized %d pods, %d containers; %d updates in %.1f ms (%.1f ms deciding them)",
                     len(pods), containers, len(updates), st.sync_ms, progress.answer_s * 1000)
            self._record("Synchronize", "", "", "ok", error, started)
            self.synchronized.set()
            return
        st.sync_partial += 1
        metrics = self._dispatcher.metrics
        if metrics is not None:
            metrics.observe_sync_partial()
        handed = self._catch_up is not None and bool(pending)
        message = (
            f"{progress.decided} of {progress.wanted or containers} containers decided within the "
            f"{budget_ms:.0f} ms budget ({len(updates)} updates answered); {len(pending)} pods "
            + ("handed to the reconciler now" if handed else "left to the next reconciler pass (none is running)")
        )
        st.last_sync_partial = message
        log.warning("nri Synchronize: %s", message)
        self._record("Synchronize", "", "", "partial", error or message, started)
        if handed:
            assert self._catch_up is not None
            self._catch_up(pending, "nri-sync")
        self.synchronized.set()

    async def shutdown(self, req: nri_pb2.Empty, budget: float) -> nri_pb2.Empty:
        log.info("nri: the runtime asked the plugin to shut down; it will reconnect")
        return nri_pb2.Empty()

    # -- container events ------------------------------------------------------------------------
    async def create_container(
        self, req: nri_pb2.CreateContainerRequest, budget: float
    ) -> nri_pb2.CreateContainerResponse:
        creq = container_request(pod_request(req.pod), req.container)

        def work() -> nri_pb2.CreateContainerResponse:
            result = self._dispatcher.dispatch_container(
                Stage.PRE_CREATE_CONTAINER, creq, door=DOOR, rpc="CreateContainer"
            )
            outcome = result.outcome
            if outcome is None or (not outcome.mounts and not outcome.devices) or result.result != "ok":
                return adjustment_for(result.resources, result.envs)
            return adjustment_for(result.resources, result.envs, prepare_mounts(outcome.mounts), outcome.devices)

        reply = await self._guarded("CreateContainer", creq.pod.key, creq.name, work, budget)
        return reply if reply is not None else nri_pb2.CreateContainerResponse()

    async def update_container(
        self, req: nri_pb2.UpdateContainerRequest, budget: float
    ) -> nri_pb2.UpdateContainerResponse:
        wanted = req.linux_resources if req.HasField("linux_resources") else None
        creq = container_request(pod_request(req.pod), req.container, wanted)

        def work() -> nri_pb2.UpdateContainerResponse:
            result = self._dispatcher.dispatch_container(
                Stage.PRE_UPDATE_CONTAINER_RESOURCES, creq, door=DOOR, rpc="UpdateContainer"
            )
            update = update_for(req.container.id, result.resources)
            return nri_pb2.UpdateContainerResponse(update=[update] if update is not None else [])

        reply = await self._guarded("UpdateContainer", creq.pod.key, creq.name, work, budget)
        return reply if reply is not None else nri_pb2.UpdateContainerResponse()

    async def stop_container(self, req: nri_pb2.StopContainerRequest, budget: float) -> nri_pb2.StopContainerResponse:
        await self._container_event(Event.STOP_CONTAINER, req.pod, req.container, "StopContainer", budget)
        return nri_pb2.StopContainerResponse()

    async def state_change(self, req: nri_pb2.StateChangeEvent, budget: float) -> nri_pb2.Empty:
        try:
            event = Event(req.event)
        except ValueError:
            log.debug("nri: StateChange with unknown event %d ignored", req.event)
            return nri_pb2.Empty()
        rpc = f"StateChange({event.word})"
        if req.HasField("container"):
            await self._container_event(event, req.pod, req.container, rpc, budget)
        else:
            await self._pod_event(event, req.pod, rpc, budget)
        return nri_pb2.Empty()

    def _pod_rpc(self, event: Event, reply: type[_M]) -> Callable[[Any, float], Awaitable[_M]]:
        async def handle(req: Any, budget: float) -> _M:
            await self._pod_event(event, req.pod, event.word, budget)
            empty: _M = reply()
            return empty

        return handle

    def _ctr_rpc(self, event: Event, reply: type[_M]) -> Callable[[Any, float], Awaitable[_M]]:
        async def handle(req: Any, budget: float) -> _M:
            await self._container_event(event, req.pod, req.container, event.word, budget)
            empty: _M = reply()
            return empty

        return handle

    async def _pod_event(self, event: Event, pod: nri_pb2.PodSandbox, rpc: str, budget: float) -> None:
        stage = EVENT_STAGES.get(event)
        if stage is None or not stage.is_pod_stage:
            return
        preq = pod_request(pod)
        # Only RunPodSandbox may fail the operation; stop and remove are bookkeeping and never refuse.
        await self._guarded(
            rpc, preq.key, "", lambda: self._dispatcher.dispatch_pod(stage, preq, door=DOOR, rpc=rpc), budget,
            may_fail=event is Event.RUN_POD_SANDBOX,
        )

    async def _container_event(
        self, event: Event, pod: nri_pb2.PodSandbox, ctr: nri_pb2.Container, rpc: str, budget: float
    ) -> None:
        if event is Event.REMOVE_CONTAINER:
            self._dispatcher.store.remove_container(ctr.id)
            return
        stage = EVENT_STAGES.get(event)
        if stage is None or stage.is_pod_stage:
            return
        creq = container_request(pod_request(pod), ctr)
        await self._guarded(
            rpc, creq.pod.key, creq.name,
            lambda: self._dispatcher.dispatch_container(stage, creq, door=DOOR, rpc=rpc), budget,
            may_fail=event is Event.START_CONTAINER,
        )

    # -- deadlines and policy --------------------------------------------------------------------
    def budget(self, deadline_s: float | None) -> float:
        base = self._request_timeout_s if deadline_s is None else min(self._request_timeout_s, deadline_s)
        return base * BUDGET_FRACTION

    async def _guarded(
        self, rpc: str, pod_key: str, container: str, call: Callable[[], _T], budget: float, *, may_fail: bool = True
    ) -> _T | None:
        """Run `call` in a worker within `budget` and apply the failure policy to what goes wrong."""
        fail = may_fail and self._policy is FailurePolicy.FAIL
        started = time.perf_counter()
        try:
            async with asyncio.timeout(budget):
                return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        except TimeoutError:
            self._status.timeouts += 1
            message = f"no answer within the {budget * 1000:.0f} ms budget"
            self._record(rpc, pod_key, container, "timeout", message, started)
            log.warning("nri %s for %s: %s (%s)", rpc, pod_key or "-", message, "failing" if fail else "answering no change")
            if fail:
                raise StatusError(Code.DEADLINE_EXCEEDED, f"{rpc}: {message}") from None
            return None
        except HookRejected as exc:
            self._status.rejections += 1
            if not may_fail:
                log.warning("nri %s for %s: %s (not refusable: ignored)", rpc, pod_key or "-", exc)
                return None
            raise StatusError(Code.UNKNOWN, str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - the front-door boundary: policy decides, nothing is lost
            self._status.errors += 1
            self._record(rpc, pod_key, container, "error", f"internal error: {exc}", started)
            log.error("nri %s for %s: internal error: %s", rpc, pod_key or "-", exc, exc_info=True)
            if fail:
                raise StatusError(Code.INTERNAL, f"{rpc}: {exc}") from exc
            return None

    def _record(self, rpc: str, pod_key: str, container: str, result: str, error: str, started: float) -> None:
        store = self._dispatcher.store
        latency = time.perf_counter() - started
        store.audit.add_event(store.clock(), DOOR, rpc, pod_key, container, latency, result, error)
        metrics = self._dispatcher.metrics
        if metrics is not None:
            metrics.observe_call(DOOR, rpc, result, latency)

    # -- wire ------------------------------------------------------------------------------------
    def _wire(
        self, method: str, request_type: type[_M], fn: Callable[[_M, float], Awaitable[Message | bytes]]
    ) -> Handler:
        async def handler(payload: bytes | memoryview, deadline_s: float | None) -> bytes:
            self._status.calls[method] += 1
            request = decode(request_type, method, payload)
            reply = await fn(request, self.budget(deadline_s))
            if isinstance(reply, bytes):  # a reply encoded by its handler (Synchronize's)
                return reply
            data: bytes = reply.SerializeToString()
            return data

        return handler
