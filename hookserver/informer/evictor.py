"""The Eviction API backend: evict a pod the way `kubectl drain` does, so PodDisruptionBudgets hold, and
leave a Kubernetes Event on the pod saying why, with the numbers.

The apiserver serves evictions as `policy/v1` from Kubernetes 1.22 and `policy/v1beta1` before; which one
is found once by discovery (`GET /apis/policy`) and kept. Per eviction:
  1. GET the pod: gone (or a new pod under the same name) -> not_found; a deletionTimestamp -> terminating;
  2. POST `pods/<name>/eviction` with a UID precondition: 201 evicted; 429 refused (a PodDisruptionBudget
     forbids it now, or the apiserver's priority and fairness sheds load): the reconciler tries again on a
     later round, but not before the server's retry-after: the longer of the Status's
     `details.retryAfterSeconds` (10 s for a PDB on recent apiservers; 1.20 sends none) and the `Retry-After`
     header (delta-seconds or an HTTP date; what a proxy in front of the apiserver sends, often with no Status
     body at all), as client-go's `SuggestsClientDelay` reads either; DEFAULT_RETRY_AFTER_S when neither is
     there; meanwhile the refusal is answered here without a request and counted); 404/409 not_found; else
     failed;
  3. on success, POST a core/v1 Event (type Warning, reason `evictPodSuccess`, as koordlet writes it).
Nothing here raises for an apiserver failure: the result says what happened.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from hookserver.errors import InformerError
from hookserver.eviction import EvictionRequest, EvictionResult, EvictionStatus
from hookserver.informer.pod_events import PodEventWriter

__all__ = ["ApiEvictor", "KubeWriter", "POLICY_V1", "POLICY_V1BETA1"]

log = logging.getLogger(__name__)

POLICY_V1 = "policy/v1"
POLICY_V1BETA1 = "policy/v1beta1"
EVENT_REASON_SUCCESS = "evictPodSuccess"
# A 429 without a retry-after: wait this long before asking again (one reconciler round is ~1-10 s).
DEFAULT_RETRY_AFTER_S = 5.0
_MAX_RETRY_AFTER_S = 600.0


class KubeWriter(Protocol):
    def request_json(self, method: str, path: str, body: Any = None, *, timeout_s: float) -> tuple[int, Any]: ...

    def request_json_with_headers(
        self, method: str, path: str, body: Any = None, *, timeout_s: float,
    ) -> tuple[int, Any, Mapping[str, str]]: ...


def _status_message(body: Any) -> str:
    if isinstance(body, Mapping):
        return str(body.get("message") or body.get("reason") or "")
    return ""


def _body_retry_after_s(body: Any) -> float:
    """The Status's `details.retryAfterSeconds`, 0 when absent or not a positive number."""
    details = body.get("details") if isinstance(body, Mapping) else None
    value = details.get("retryAfterSeconds") if isinstance(details, Mapping) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return 0.0


def _header_retry_after_s(value: str | None, now: float) -> float:
    """A `Retry-After` header (RFC 9110: delta-seconds, or an HTTP date, counted from `now`), 0 when absent
    or unreadable."""
    text = (value or "").strip()
    if not text:
        return 0.0
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return 0.0
    return max(when.timestamp() - now, 0.0) if when.tzinfo is not None else 0.0


def _retry_after_s(body: Any, headers: Mapping[str, str], now: float, default: float) -> float:
    """The server's wait before the next eviction attempt: the longer of the body's and the header's (either
    one asks the client to wait that long), capped at _MAX_RETRY_AFTER_S; `default` when neither says."""
    wait = max(_body_retry_after_s(body), _header_retry_after_s(headers.get("retry-after"), now))
    return min(wait, _MAX_RETRY_AFTER_S) if wait > 0 else default


class ApiEvictor:
    """Implements `hookserver.eviction.EvictionBackend` over the informer's apiserver transport."""

    kind = "api"

    def __init__(
        self,
        transport: Any,
        *,
        node_name: str,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._transport: KubeWriter = transport
        self.node_name = node_name
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._version: str = ""
        self.refused = 0  # 429s the apiserver answered
        self.held = 0  # refusals answered here, inside the server's retry-after, without a request
        self.events_failed = 0
        self._events = PodEventWriter(transport, node_name=node_name, timeout_s=timeout_s, clock=clock)
        # pod key -> (monotonic-free wall time until which the server asked us to wait, refusals in a row)
        self._refused_until: dict[str, tuple[float, int]] = {}

    # -- discovery --------------------------------------------------------------------------------
    def api_version(self) -> str:
        """`policy/v1` if the apiserver serves it, else `policy/v1beta1`; found once, then kept.
        Raises InformerError when discovery fails (nothing is kept: the next eviction asks again)."""
        with self._lock:
            if self._version:
                return self._version
        status, body = self._transport.request_json("GET", "/apis/policy", timeout_s=self.timeout_s)
        if status != 200 or not isinstance(body, Mapping):
            raise InformerError(f"GET /apis/policy: HTTP {status} {_status_message(body)}".rstrip())
        served = {
            str(v.get("groupVersion", "")) for v in body.get("versions") or [] if isinstance(v, Mapping)
        }
        if POLICY_V1 in served:
            version = POLICY_V1
        elif POLICY_V1BETA1 in served:
            version = POLICY_V1BETA1
        else:
            raise InformerError(f"GET /apis/policy: neither {POLICY_V1} nor {POLICY_V1BETA1} is served ({sorted(served)})")
        with self._lock:
            self._version = version
        log.info("evictions use %s (apiserver discovery)", version)
        return version

    # -- eviction ---------------------------------------------------------------------------------
    def evict(self, request: EvictionRequest) -> EvictionResult:
        try:
            return self._evict(request)
        except InformerError as exc:
            return EvictionResult(request, EvictionStatus.FAILED, error=str(exc), api_version=self._version)

    def _held(self, request: EvictionRequest) -> EvictionResult | None:
        """Inside the server's retry-after for this pod: refused again, without asking (counted)."""
        with self._lock:
            until, times = self._refused_until.get(request.key, (0.0, 0))
            left = until - self._clock()
            if left <= 0:
                return None
            self.held += 1
        return EvictionResult(request, EvictionStatus.REFUSED, api_version=self._version,
                              detail=f"PodDisruptionBudget: {times} refusal(s); next try in {left:.0f} s (server's retry-after)")

    def _evict(self, request: EvictionRequest) -> EvictionResult:
        held = self._held(request)
        if held is not None:
            return held
        ns, name = request.namespace, request.name
        pod_path = f"/api/v1/namespaces/{ns}/pods/{name}"
        status, pod = self._transport.request_json("GET", pod_path, timeout_s=self.timeout_s)
        if status == 404:
            return EvictionResult(request, EvictionStatus.NOT_FOUND, detail="pod not found")
        if status != 200 or not isinstance(pod, Mapping):
            return EvictionResult(request, EvictionStatus.FAILED, error=f"GET {pod_path}: HTTP {status} {_status_message(pod)}")
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        if request.pod_uid and meta.get("uid") and meta.get("uid") != request.pod_uid:
            return EvictionResult(request, EvictionStatus.NOT_FOUND, detail=f"{request.key} is now another pod (uid {meta.get('uid')})")
        if meta.get("deletionTimestamp"):
            return EvictionResult(request, EvictionStatus.TERMINATING, detail=f"terminating since {meta.get('deletionTimestamp')}")
        version = self.api_version()
        delete_options: dict[str, Any] = {}
        if request.pod_uid:
            delete_options["preconditions"] = {"uid": request.pod_uid}
        if request.grace_period_s is not None:
            delete_options["gracePeriodSeconds"] = request.grace_period_s
        body: dict[str, Any] = {
            "apiVersion": version, "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
        }
        if delete_options:
            body["deleteOptions"] = delete_options
        status, reply, headers = self._transport.request_json_with_headers(
            "POST", f"{pod_path}/eviction", body, timeout_s=self.timeout_s)
        message = _status_message(reply)
        if status in (200, 201):
            with self._lock:
                _until, times = self._refused_until.pop(request.key, (0.0, 0))
            if times:
                log.info("eviction of %s accepted after %d refusal(s) by its PodDisruptionBudget", request.key, times)
            created = self._event(request, pod)
            return EvictionResult(request, EvictionStatus.EVICTED, detail=f"eviction accepted ({version})",
                                  api_version=version, event_created=created)
        if status == 429:
            wait = _retry_after_s(reply, headers, self._clock(), DEFAULT_RETRY_AFTER_S)
            with self._lock:
                self.refused += 1
                _until, times = self._refused_until.get(request.key, (0.0, 0))
                self._refused_until[request.key] = (self._clock() + wait, times + 1)
            if not times:  # a change of state: logged once; the rest is counted (refused, held)
                log.info("eviction of %s refused (HTTP 429: %s); not asking again for %.0f s, as the server says",
                         request.key, message, wait)
            return EvictionResult(request, EvictionStatus.REFUSED, api_version=version,
                                  detail=f"HTTP 429: {message}; next try in {wait:.0f} s (server's retry-after)")
        if status in (404, 409):
            return EvictionResult(request, EvictionStatus.NOT_FOUND, detail=f"HTTP {status}: {message}", api_version=version)
        return EvictionResult(request, EvictionStatus.FAILED, error=f"POST {pod_path}/eviction: HTTP {status} {message}".rstrip(),
                              api_version=version)

    def _event(self, request: EvictionRequest, pod: Mapping[str, Any]) -> bool:
        """A core/v1 Event on the pod. A failure is logged and counted; the eviction stands."""
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        ok = self._events.post(
            namespace=request.namespace, name=request.name, uid=str(meta.get("uid") or request.pod_uid),
            resource_version=str(meta.get("resourceVersion") or ""), reason=EVENT_REASON_SUCCESS,
            message=f"evict Pod:{request.name}, reason: {request.reason}, message: {request.message}",
        )
        if not ok:
            with self._lock:
                self.events_failed += 1
        return ok
