"""List, then watch from the list's resourceVersion, for one resource; relist on 410; back off on errors.

The kubernetes client is synchronous, so list and watch run in this reflector's own thread (never the
shared default executor, where a 5-minute watch would starve others). The asyncio side only decides:
it waits for the watch to end, for stop, or for a resync request, and closes the stream to interrupt a
blocked read. Events are applied in the reader thread, straight into the store.

Outage behaviour: when a list or watch fails the reflector is marked disconnected (the informer marks
the store stale), keeps the cache, and retries with jittered exponential backoff. It re-watches from
the last resourceVersion it saw, so the apiserver replays what was missed; if that version is too old
(410 Gone, as an HTTP status or an ERROR event) it relists and the handler reconciles the difference.

Dead connections: a watch that brings no byte for `watch_idle_timeout_s` is closed and re-watched from
the last resourceVersion without a warning and without touching the health flag, because a quiet watch
on a healthy apiserver is silent for minutes. A connection that is really gone (black-holed: no RST, no
FIN) then fails the re-watch's connect or its response headers within `connect_timeout_s`, and that
failure is the outage. So an outage nobody announces is noticed within idle + connect timeout instead
of timeoutSeconds + 30 s (5.5 to 10.5 minutes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hookserver.aio.periodic import sleep_or_stop
from hookserver.errors import InformerError, InputError
from hookserver.aio.backoff import Backoff
from hookserver.informer.convert import resource_version_of
from hookserver.informer.handlers import ObjectHandler
from hookserver.informer.metrics import InformerMetrics
from hookserver.informer.settings import InformerSettings
from hookserver.informer.spread import ListSpread
from hookserver.informer.transport import KubeTransport, WatchIdleTimeout, WatchStream

__all__ = ["ResourceKind", "Reflector"]

log = logging.getLogger(__name__)

_Outcome = Literal["ended", "expired", "stopped", "resync", "idle"]


@dataclass(frozen=True, slots=True)
class ResourceKind:
    name: str  # "pods", "node", "nodeslo", "nodemetric", "slo-configmap"
    path: str  # "/api/v1/pods"
    field_selector: str = ""
    optional: bool = False  # a 404 means "CRD not installed": not an outage
    # More statuses that mean "not available to this agent" rather than an outage (403: the RBAC grant is
    # missing, e.g. an older manifest): handled like a missing optional resource (the handler's fallback,
    # healthy, first sync done, looked at again later), with `hint` (what to grant) in `last_error`.
    tolerated: frozenset[int] = frozenset()
    hint: str = ""

    def absent_on(self, status: int) -> bool:
        return (status == 404 and self.optional) or status in self.tolerated


class Reflector:
    def __init__(
        self,
        kind: ResourceKind,
        *,
        transport: KubeTransport,
        handler: ObjectHandler,
        settings: InformerSettings,
        metrics: InformerMetrics | None = None,
        on_health: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        spread: ListSpread | None = None,
        sleep: Callable[[asyncio.Event, float], Awaitable[bool]] = sleep_or_stop,
    ) -> None:
        self.kind = kind
        self._transport = transport
        self._handler = handler
        self._settings = settings
        self._metrics = metrics
        self.on_health = on_health
        self._clock = clock
        self._rand = rand
        self._sleep = sleep  # every wait of the loop (spread, backoff, Retry-After) goes through this
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"informer-{kind.name}"
        )
        self._resync = asyncio.Event()
        # Status, read by Informer.status() from the event loop; written by the reader thread.
        self.resource_version = ""
        self.connected = False
        self.synced = False  # a list has succeeded at least once
        self.absent = False
        self.last_sync = 0.0
        self.last_error = ""
        self.lists = 0
        self.events = 0
        self.skipped = 0
        self.errors = 0
        self.idle_rewatches = 0
        self.idle_checks = 0  # silent watches found alive by the watchdog (kept open, not re-watched)
        self.throttled = 0  # 429 answers waited out
        self.state = "starting"
        self.next_attempt_at = 0.0
        self._failures = 0  # failures since the last watch opened: a 410 after one means "after an outage"
        self._last_byte = 0.0
        self._watch_timeout_s = 0  # the timeoutSeconds of the current watch
        # This node's place in the spread windows, shared by all its reflectors (the informer makes one per node):
        # a node relists all its resources at one moment instead of at five.
        self._spread = spread or ListSpread(
            first_list_s=settings.first_list_spread_s, relist_s=settings.relist_spread_s, phase=self._rand(),
        )
        if metrics is not None:
            metrics.connected.labels(kind.name).set(0)
            metrics.track_since_sync(kind.name, self.seconds_since_sync)

    # -- status ----------------------------------------------------------------------------------
    def seconds_since_sync(self) -> float:
        return self._clock() - self.last_sync if self.last_sync else float("inf")

    def healthy(self) -> bool:
        """Synced and watching, or the optional resource is simply not served."""
        return self.absent or (self.synced and self.connected)

    def first_sync_done(self) -> bool:
        """Listed once, or the optional resource is not served (its defaults are the answer)."""
        return self.synced or self.absent

    def status(self) -> dict[str, Any]:
        return {
            "resource": self.kind.name,
            "connected": self.connected,
            "synced": self.synced,
            "absent": self.absent,
            "stale": not self.healthy(),
            "resource_version": self.resource_version,
            "last_sync": self.last_sync,
            "seconds_since_sync": round(self.seconds_since_sync(), 3) if self.last_sync else None,
            "objects": self._handler.count(),
            "lists": self.lists,
            "events": self.events,
            "skipped": self.skipped,
            "errors": self.errors,
            "idle_rewatches": self.idle_rewatches,
            "idle_checks": self.idle_checks,
            "throttled": self.throttled,
            "state": self.state,
            "next_attempt_in_s": round(max(0.0, self.next_attempt_at - self._clock()), 1) if self.next_attempt_at
            else None,
            "stale_reason": "" if self.healthy() else self._stale_reason(),
            "last_error": self.last_error,
        }

    def _stale_reason(self) -> str:
        """One line for an operator: why this resource is not fresh, and what happens next."""
        why = self.state
        if self.last_error and not self.state.startswith(("retrying", "throttled")):
            why = f"{why}; last error: {self.last_error}"
        return why

    def _set_connected(self, value: bool) -> None:
        if self.connected != value:
            self.connected = value
            if self._metrics is not None:
                self._metrics.connected.labels(self.kind.name).set(1 if value else 0)
            if self.on_health is not None:
                self.on_health()

    def request_resync(self) -> None:
        self._resync.set()

    # -- the loop --------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        backoff = _ResettingBackoff(self._settings, rand=self._rand)
        unreachable = False  # the last failure was a transport failure (refused, reset, timed out)
        reason = "initial"
        need_list = True
        # After an outage every node of the cluster reconnects within seconds of the apiserver coming back,
        # and a watch resourceVersion older than the new watch cache answers 410: without a spread, every
        # node would relist in the same second. `_spread` (this node's phase) places this node's relist.
        delay = self._spread.first_list_delay()
        if delay > 0:
            self._set_state(f"first list in {delay:.1f} s (first_list_spread_s spreads the nodes' first lists)",
                            delay)
            if await self._sleep(stop, delay):
                return
        loop = asyncio.get_running_loop()
        try:
            while not stop.is_set():
                try:
                    if need_list:
                        if reason == "expired":
                            # Every 410 waits the node's next relist point, not only one after an outage, and
                            # a retry after a 429 or a failed relist waits for it again: the apiserver can expire
                            # every node's watch at once (after a restart, a CRD's storage rebuilt seconds later
                            # expired every NodeSLO and NodeMetric watch of 200 nodes within a few seconds), and
                            # only a point fixed on the clock keeps such a wave spread (spread.py).
                            delay = self._spread.relist_delay()
                            if delay > 0:
                                self._set_connected(False)  # the cache is behind until the relist: stale
                                after = " after an outage" if self._failures else ""
                                self._set_state(
                                    f"relist in {delay:.1f} s: the watch expired (410){after} "
                                    f"(relist_spread_s spreads the nodes' relists)", delay,
                                )
                                if await self._sleep(stop, delay):
                                    return
                        self._resync.clear()
                        self._set_state(f"listing ({reason})")
                        listed = loop.run_in_executor(self._executor, self._list, reason)
                        if not await _until(listed, stop):
                            return
                        need_list = False
                        if self.absent:  # optional CRD not served: look again later
                            if await self._sleep(stop, backoff.next_delay() + self._settings.backoff_max_s):
                                return
                            need_list, reason = True, "absent"
                            continue
                    watch_started = self._clock()
                    outcome = await self._watch_once(stop)
                    unreachable = False
                except InformerError as exc:
                    if self.kind.absent_on(exc.status):  # the watch refused (a grant withdrawn): as on a list
                        self._mark_absent(exc)
                        if await self._sleep(stop, backoff.next_delay() + self._settings.backoff_max_s):
                            return
                        need_list, reason = True, "absent"
                        continue
                    self._failed(exc)
                    if exc.status == 410:
                        need_list, reason = True, "expired"
                        continue
                    if exc.status == 429:
                        # The apiserver is alive and says when to come back (max-in-flight, or a cache still
                        # loading after a restart). Honour it, spread a little so nodes told "1 s" together
                        # do not return together, and do not grow the backoff: an overloaded server is not
                        # a failing one, and a grown backoff kept nodes stale long after it recovered.
                        wait = max(exc.retry_after_s, 1.0) * (1 + self._settings.backoff_jitter * self._rand())
                        self.throttled += 1
                        self._set_state(f"throttled (HTTP 429): retrying in {wait:.1f} s as the apiserver "
                                        f"asked (Retry-After {exc.retry_after_s:g} s)", wait)
                        if await self._sleep(stop, wait):
                            return
                        continue
                    if exc.status and unreachable:
                        # The apiserver answers again (with an error: a restarted one answers 503 for a custom
                        # resource until that CRD's handler is ready): the outage is over, and the delay it grew
                        # (to 30 s +- 50 %) would keep this resource stale that long after everything else came
                        # back, and its 410, relisted a window later, past the minute the restart should take.
                        backoff.answered_after_outage()
                    unreachable = exc.status == 0
                    wait = backoff.next_delay()
                    self._set_state(f"retrying in {wait:.1f} s after: {exc}", wait)
                    if await self._spread.backoff(stop, wait, self._sleep):  # or until a sibling gets through
                        return
                    continue
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    # A bug or an input shape nobody anticipated: logged with its traceback, retried with
                    # backoff like an outage, never the end of the informer.
                    log.exception("informer %s: unexpected failure", self.kind.name)
                    self._failed(InformerError(f"{self.kind.path}: unexpected {type(exc).__name__}: {exc}"))
                    if await self._sleep(stop, backoff.next_delay()):
                        return
                    continue
                if outcome == "stopped":
                    return
                if outcome in ("expired", "resync"):
                    need_list, reason = True, outcome
                elif outcome == "idle":
                    # The socket read timeout (timeoutSeconds + 30 s) passed without a byte although the
                    # server should have ended the watch: re-watch from the same resourceVersion. If the
                    # connection was dead, that open fails within connect_timeout_s and is an outage.
                    self.idle_rewatches += 1
                    if self._metrics is not None:
                        self._metrics.idle_rewatches.labels(self.kind.name).inc()
                elif self._clock() - watch_started < 1.0 and not stop.is_set():
                    # The server closed a fresh watch at once: do not spin on it.
                    if await self._sleep(stop, backoff.next_delay()):
                        return
                elif self._clock() - watch_started < self._watch_timeout_s - 5:
                    # Ended long before the timeoutSeconds it was given: the apiserver is shutting down (it ends
                    # every watch cleanly), not a watch that ran its course. Re-watch at once, but a 410 on the
                    # new apiserver is an outage's relist, spread like one.
                    self._failures += 1
                else:
                    self._failures = 0  # a watch that ran its course: healthy
        finally:
            self._set_connected(False)
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _set_state(self, text: str, wait_s: float = 0.0) -> None:
        """What the reflector does now, for `hookctl status` while it is stale (why, and until when)."""
        self.state = text
        self.next_attempt_at = self._clock() + wait_s if wait_s > 0 else 0.0

    def _failed(self, exc: InformerError) -> None:
        self.errors += 1
        if exc.status != 410:
            self._failures += 1
        self.last_error = str(exc)
        if self._metrics is not None:
            self._metrics.errors.labels(self.kind.name).inc()
        if exc.status != 410:
            self._set_connected(False)
        log.warning("informer %s: %s", self.kind.name, exc)

    def _params(self) -> dict[str, str]:
        return {"fieldSelector": self.kind.field_selector} if self.kind.field_selector else {}

    def _list_params(self, resource_version: str) -> dict[str, str]:
        """A list the apiserver's watch cache answers, never etcd. The first list asks for resourceVersion 0
        (any cached state); a relist asks for `resourceVersionMatch=NotOlderThan` the last version seen, so
        the answer is never older than the cache we hold. kube-apiserver (up to 1.30) sends a list with a
        `limit` and a resourceVersion other than 0 to etcd, so a relist sends no limit, as client-go's
        reflector does; with 0 the cache ignores the limit, and an apiserver without a watch cache pages."""
        params = self._params()
        params["resourceVersion"] = resource_version or "0"
        if params["resourceVersion"] == "0":
            if self._settings.list_page_size:
                params["limit"] = str(self._settings.list_page_size)
        else:
            params["resourceVersionMatch"] = "NotOlderThan"
        return params

    def _list(self, reason: str) -> None:
        """Runs in the reflector thread: page through the list, then hand the handler every item."""
        items: list[Any] = []
        params = self._list_params(self.resource_version if self.synced else "")
        resource_version = ""
        while True:
            try:
                body = self._transport.get_json(self.kind.path, params, timeout_s=self._settings.list_timeout_s)
            except InformerError as exc:
                if self.kind.absent_on(exc.status):
                    self._mark_absent(exc)
                    return
                if exc.status == 410 and "continue" in params:  # the continue token expired: start over
                    params.pop("continue")
                    items.clear()
                    continue
                if exc.status in (410, 504) and params.get("resourceVersion", "0") != "0":
                    # 504 "Too large resource version": this apiserver's cache is behind what we saw (another
                    # apiserver of an HA set, or a restore). Take what its cache has, not a quorum read from
                    # etcd: the watch from that version replays forward to the present.
                    log.info("informer %s: list at rv %s refused (%s); listing from the cache at rv 0",
                             self.kind.name, params["resourceVersion"], exc)
                    params = self._list_params("")
                    items.clear()
                    continue
                raise
            if not isinstance(body, Mapping) or not isinstance(body.get("items", []), list):
                raise InformerError(f"list {self.kind.path}: not a list object")
            items.extend(body.get("items") or [])
            raw_meta = body.get("metadata")
            meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
            resource_version = str(meta.get("resourceVersion") or "")
            token = meta.get("continue")
            if not token:
                break
            params["continue"] = str(token)
            params.pop("resourceVersion", None)  # a continue token carries its version; the server refuses both
            params.pop("resourceVersionMatch", None)
        skipped = self._handler.replace(items)
        self._count_skipped(skipped)
        first = not self.synced  # the first sync is this list, not the watch after it (which may yet fail)
        self.resource_version = resource_version
        self.absent = False
        self.synced = True
        self.lists += 1
        self.last_sync = self._clock()
        if self._metrics is not None:
            self._metrics.relists.labels(self.kind.name, reason).inc()
        if first and self.on_health is not None:
            self.on_health()
        log.debug("informer %s: listed %d items at rv %s (%s)", self.kind.name, len(items), resource_version,
                  reason)

    def _mark_absent(self, exc: InformerError) -> None:
        if exc.status in self.kind.tolerated:
            self.last_error = f"{exc}; {self.kind.hint}" if self.kind.hint else str(exc)
            if not self.absent:
                log.warning("informer %s: %s", self.kind.name, self.last_error)
        elif not self.absent:
            log.info("informer %s: %s is not served (%s); using defaults", self.kind.name, self.kind.path, exc)
        self.absent = True
        self._handler.absent()
        self.last_sync = self._clock()
        self._set_state("not served: using defaults, looking again later")
        self._set_connected(False)
        if self.on_health is not None:
            self.on_health()

    async def _watch_once(self, stop: asyncio.Event) -> _Outcome:
        loop = asyncio.get_running_loop()
        timeout_s = self._settings.watch_timeout_s * (1 + self._rand())
        self._watch_timeout_s = int(timeout_s)
        params = self._params()
        params.update({
            "watch": "1", "resourceVersion": self.resource_version, "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(timeout_s)),
        })
        idle_s = self._settings.watch_idle_timeout_s
        # The server ends the watch at timeoutSeconds; a read that waits 30 s longer means a dead connection.
        read_s = timeout_s + 30
        # The headers come at once from a live apiserver; a dead pooled connection fails here.
        open_s = self._settings.connect_timeout_s if idle_s > 0 else read_s
        self._set_state("opening a watch")
        opening = loop.run_in_executor(
            self._executor,
            lambda: self._transport.open_watch(self.kind.path, params, timeout_s=open_s, idle_timeout_s=read_s),
        )
        if not await _until(opening, stop):
            opening.add_done_callback(_close_late)
            return "stopped"
        stream: WatchStream = opening.result()
        self._last_byte = time.monotonic()
        self._set_state("watching")
        self._spread.answered()  # this node's other resources, backing off, try again now
        self._set_connected(True)
        consuming = loop.run_in_executor(self._executor, self._consume, stream)
        stopped = asyncio.ensure_future(stop.wait())
        resync = asyncio.ensure_future(self._resync.wait())
        watchdog: asyncio.Future[str] = (
            asyncio.ensure_future(self._watchdog(idle_s)) if idle_s > 0 else loop.create_future()
        )
        try:
            waiters: set[asyncio.Future[Any]] = {consuming, stopped, resync, watchdog}
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            resync.cancel()
            watchdog.cancel()
        if consuming in done:
            return consuming.result()
        stream.close()
        try:
            await consuming
        except InformerError as exc:
            log.debug("informer %s: watch closed: %s", self.kind.name, exc)
        if watchdog in done and not watchdog.cancelled():
            raise InformerError(watchdog.result())
        return "stopped" if stop.is_set() else "resync"

    async def _watchdog(self, idle_s: float) -> str:
        """Returns (a reason) only when the watch is presumed dead: no byte on it for `idle_s` and the
        apiserver answered nothing else in that time, not even a probe within connect_timeout_s.

        A quiet watch is healthy: kube-apiserver before 1.27 sends nothing on it until timeoutSeconds, and
        later ones a bookmark about once a minute. Closing it on silence (as this agent once did every 60 s)
        costs a request and, because HTTP/1.1 cannot reuse a connection mid-response, a new connection and
        TLS handshake each time. Instead the watch stays open and silence is checked against the transport:
        any answer (a NodeMetric report, another watch's event) proves the server and the route alive, else
        one shared GET /version over a pooled connection does. TCP keepalive catches a peer that stopped
        ACKing; this catches a black hole that still ACKs (a proxy that forwards nothing)."""
        timeout_s = self._settings.connect_timeout_s
        while True:
            wait = self._last_byte + idle_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            alive = await asyncio.to_thread(self._transport.confirm_alive, idle_s, timeout_s)
            if not alive:
                probe_error = getattr(self._transport, "last_probe_error", "") or "no answer"
                return (f"watch {self.kind.path}: no byte for {idle_s:g} s and the apiserver probe failed "
                        f"(within {timeout_s:g} s): {probe_error}")
            self.idle_checks += 1
            self._last_byte = time.monotonic()

    def _consume(self, stream: WatchStream) -> _Outcome:
        """Runs in the reflector thread: apply each event line; malformed ones are logged and skipped."""
        metrics = self._metrics
        name = self.kind.name
        perf = time.perf_counter
        # Labelled children resolved once per watch, not per event (labels() is a dict lookup under a lock).
        counters = {t: metrics.events.labels(name, t) for t in ("ADDED", "MODIFIED", "DELETED")} if metrics else {}
        latency = metrics.event_seconds.labels(name) if metrics is not None else None
        try:
            for line in stream.lines():
                started = perf()
                self._last_byte = time.monotonic()
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    self._skip(f"event line is not JSON ({exc}): {line[:120]!r}")
                    continue
                obj = event.get("object") if isinstance(event, Mapping) else None
                etype = event.get("type") if isinstance(event, Mapping) else None
                if not isinstance(obj, Mapping) or not isinstance(etype, str):
                    self._skip(f"event without type/object: {line[:120]!r}")
                    continue
                if etype == "ERROR":
                    code = obj.get("code")
                    message = (
                        f"watch {self.kind.path}: ERROR {code} {obj.get('reason', '')}: {obj.get('message', '')}"
                    )
                    if code == 410:
                        self.last_error = message
                        log.info("informer %s: %s; relisting", name, message)
                        return "expired"
                    raise InformerError(message, status=code if isinstance(code, int) else 0)
                self.last_sync = self._clock()
                self._failures = 0  # the watch delivers: whatever failed before is over
                if etype == "BOOKMARK":
                    rv = resource_version_of(obj)
                    if rv:
                        self.resource_version = rv
                    continue
                if etype not in ("ADDED", "MODIFIED", "DELETED"):
                    self._skip(f"unknown event type {etype!r}")
                    continue
                try:
                    self._handler.apply(etype, obj)
                except InputError as exc:
                    self._skip(f"{etype} {_describe(obj)}: {exc}")
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    self._skip(f"{etype} {_describe(obj)}: {type(exc).__name__}: {exc}")
                rv = resource_version_of(obj)
                if rv:
                    self.resource_version = rv
                self.events += 1
                if latency is not None:
                    counters[etype].inc()
                    latency.observe(perf() - started)
        except WatchIdleTimeout as exc:
            log.debug("informer %s: %s; re-watching from rv %s", name, exc, self.resource_version)
            return "idle"
        finally:
            stream.close()
        return "ended"

    def _skip(self, message: str) -> None:
        self._count_skipped(1)
        log.warning("informer %s: skipping malformed object: %s", self.kind.name, message)

    def _count_skipped(self, n: int) -> None:
        if n:
            self.skipped += n
            if self._metrics is not None:
                self._metrics.skipped.labels(self.kind.name).inc(n)


class _ResettingBackoff:
    """client-go's reflector backoff: exponential with jitter, capped, and reset only after a healthy period
    (`backoff_reset_s` since the previous backoff), not after any one success. An apiserver that accepts a
    list and then drops every watch would otherwise be retried at the initial delay forever."""

    def __init__(self, settings: InformerSettings, *, rand: Callable[[], float]) -> None:
        self._backoff = Backoff(
            initial_s=settings.backoff_initial_s, max_s=settings.backoff_max_s, factor=settings.backoff_factor,
            jitter=settings.backoff_jitter, rand=rand,
        )
        self._reset_s = settings.backoff_reset_s
        self._last = -float("inf")
        self._last_fresh_start = -float("inf")

    def next_delay(self) -> float:
        now = time.monotonic()
        if now - self._last >= self._reset_s:
            self._backoff.reset()
        self._last = now
        return self._backoff.next_delay()

    def answered_after_outage(self) -> None:
        """The apiserver answered (an HTTP error) after failures to reach it: what the outage grew does not carry
        over to this new failure, which starts from the initial delay; at most once per `backoff_reset_s`, so an
        apiserver flapping between refusing and failing still backs off."""
        now = time.monotonic()
        if now - self._last_fresh_start >= self._reset_s:
            self._last_fresh_start = now
            self._backoff.reset()


async def _until(future: asyncio.Future[Any], stop: asyncio.Event) -> bool:
    """Await `future` unless `stop` is set first. True when the future finished (its error re-raised)."""
    stopped = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({future, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if future in done:
        future.result()
        return True
    return False


def _close_late(future: asyncio.Future[Any]) -> None:
    """A watch that opened after we stopped waiting for it: close it so its socket is not leaked."""
    if not future.cancelled() and future.exception() is None:
        future.result().close()


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
    return "?"
