"""Pods from the kubelet's `/pods` endpoint, polled (koordlet's default: every 10 s, 3 s timeout).

The read-only port (10255, http) needs no credentials; the secure port (10250, https) takes the service
account token as a bearer token, re-read on every poll because projected tokens rotate. The kubelet
answers with a PodList, which replaces this source's pods in the store. A failed poll keeps the cache,
marks the source unhealthy (the informer marks the store stale) and is retried on the next tick.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from hookserver.aio.periodic import run_every
from hookserver.errors import InformerError
from hookserver.informer.handlers import PodHandler
from hookserver.informer.metrics import InformerMetrics
from hookserver.informer.settings import KubeletSettings

__all__ = ["KubeletPodSource"]

log = logging.getLogger(__name__)


class KubeletPodSource:
    name = "kubelet-pods"

    def __init__(
        self,
        settings: KubeletSettings,
        *,
        handler: PodHandler,
        metrics: InformerMetrics | None = None,
        on_health: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._handler = handler
        self._metrics = metrics
        self.on_health = on_health
        self._clock = clock
        self.url = f"{settings.scheme}://{settings.host}:{settings.port}/pods"
        self.connected = False
        self.synced = False
        self.last_sync = 0.0
        self.last_error = ""
        self.polls = 0
        self.errors = 0
        self.skipped = 0
        if metrics is not None:
            metrics.connected.labels(self.name).set(0)
            metrics.track_since_sync(self.name, self._since_sync)

    def _since_sync(self) -> float:
        return self._clock() - self.last_sync if self.last_sync else float("inf")

    def healthy(self) -> bool:
        return self.synced and self.connected

    def first_sync_done(self) -> bool:
        """A poll has succeeded once (its `_set_connected(True)` tells the informer)."""
        return self.synced

    def status(self) -> dict[str, Any]:
        return {
            "resource": self.name,
            "url": self.url,
            "connected": self.connected,
            "synced": self.synced,
            "stale": not self.healthy(),
            "stale_reason": "" if self.healthy() else (self.last_error or "not polled yet"),
            "last_sync": self.last_sync,
            "objects": self._handler.count(),
            "polls": self.polls,
            "skipped": self.skipped,
            "errors": self.errors,
            "last_error": self.last_error,
        }

    async def run(self, stop: asyncio.Event) -> None:
        await run_every(self._settings.sync_interval_s, self.poll_once, stop, name="informer kubelet /pods")
        self._set_connected(False)

    async def poll_once(self) -> None:
        """One poll. Failures are recorded here (not raised), so the periodic loop just carries on."""
        try:
            body = await asyncio.to_thread(self._fetch)
            items = body.get("items") if isinstance(body, Mapping) else None
            if not isinstance(items, list):
                raise InformerError(f"GET {self.url}: not a PodList")
            skipped = await asyncio.to_thread(self._handler.replace, items)
        except InformerError as exc:
            self.errors += 1
            self.last_error = str(exc)
            if self._metrics is not None:
                self._metrics.errors.labels(self.name).inc()
            log.warning("informer %s: %s", self.name, exc)
            self._set_connected(False)
            return
        self.polls += 1
        self.skipped += skipped
        if skipped and self._metrics is not None:
            self._metrics.skipped.labels(self.name).inc(skipped)
        self.synced = True
        self.last_sync = self._clock()
        if self._metrics is not None:
            self._metrics.relists.labels(self.name, "poll").inc()
        self._set_connected(True)

    def _set_connected(self, value: bool) -> None:
        if self.connected != value:
            self.connected = value
            if self._metrics is not None:
                self._metrics.connected.labels(self.name).set(1 if value else 0)
            if self.on_health is not None:
                self.on_health()

    def _request(self) -> urllib.request.Request:
        headers = {"Accept": "application/json"}
        auth = self._settings.auth
        send = auth == "token" or (auth == "auto" and self._settings.scheme == "https")
        if send and self._settings.token_file:
            try:
                with open(self._settings.token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as exc:
                raise InformerError(
                    f"kubelet token file {self._settings.token_file}: {exc.strerror or exc}"
                ) from exc
            if token:
                headers["Authorization"] = f"Bearer {token}"
        return urllib.request.Request(self.url, headers=headers, method="GET")

    def _context(self) -> ssl.SSLContext | None:
        if self._settings.scheme != "https":
            return None
        if self._settings.insecure_skip_verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        try:
            return ssl.create_default_context(cafile=self._settings.ca_file or None)
        except (OSError, ssl.SSLError) as exc:
            raise InformerError(f"kubelet CA file {self._settings.ca_file}: {exc}") from exc

    def _fetch(self) -> Any:
        limit = self._settings.max_response_bytes
        try:
            with urllib.request.urlopen(  # noqa: S310 - URL built from settings, scheme is http/https only
                self._request(), timeout=self._settings.timeout_s, context=self._context()
            ) as response:
                body = response.read(limit + 1)
        except urllib.error.HTTPError as exc:
            raise InformerError(f"GET {self.url}: HTTP {exc.code} {exc.reason}", status=exc.code) from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InformerError(f"GET {self.url}: {exc}") from exc
        if len(body) > limit:
            raise InformerError(f"GET {self.url}: response larger than {limit} bytes")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise InformerError(f"GET {self.url}: response is not JSON: {exc}") from exc
