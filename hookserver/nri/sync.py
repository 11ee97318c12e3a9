"""One NRI Synchronize: every existing pod and container, loaded and answered inside the runtime's deadline.

The runtime holds its plugin lock for the whole exchange, and one deadline (its request timeout, 2 s)
covers every chunk of a split sync; a plugin that misses it is dropped, and an answer of "no change"
leaves every running container at the kubelet's values. So the work is ordered by what the answer needs
and cut where a deadline can stop it:

1. *Answer*: the container updates, decided one container at a time on one snapshot of the store as it
   was before the sync (as on the hot path, where a call's own bookkeeping comes after its reply), from
   the messages read in place (`translate.sync_pod_request`: no copy of 64 KiB of annotations a pod),
   each update encoded once per value (`translate.sync_update_entry`), with automatic garbage collection
   held until the reply is written (`gcpacer.CollectionHold`). This is all the reply carries, so it goes as
   soon as they are decided (`answered`).

   A split sync is decided *as its chunks come* (`add`): each chunk is answered "more" at once, and the worker
   translates and decides its containers while the runtime encodes and sends the next one, which takes it
   tens of milliseconds a 4 MiB chunk (containerd's NRI library, measured). Only the last chunk's containers
   are left when the last chunk arrives: at 2,500 pods the answer took 144 ms after the last chunk, deciding
   all 5,000 containers there. A container listed before its pod (a chunk boundary may fall between them)
   waits for it; one whose pod never comes gets no update, as before.
2. *After the reply*, on the same worker: the store learns every pod and container in bulk
   (`HookDispatcher.learn_synced`; a `dispatch_pod` per pod rebuilt the store's snapshot once per pod,
   which made a sync quadratic in the node), the decisions are audited, and the pod cgroups' values (NRI
   has no pod-level update) are written through the executor, so the runtime does not wait for ~3 files
   a pod. Container updates carry `ignore_failure`; one the runtime applies before its pod's value is
   written sits in a BE pod the kubelet left unlimited, and the reconciler re-checks both levels.

A `stop` event set by the caller (its budget ran out) ends step 1 at the next container; the caller
answers the updates decided so far, and the pods of the containers left out (`SyncProgress.pending`) are
handed to the reconciler at once (`NriPlugin(catch_up=...)`), which writes the same hooks' values to the
cgroups. `hookctl nri` (`sync.partial`, `sync.handed_to_reconciler`) and
`hookserver_nri_sync_partial_total` say that it happened. Sync never fails: an item that does not
translate, or that the hooks reject, is logged, counted and skipped. A sync whose runtime goes away
between chunks is dropped (`abandon`, or no chunk within `chunk_wait_s`): nothing of it is learnt, and the
next connection syncs afresh.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from hookserver.aio.gcpacer import CollectionHold
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
# How long the worker waits for a split sync's next chunk before it drops the sync (the runtime's whole sync
# has one deadline, its request timeout, 2 s by default; the handler passes that plus a margin).
DEFAULT_CHUNK_WAIT_S = 5.0

_Chunk = tuple[Sequence[nri_pb2.PodSandbox], Sequence[nri_pb2.Container], bool]


@dataclass(slots=True)
class SyncProgress:
    """What one Synchronize has done so far; appended to by the worker, read by the loop once it answers
    (list appends and int stores are atomic under the GIL; the reader copies)."""

    pods: int = 0
    containers: int = 0
    chunks: int = 0  # chunks the worker has taken in
    wanted: int = 0  # running containers of known pods: each gets its update decided (some decide "none")
    decided: int = 0
    decided_before_last: int = 0  # of those, decided before the last chunk came (a split sync, pipelined)
    updates: list[bytes] = field(default_factory=list)  # encoded `update` entries (`sync_update_entry`)
    pods_written: int = 0
    skipped: int = 0
    rejected: int = 0
    # The id of each container to decide, in the order they are decided (`decided` of them are).
    order: list[str] = field(default_factory=list)
    complete: bool = False  # every chunk taken in and every container in it decided (nothing pending)
    abandoned: bool = False  # the runtime went away between chunks: nothing answered, nothing learnt
    answer_s: float = 0.0  # the worker's time to decide them, from the last chunk
    answered: bool = False  # the updates are decided (all of them, or up to the stop)
    done: bool = False  # and the pod values are written
    phase_s: dict[str, float] = field(default_factory=dict)

    def pending(self, pods: Iterable[nri_pb2.PodSandbox], containers: Iterable[nri_pb2.Container]) -> set[str]:
        """The UIDs of the pods with a running container whose update a reply made now leaves out (the sync's
        `pods` and `containers`, all chunks). Read `decided` before copying `updates`: an update decided in
        between is then both answered and handed over (harmless)."""
        if self.complete:
            return set()
        decided = set(self.order[:self.decided])
        uids = {pod.id: pod.uid for pod in pods if pod.uid}
        return {
            uid for ctr in containers
            if ctr.state != _STOPPED and ctr.id not in decided and (uid := uids.get(ctr.pod_sandbox_id)) is not None
        }


class SyncWork:
    """The work of one Synchronize, run on a worker thread by `run`, fed its chunks by `add` (see the module doc)."""

    def __init__(self, dispatcher: HookDispatcher, *, chunk_wait_s: float = DEFAULT_CHUNK_WAIT_S) -> None:
        self._dispatcher = dispatcher
        self._chunk_wait_s = chunk_wait_s
        self._chunks: queue.SimpleQueue[_Chunk | None] = queue.SimpleQueue()
        self.progress = SyncProgress()
        self.stop = threading.Event()
        self.reply_sent = threading.Event()
        # The worker's own: pod requests by sandbox id, the container requests in decision order, and the
        # running containers listed before their pod, by the pod's sandbox id.
        self._requests: dict[str, PodRequest] = {}
        self._creqs: list[ContainerRequest] = []
        self._waiting: dict[str, list[nri_pb2.Container]] = {}

    @classmethod
    def of(
        cls, dispatcher: HookDispatcher, pods: Sequence[nri_pb2.PodSandbox], containers: Sequence[nri_pb2.Container]
    ) -> SyncWork:
        """A sync that comes in one chunk."""
        work = cls(dispatcher)
        work.add(pods, containers, last=True)
        return work

    def add(self, pods: Sequence[nri_pb2.PodSandbox], containers: Sequence[nri_pb2.Container], *, last: bool) -> None:
        """Queue one chunk for the worker (the caller's thread; the messages are not changed after this)."""
        self.progress.pods += len(pods)
        self.progress.containers += len(containers)
        self._chunks.put((pods, containers, last))

    def abandon(self) -> None:
        """The connection is gone: the worker, if it waits for a chunk, drops the sync."""
        self._chunks.put(None)

    def run(self, answered: Callable[[], None] = lambda: None) -> SyncProgress:
        """Decide the updates chunk by chunk, call `answered` (the reply can go now), then learn and write the
        pod values."""
        progress, stop, dispatcher = self.progress, self.stop, self._dispatcher
        clock = time.perf_counter
        decided: list[tuple[ContainerRequest, StageOutcome]] = []
        gc_hold = CollectionHold()
        t0 = t1 = clock()
        try:
            # The hooks read the store as it was before this sync (as on the hot path, where a call's own
            # bookkeeping comes after its reply): pure decisions do not read other pods anyway.
            snap = dispatcher.store.snapshot()
            decide = dispatcher.container_decider(Stage.PRE_UPDATE_CONTAINER_RESOURCES, snap)
            while True:
                try:
                    chunk = self._chunks.get(timeout=self._chunk_wait_s)
                except queue.Empty:
                    chunk = None
                    log.warning("nri Synchronize: no next chunk within %.1f s: the sync is dropped", self._chunk_wait_s)
                if chunk is None:
                    progress.abandoned = True
                    return progress
                pods, containers, last = chunk
                if last:
                    t0 = clock()
                    progress.decided_before_last = progress.decided
                # No automatic collection while a chunk is decided (its young objects are the answer itself),
                # nor, after the last, until the reply is written (`gcpacer.CollectionHold`); not while waiting
                # for the next chunk.
                gc_hold.hold()
                self._take(pods, containers, last)
                progress.chunks += 1
                creqs = self._creqs
                while progress.decided < len(creqs) and not stop.is_set():
                    self._answer(creqs[progress.decided], decide, decided)
                if last or stop.is_set():
                    break
                gc_hold.release()
            progress.complete = last and progress.decided == len(self._creqs) and not stop.is_set()
            t1 = clock()
            progress.answer_s = t1 - t0
            progress.answered = True
        finally:
            try:
                answered()
                # Let the loop write the reply before this thread takes the GIL for the bookkeeping (started
                # at once, it held the loop's reply back by a switch interval or more) or for a collection.
                if not progress.abandoned:
                    self.reply_sent.wait(_REPLY_WAIT_S)
                    gc_hold.release(collect=True)  # what the hold put off, here, at a quiet moment
            finally:
                gc_hold.release()
        # After the reply: the store learns the node (copies of what the store keeps), the decisions are
        # audited, and the pod values are written: all stepping aside at the hot gate (the runtime may be
        # creating containers already; 30+ ms of CPU at 500 pods).
        requests = list(self._requests.values())
        snap = dispatcher.learn_synced(requests, self._creqs)
        for creq, outcome in paced(decided, every=64):
            dispatcher.record_decisions(DOOR, outcome, creq.pod, creq.name)
        for request in paced(requests, every=8):
            self._write_pod(request, snap)
        progress.phase_s = {"answer": t1 - t0, "after_reply": clock() - t1}
        progress.done = True
        return progress

    def _take(self, pods: Sequence[nri_pb2.PodSandbox], containers: Sequence[nri_pb2.Container], last: bool) -> None:
        """Translate one chunk: its pods, then its running containers whose pod is known (queued for deciding);
        the others wait for their pod, and on the last chunk those still waiting are dropped."""
        requests, waiting = self._requests, self._waiting
        for pod in pods:
            try:
                requests[pod.id] = sync_pod_request(pod)
            except HookServerError as exc:
                self._skip(f"pod {pod.namespace}/{pod.name}", exc)
                continue
            early = waiting.pop(pod.id, None) if waiting else None
            if early is not None:
                self._queue(requests[pod.id], early)
        for ctr in containers:
            if ctr.state == _STOPPED:
                continue
            pod_req = requests.get(ctr.pod_sandbox_id)
            if pod_req is None:
                if not last:
                    waiting.setdefault(ctr.pod_sandbox_id, []).append(ctr)
                continue
            self._queue(pod_req, (ctr,))
        if last and waiting:
            log.debug("nri Synchronize: %d containers of pods the runtime did not list get no update",
                      sum(len(v) for v in waiting.values()))
            waiting.clear()

    def _queue(self, pod_req: PodRequest, containers: Iterable[nri_pb2.Container]) -> None:
        for ctr in containers:
            try:
                creq = container_request(pod_req, ctr)
            except HookServerError as exc:
                self._skip(f"container {pod_req.key}/{ctr.name}", exc)
                continue
            self._creqs.append(creq)
            self.progress.order.append(ctr.id)
            self.progress.wanted += 1

    def _answer(
        self, creq: ContainerRequest, decide: Callable[[ContainerRequest], StageOutcome | None],
        decided: list[tuple[ContainerRequest, StageOutcome]],
    ) -> None:
        progress = self.progress
        try:
            outcome = decide(creq)
            if outcome is not None:
                decided.append((creq, outcome))
                if not outcome.failed:
                    entry = sync_update_entry(creq.container_id, outcome.resources)
                    if entry:
                        progress.updates.append(entry)
                else:
                    error = self._dispatcher.failed(Stage.PRE_UPDATE_CONTAINER_RESOURCES, outcome)
                    self._skip(f"container {creq.pod.key}/{creq.name}", HookServerError(error))
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
