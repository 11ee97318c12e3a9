"""One NRI Synchronize: every existing pod and container, loaded and answered inside the runtime's deadline.

The runtime holds its plugin lock for the whole exchange, and one deadline (its request timeout, 2 s)
covers every chunk of a split sync; a plugin that misses it is dropped, and an answer of "no change"
leaves every running container at the kubelet's values. So the work is ordered by what the answer needs
and cut where a deadline can stop it:

1. *Answer*: the container updates, decided one container at a time on one snapshot of the store as it
   was before the sync (as on the hot path, where a call's own bookkeeping comes after its reply), from
   the messages read in place (`translate.sync_pod_request`: no copy of 64 KiB of annotations a pod),
   each update encoded once per value (`translate.sync_update_entry`). This is all the reply carries, so
   it goes as soon as they are decided (`answered`).
2. *After the reply*, on the same worker: the store learns every pod and container in bulk
   (`HookDispatcher.learn_synced`; a `dispatch_pod` per pod rebuilt the store's snapshot once per pod,
   which made a sync quadratic in the node), the decisions are audited, and the pod cgroups' values (NRI
   has no pod-level update) are written through the executor, so the runtime does not wait for ~3 files
   a pod. Container updates carry `ignore_failure`; one the runtime applies before its pod's value is
   written sits in a BE pod the kubelet left unlimited, and the reconciler re-checks both levels.

A `stop` event set by the caller (its budget ran out) ends step 1 at the next container; the caller
answers the updates decided so far, and the pods of the containers left out are handed to the
reconciler at once (`NriPlugin(catch_up=...)`), which writes the same hooks' values to the cgroups. `hookctl nri` (`sync.partial`, `sync.handed_to_reconciler`) and
`hookserver_nri_sync_partial_total` say that it happened. Sync never fails: an item that does not
translate, or that the hooks reject, is logged, counted and skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hookserver.aio.hotgate import paced
from hookserver.api import nri_pb2
from hookserver.dispatch import HookDispatcher, HookRejected
from hookserver.errors import HookServerError
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.stages import Stage
from hookserver.hooks.outcome import StageOutcome
from hookserver.nri.translate import container_request, sync_pod_request, sync_update_entry
from hookserver.store.state import StoreSnapshot

__all__ = ["SyncProgress", "SyncWork"]

log = logging.getLogger(__name__)

DOOR = "nri"
RPC = "Synchronize"
_STOPPED = nri_pb2.ContainerState.Value("CONTAINER_STOPPED")
_REPLY_WAIT_S = 0.05


@dataclass(slots=True)
class SyncProgress:
    """What one Synchronize has done so far; appended to by the worker, read by the loop once it answers
    (list appends and int stores are atomic under the GIL; the reader copies)."""

    pods: int = 0
    containers: int = 0
    wanted: int = 0  # running containers of known pods: each gets its update decided (some decide "none")
    decided: int = 0
    updates: list[bytes] = field(default_factory=list)  # encoded `update` entries (`sync_update_entry`)
    pods_written: int = 0
    skipped: int = 0
    rejected: int = 0
    # The pod UID of each container to decide, in the order they are decided (None until translated).
    order: list[str] | None = None
    answer_s: float = 0.0  # the worker's time to decide them
    answered: bool = False  # the updates are decided (all of them, or up to the stop)
    done: bool = False  # and the pod values are written
    phase_s: dict[str, float] = field(default_factory=dict)

    def pending(self, all_pods: set[str]) -> set[str]:
        """The pods whose container updates a reply made now leaves out: those of the containers not yet
        decided, or every pod while the containers are not even listed. Read `decided` before copying
        `updates`: an update decided in between is then both answered and handed over (harmless)."""
        order = self.order
        if order is None:
            return set(all_pods)
        return set(order[self.decided:])


class SyncWork:
    """The work of one Synchronize, run on a worker thread by `run` (see the module doc)."""

    def __init__(
        self, dispatcher: HookDispatcher, pods: Sequence[nri_pb2.PodSandbox], containers: Sequence[nri_pb2.Container]
    ) -> None:
        self._dispatcher = dispatcher
        self._pods = pods
        self._containers = containers
        self.progress = SyncProgress(pods=len(pods), containers=len(containers))
        self.stop = threading.Event()
        self.reply_sent = threading.Event()

    def run(self, answered: Callable[[], None] = lambda: None) -> SyncProgress:
        """Decide the updates, call `answered` (the reply can go now), then learn and write the pod values."""
        progress, stop, dispatcher = self.progress, self.stop, self._dispatcher
        clock = time.perf_counter
        t0 = clock()
        decided: list[tuple[ContainerRequest, StageOutcome]] = []
        try:
            requests, creqs = self._translate()
            progress.order = [c.pod.uid for c in creqs]
            progress.wanted = len(creqs)
            # The hooks read the store as it was before this sync (as on the hot path, where a call's own
            # bookkeeping comes after its reply): pure decisions do not read other pods anyway.
            snap = dispatcher.store.snapshot()
            for creq in creqs:
                if stop.is_set():
                    break
                self._answer(creq, snap, decided)
            t1 = clock()
            progress.answer_s = t1 - t0
            progress.answered = True
        finally:
            answered()
        # Let the loop write the reply before this thread takes the GIL for the bookkeeping: started at
        # once, it held the loop's reply back by a switch interval or more.
        self.reply_sent.wait(_REPLY_WAIT_S)
        # After the reply: the store learns the node (copies of what the store keeps), the decisions are
        # audited, and the pod values are written: all stepping aside at the hot gate (the runtime may be
        # creating containers already; 30+ ms of CPU at 500 pods).
        snap = dispatcher.learn_synced(list(requests.values()), creqs)
        for creq, outcome in paced(decided, every=64):
            dispatcher.record_decisions(DOOR, outcome, creq.pod, creq.name)
        for request in paced(requests.values(), every=8):
            self._write_pod(request, snap)
        progress.phase_s = {"answer": t1 - t0, "after_reply": clock() - t1}
        progress.done = True
        return progress

    def _translate(self) -> tuple[dict[str, PodRequest], list[ContainerRequest]]:
        requests: dict[str, PodRequest] = {}
        for pod in self._pods:
            try:
                requests[pod.id] = sync_pod_request(pod)
            except HookServerError as exc:
                self._skip(f"pod {pod.namespace}/{pod.name}", exc)
        creqs: list[ContainerRequest] = []
        for ctr in self._containers:
            pod_req = requests.get(ctr.pod_sandbox_id)
            if pod_req is None or ctr.state == _STOPPED:
                continue
            try:
                creqs.append(container_request(pod_req, ctr))
            except HookServerError as exc:
                self._skip(f"container {pod_req.key}/{ctr.name}", exc)
        return requests, creqs

    def _answer(
        self, creq: ContainerRequest, snap: StoreSnapshot, decided: list[tuple[ContainerRequest, StageOutcome]]
    ) -> None:
        progress = self.progress
        try:
            result = self._dispatcher.decide_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, creq, snap)
            if result.outcome is not None:
                decided.append((creq, result.outcome))
            if result.result == "ok":
                entry = sync_update_entry(creq.container_id, result.resources)
                if entry:
                    progress.updates.append(entry)
            elif result.result == "error":
                self._skip(f"container {creq.pod.key}/{creq.name}", HookServerError(result.error))
        except HookServerError as exc:
            self._skip(f"container {creq.pod.key}/{creq.name}", exc)
        progress.decided += 1

    def _write_pod(self, request: PodRequest, snap: StoreSnapshot) -> None:
        try:
            result = self._dispatcher.settle_pod(request, snap, door=DOOR, rpc=RPC)
        except HookServerError as exc:
            self._skip(f"pod {request.key}", exc)
            return
        if result.result == "ok":
            self.progress.pods_written += 1

    def _skip(self, what: str, exc: HookServerError) -> None:
        if isinstance(exc, HookRejected):
            self.progress.rejected += 1
        else:
            self.progress.skipped += 1
        log.warning("nri: Synchronize: %s skipped: %s", what, exc)


CatchUp = Callable[[set[str], str], None]
