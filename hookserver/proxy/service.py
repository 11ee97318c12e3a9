"""The seven RuntimeHookService rpcs as plain functions: bytes in, response or refusal out.

This is the boundary where the failure policy meets the wire. Each rpc translates its request,
hands it to the one stage runner (`HookDispatcher`), and folds the result into an echo of the request.
Nothing here knows which gRPC server runs it: a refusal is returned as a `Refusal` value and the
server adapter turns it into a status, so the logic is tested without a socket and reused by any server.

Policy (the dispatcher's `policy`, applied here once for what the dispatcher never sees):
* a request that does not decode → INVALID_ARGUMENT under either policy (there is nothing to echo);
* a request without a pod or container identity → Ignore: echo + audited error; Fail: INVALID_ARGUMENT;
* a hook error → the dispatcher decides; `HookRejected` (Fail) → INVALID_ARGUMENT naming the field;
* anything unexpected → Ignore: echo + logged + audited; Fail: INTERNAL. The server never crashes.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar, cast

from google.protobuf.message import DecodeError, Message

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.dispatch import HookDispatcher, HookRejected
from hookserver.errors import InputError
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.stages import Stage
from hookserver.proxy import translate
from hookserver.store.audit import HookEventRecord

__all__ = [
    "DOOR",
    "RPCS",
    "SERVICE_NAME",
    "HookService",
    "Malformed",
    "Refusal",
    "RefusalCode",
    "RpcSpec",
    "decoder",
]

log = logging.getLogger(__name__)

DOOR = "proxy"
SERVICE_NAME = "runtime.v1alpha1.RuntimeHookService"

ReqT = TypeVar("ReqT", pb.PodSandboxHookRequest, pb.ContainerResourceHookRequest)


class RefusalCode(enum.Enum):
    """The gRPC status a refusal maps to (names match `grpc.StatusCode`)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True, slots=True)
class Refusal:
    """The rpc fails with `code` and `message`; the adapter aborts the call with it."""

    code: RefusalCode
    message: str


@dataclass(frozen=True, slots=True)
class Malformed:
    """A request body that did not decode. Carried to the handler so the refusal is ours, not grpc's."""

    type_name: str
    size: int
    error: str


@dataclass(frozen=True, slots=True)
class RpcSpec(Generic[ReqT]):
    name: str
    stage: Stage
    request_type: type[ReqT]
    response_type: type[Message]

    @property
    def path(self) -> str:
        return f"/{SERVICE_NAME}/{self.name}"


_POD = (pb.PodSandboxHookRequest, pb.PodSandboxHookResponse)
_CTR = (pb.ContainerResourceHookRequest, pb.ContainerResourceHookResponse)

RPCS: Mapping[str, RpcSpec[pb.PodSandboxHookRequest] | RpcSpec[pb.ContainerResourceHookRequest]] = MappingProxyType({
    spec.name: spec
    for spec in (
        RpcSpec("PreRunPodSandboxHook", Stage.PRE_RUN_POD_SANDBOX, *_POD),
        RpcSpec("PostStopPodSandboxHook", Stage.POST_STOP_POD_SANDBOX, *_POD),
        RpcSpec("PreCreateContainerHook", Stage.PRE_CREATE_CONTAINER, *_CTR),
        RpcSpec("PreStartContainerHook", Stage.PRE_START_CONTAINER, *_CTR),
        RpcSpec("PostStartContainerHook", Stage.POST_START_CONTAINER, *_CTR),
        RpcSpec("PostStopContainerHook", Stage.POST_STOP_CONTAINER, *_CTR),
        RpcSpec("PreUpdateContainerResourcesHook", Stage.PRE_UPDATE_CONTAINER_RESOURCES, *_CTR),
    )
})


def decoder(request_type: type[ReqT]) -> Callable[[bytes], ReqT | Malformed]:
    """A request deserializer that never raises: bad bytes become a `Malformed` value."""
    from_string = request_type.FromString
    type_name = request_type.DESCRIPTOR.full_name

    def decode(data: bytes) -> ReqT | Malformed:
        try:
            return cast(ReqT, from_string(data))
        except (DecodeError, ValueError, RuntimeError) as exc:
            return Malformed(type_name, len(data), str(exc) or type(exc).__name__)

    return decode


class HookService:
    """The rpc bodies over one dispatcher. Thread-safe: it holds no per-call state."""

    def __init__(self, dispatcher: HookDispatcher) -> None:
        self._dispatcher = dispatcher
        self._logged_unexpected: set[tuple[str, str]] = set()

    @property
    def policy(self) -> FailurePolicy:
        return self._dispatcher.policy

    def pod(
        self, spec: RpcSpec[pb.PodSandboxHookRequest], raw: pb.PodSandboxHookRequest | Malformed
    ) -> pb.PodSandboxHookResponse | Refusal:
        started = time.perf_counter()
        if isinstance(raw, Malformed):
            return self._malformed(spec, raw, started)
        try:
            request = translate.pod_request(raw)
        except InputError as exc:
            return self._bad_input(spec, exc, translate.echo_pod(raw), _pod_key(raw.pod_meta), "", started)
        try:
            result = self._dispatcher.dispatch_pod(spec.stage, request, door=DOOR, rpc=spec.name)
            return translate.pod_response(raw, result.resources)
        except HookRejected as exc:
            return Refusal(RefusalCode.INVALID_ARGUMENT, _rejection_message(spec, exc))
        except Exception as exc:  # noqa: BLE001 - the boundary: an unexpected error becomes policy, see module doc
            return self._unexpected(spec, exc, translate.echo_pod(raw), request.key, "", started)

    def container(
        self, spec: RpcSpec[pb.ContainerResourceHookRequest], raw: pb.ContainerResourceHookRequest | Malformed
    ) -> pb.ContainerResourceHookResponse | Refusal:
        started = time.perf_counter()
        if isinstance(raw, Malformed):
            return self._malformed(spec, raw, started)
        try:
            request = translate.container_request(raw)
        except InputError as exc:
            return self._bad_input(
                spec, exc, translate.echo_container(raw), _pod_key(raw.pod_meta), raw.container_meta.name, started
            )
        try:
            result = self._dispatcher.dispatch_container(spec.stage, request, door=DOOR, rpc=spec.name)
            return translate.container_response(raw, result.resources, result.envs)
        except HookRejected as exc:
            return Refusal(RefusalCode.INVALID_ARGUMENT, _rejection_message(spec, exc))
        except Exception as exc:  # noqa: BLE001 - the boundary: an unexpected error becomes policy, see module doc
            return self._unexpected(spec, exc, translate.echo_container(raw), request.pod.key, request.name, started)

    # -- failure paths ---------------------------------------------------------------------------
    def _malformed(self, spec: RpcSpec[ReqT], bad: Malformed, started: float) -> Refusal:
        message = f"{spec.name}: request is not a valid {bad.type_name} ({bad.size} bytes): {bad.error}"
        log.warning("%s", message)
        self._record(spec, "", "", started, "rejected", message)
        return Refusal(RefusalCode.INVALID_ARGUMENT, message)

    def _bad_input(
        self, spec: RpcSpec[ReqT], exc: InputError, echo: Message, pod_key: str, container: str, started: float
    ) -> Message | Refusal:
        message = f"{spec.name}: invalid request: {exc}"
        if self.policy is FailurePolicy.FAIL:
            self._record(spec, pod_key, container, started, "rejected", message)
            return Refusal(RefusalCode.INVALID_ARGUMENT, message)
        log.warning("%s (policy Ignore: request passes unchanged)", message)
        self._record(spec, pod_key, container, started, "error", message)
        return echo

    def _unexpected(
        self, spec: RpcSpec[ReqT], exc: Exception, echo: Message, pod_key: str, container: str, started: float
    ) -> Message | Refusal:
        message = f"{spec.name}: internal error: {type(exc).__name__}: {exc}"
        first = (spec.name, type(exc).__name__) not in self._logged_unexpected
        if first:
            # The traceback once per rpc and error type; repeats are counted and audited, not re-logged.
            self._logged_unexpected.add((spec.name, type(exc).__name__))
            log.error("%s (further %s errors on this rpc are logged at DEBUG)", message, type(exc).__name__,
                      exc_info=exc)
        else:
            log.debug("%s", message)
        if self.policy is FailurePolicy.FAIL:
            self._record(spec, pod_key, container, started, "rejected", message)
            return Refusal(RefusalCode.INTERNAL, message)
        self._record(spec, pod_key, container, started, "error", message)
        return echo

    def _record(self, spec: RpcSpec[ReqT], pod_key: str, container: str, started: float, result: str, error: str) -> None:
        """Audit and count a call the dispatcher never finished (so `hookctl` and /metrics see it)."""
        dispatcher = self._dispatcher
        latency = time.perf_counter() - started
        dispatcher.store.audit.record_event(
            HookEventRecord(
                ts=dispatcher.store.clock(), door=DOOR, rpc=spec.name, pod_key=pod_key, container=container,
                latency_s=latency, result=result, error=error,
            )
        )
        if dispatcher.metrics is not None:
            dispatcher.metrics.calls.labels(DOOR, spec.name, result).inc()
            dispatcher.metrics.latency.labels(DOOR, spec.name).observe(latency)


def _pod_key(meta: pb.PodSandboxMetadata) -> str:
    return f"{meta.namespace}/{meta.name}" if meta.name else ""


def _rejection_message(spec: RpcSpec[ReqT], exc: HookRejected) -> str:
    message = str(exc)
    if exc.field and exc.field not in message:
        message = f"{exc.field}: {message}"
    return f"{spec.name}: {message}"
