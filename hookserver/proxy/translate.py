"""Wire <-> context translation for the runtime-proxy door: protobuf stops here.

Requests become the shared `PodRequest` / `ContainerRequest` (hooks never see protobuf). Responses are
built the way koordlet builds them (reference §1.3): **echo the request first**, then fold in only the
values a hook produced. The echo matters because koord-runtime-proxy overwrites the CRI request's
cpuset and oom_score_adj from whatever the response holds: an empty response would wipe the cpuset
and reset oom_score_adj to 0.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.errors import InputError
from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource, wire_map
from hookserver.resources import Resources

__all__ = [
    "container_request",
    "container_response",
    "echo_container",
    "echo_pod",
    "pod_request",
    "pod_response",
    "resources_from_wire",
]

_NO_RESOURCES = Resources()
_EMPTY: Mapping[str, str] = MappingProxyType({})


def resources_from_wire(wire: pb.LinuxContainerResources) -> Resources:
    """The CRI resources the hooks may read, as koordlet's `FromProxy` reads them.

    shares and quota only when non-zero, memory when non-zero (any negative means unlimited, -1),
    cpuset when non-empty. Zero/empty is proto3's "not sent", so it stays None ("not set").
    """
    shares = wire.cpu_shares
    quota = wire.cpu_quota
    memory = wire.memory_limit_in_bytes
    cpus = wire.cpuset_cpus
    if not (shares or quota or memory or cpus):
        return _NO_RESOURCES
    return _resources(shares, quota, memory, cpus)


@functools.lru_cache(maxsize=1024)
def _resources(shares: int, quota: int, memory: int, cpus: str) -> Resources:
    """Requests carry a handful of distinct resource sets: build each frozen value once."""
    return Resources(
        cpu_shares=shares or None,
        cpu_quota_us=quota or None,
        memory_limit_bytes=(-1 if memory < 0 else memory) or None,
        cpuset_cpus=cpus or None,
    )


def _pod_meta(meta: pb.PodSandboxMetadata, has_meta: bool) -> tuple[str, str, str, int]:
    """(namespace, name, uid, attempt); a request without a pod identity cannot be hooked or audited."""
    if not has_meta:
        raise InputError("missing; the request names no pod", field="pod_meta")
    if not meta.uid:
        raise InputError("empty pod UID", field="pod_meta.uid")
    if not meta.name:
        raise InputError("empty pod name", field="pod_meta.name")
    return meta.namespace, meta.name, meta.uid, meta.attempt


def pod_request(req: pb.PodSandboxHookRequest) -> PodRequest:
    """PodSandboxHookRequest -> PodRequest. Raises InputError naming the field when the pod is unnamed."""
    namespace, name, uid, attempt = _pod_meta(req.pod_meta, req.HasField("pod_meta"))
    return PodRequest(
        namespace=namespace,
        name=name,
        uid=uid,
        labels=wire_map(req.labels),
        annotations=wire_map(req.annotations),
        cgroup_parent=req.cgroup_parent,
        runtime_handler=req.runtime_handler,
        attempt=attempt,
        resources=resources_from_wire(req.resources) if req.HasField("resources") else _NO_RESOURCES,
        source=RequestSource.PROXY,
    )


def container_request(req: pb.ContainerResourceHookRequest) -> ContainerRequest:
    """ContainerResourceHookRequest -> ContainerRequest (with its pod).

    `container_id` is the runtime's bare ID (empty during PreCreateContainer); `cgroup_parent` is the
    pod cgroup parent the proxy sends. The maps are views of the request (`WireMap`): hooks read a key
    or two, and copying every map per call (or keying a per-pod memo on them) cost more than the hooks.
    """
    namespace, name, uid, attempt = _pod_meta(req.pod_meta, req.HasField("pod_meta"))
    if not req.HasField("container_meta"):
        raise InputError("missing; the request names no container", field="container_meta")
    meta = req.container_meta
    if not meta.name:
        raise InputError("empty container name", field="container_meta.name")
    cgroup_parent = req.pod_cgroup_parent
    # Positional, in field order: a keyword call to these records costs ~0.5 us more on the hot path.
    # PodRequest(namespace, name, uid, labels, annotations, cgroup_parent, sandbox_id, runtime_handler, attempt,
    #            resources, source)
    pod = PodRequest(
        namespace, name, uid, wire_map(req.pod_labels), wire_map(req.pod_annotations), cgroup_parent, "", "",
        attempt, resources_from_wire(req.pod_resources) if req.HasField("pod_resources") else _NO_RESOURCES,
        RequestSource.PROXY,
    )
    # ContainerRequest(pod, name, container_id, attempt, annotations, envs, resources, cgroup_parent, source)
    return ContainerRequest(
        pod, meta.name, meta.id, meta.attempt, wire_map(req.container_annotations), wire_map(req.container_envs),
        resources_from_wire(req.container_resources) if req.HasField("container_resources") else _NO_RESOURCES,
        cgroup_parent, RequestSource.PROXY,
    )


# -- responses -----------------------------------------------------------------------------------
def echo_pod(req: pb.PodSandboxHookRequest) -> pb.PodSandboxHookResponse:
    """The response that changes nothing: labels, annotations, cgroup_parent and resources copied."""
    resp = pb.PodSandboxHookResponse(cgroup_parent=req.cgroup_parent)
    resp.labels.update(req.labels)
    resp.annotations.update(req.annotations)
    if req.HasField("resources"):
        resp.resources.CopyFrom(req.resources)
    return resp


def echo_container(req: pb.ContainerResourceHookRequest) -> pb.ContainerResourceHookResponse:
    """The response that changes nothing: annotations, resources, cgroup parent and envs copied."""
    resp = pb.ContainerResourceHookResponse(pod_cgroup_parent=req.pod_cgroup_parent)
    resp.container_annotations.update(req.container_annotations)
    resp.container_envs.update(req.container_envs)
    if req.HasField("container_resources"):
        resp.container_resources.CopyFrom(req.container_resources)
    return resp


def _fold(target: pb.LinuxContainerResources, produced: Resources) -> None:
    """Only values a hook set overwrite; everything else keeps the echoed request value."""
    if produced.cpu_shares is not None:
        target.cpu_shares = produced.cpu_shares
    if produced.cpu_quota_us is not None:
        target.cpu_quota = produced.cpu_quota_us
    if produced.memory_limit_bytes is not None:
        target.memory_limit_in_bytes = produced.memory_limit_bytes
    if produced.cpuset_cpus is not None:
        target.cpuset_cpus = produced.cpuset_cpus


def _produces(resources: Resources) -> bool:
    return (
        resources.cpu_shares is not None
        or resources.cpu_quota_us is not None
        or resources.memory_limit_bytes is not None
        or resources.cpuset_cpus is not None
    )


def pod_response(req: pb.PodSandboxHookRequest, produced: Resources) -> pb.PodSandboxHookResponse:
    """Echo, then the pod values. The dispatcher wrote the pod cgroup; the pod `resources` here are koordlet's
    `PodResponse.ProxyDone`: koord-runtime-proxy's CRI path ignores them, its docker path applies them to the
    sandbox container (so `cpuset_cpus`, the sandbox's cpuset from CPUSetAllocator, pins the pause container)."""
    resp = echo_pod(req)
    if _produces(produced):
        _fold(resp.resources, produced)  # touching the sub-message creates it when the request had none
    return resp


def container_response(
    req: pb.ContainerResourceHookRequest, produced: Resources, envs: Mapping[str, str]
) -> pb.ContainerResourceHookResponse:
    """Echo, then the container values and envs a hook produced (envs merged, hook keys win)."""
    resp = echo_container(req)
    if _produces(produced):
        _fold(resp.container_resources, produced)
    if envs:
        resp.container_envs.update(envs)
    return resp
