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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hookserver.aio.periodic import sleep_or_stop
from hookserver.errors import InformerError, InputError
from hookserver.aio.backoff import Backoff
from hookserver.informer.convert import resource_version_of
from hookserver.informer.handlers import ObjectHandler
from hookserver.informer.metrics import InformerMetrics
from hookserver.informer.settings import InformerSettings
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
    ) -> None:
        self.kind = kind
        self._transport = transport
        self._handler = handler
        self._settings = settings
        self._metrics = metrics
        self.on_health = on_health
        self._clock = clock
        self._rand = rand
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
            "last_error": self.last_error,
        }

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
        backoff = Backoff(
            initial_s=self._settings.backoff_initial_s, max_s=self._settings.backoff_max_s,
            factor=self._settings.backoff_factor, jitter=self._settings.backoff_jitter, rand=self._rand,
        )
        reason = "initial"
        need_list = True
        loop = asyncio.get_running_loop()
        try:
            while not stop.is_set():
                try:
                    if need_list:
                        self._resync.clear()
                        listed = loop.run_in_executor(self._executor, self._list, reason)
                        if not await _until(listed, stop):
                            return
                        need_list = False
                        backoff.reset()
                        if self.absent:  # optional CRD not served: look again later
                            if await sleep_or_stop(stop, backoff.next_delay() + self._settings.backoff_max_s):
                                return
                            need_list, reason = True, "absent"
                            continue
                    watch_started = self._clock()
                    outcome = await self._watch_once(stop)
                except InformerError as exc:
                    if self.kind.absent_on(exc.status):  # the watch refused (a grant withdrawn): as on a list
                        self._mark_absent(exc)
                        if await sleep_or_stop(stop, backoff.next_delay() + self._settings.backoff_max_s):
                            return
                        need_list, reason = True, "absent"
                        continue
                    self._failed(exc)
                    if exc.status == 410:
                        need_list, reason = True, "expired"
                        continue
                    if await sleep_or_stop(stop, backoff.next_delay()):
                        return
                    continue
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    # A bug or an input shape nobody anticipated: logged with its traceback, retried with
                    # backoff like an outage, never the end of the informer.
                    log.exception("informer %s: unexpected failure", self.kind.name)
                    self._failed(InformerError(f"{self.kind.path}: unexpected {type(exc).__name__}: {exc}"))
                    if await sleep_or_stop(stop, backoff.next_delay()):
                        return
                    continue
                if outcome == "stopped":
                    return
                if outcome in ("expired", "resync"):
                    need_list, reason = True, outcome
                elif outcome == "idle":
                    # Quiet, not broken: re-watch from the same resourceVersion at once. If the connection
                    # was dead, that open fails within connect_timeout_s and the except above marks it.
                    self.idle_rewatches += 1
                    if self._metrics is not None:
                        self._metrics.idle_rewatches.labels(self.kind.name).inc()
                    backoff.reset()
                elif self._clock() - watch_started < 1.0 and not stop.is_set():
                    # The server closed a fresh watch at once: do not spin on it.
                    if await sleep_or_stop(stop, backoff.next_delay()):
                        return
                else:
                    backoff.reset()
        finally:
            self._set_connected(False)
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _failed(self, exc: InformerError) -> None:
        self.errors += 1
        self.last_error = str(exc)
        if self._metrics is not None:
            self._metrics.errors.labels(self.kind.name).inc()
        if exc.status != 410:
            self._set_connected(False)
        log.warning("informer %s: %s", self.kind.name, exc)

    def _params(self) -> dict[str, str]:
        return {"fieldSelector": self.kind.field_selector} if self.kind.field_selector else {}

    def _list(self, reason: str) -> None:
        """Runs in the reflector thread: page through the list, then hand the handler every item."""
        items: list[Any] = []
        params = self._params()
        if self._settings.list_page_size:
            params["limit"] = str(self._settings.list_page_size)
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
        self._set_connected(False)
        if self.on_health is not None:
            self.on_health()

    async def _watch_once(self, stop: asyncio.Event) -> _Outcome:
        loop = asyncio.get_running_loop()
        timeout_s = self._settings.watch_timeout_s * (1 + self._rand())
        params = self._params()
        params.update({
            "watch": "1", "resourceVersion": self.resource_version, "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(timeout_s)),
        })
        idle_s = self._settings.watch_idle_timeout_s
        if idle_s > 0:
            # The headers come at once from a live apiserver; a dead pooled connection fails here.
            open_s, read_s = self._settings.connect_timeout_s, idle_s
        else:
            open_s = read_s = timeout_s + 30
        opening = loop.run_in_executor(
            self._executor,
            lambda: self._transport.open_watch(self.kind.path, params, timeout_s=open_s, idle_timeout_s=read_s),
        )
        if not await _until(opening, stop):
            opening.add_done_callback(_close_late)
            return "stopped"
        stream: WatchStream = opening.result()
        self._set_connected(True)
        consuming = loop.run_in_executor(self._executor, self._consume, stream)
        stopped = asyncio.ensure_future(stop.wait())
        resync = asyncio.ensure_future(self._resync.wait())
        try:
            waiters: set[asyncio.Future[Any]] = {consuming, stopped, resync}
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            resync.cancel()
        if consuming in done:
            return consuming.result()
        stream.close()
        try:
            await consuming
        except InformerError as exc:
            log.debug("informer %s: watch closed: %s", self.kind.name, exc)
        return "stopped" if stop.is_set() else "resync"

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
