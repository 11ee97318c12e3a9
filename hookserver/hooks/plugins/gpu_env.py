"""GPUEnvInject: the GPUs koord-scheduler chose, and HAMi-core's limits, in a new container's environment.

koordlet's "gpu env inject" hook (`pkg/koordlet/runtimehooks/hooks/gpu/gpu.go`, PreCreateContainer only),
decided the same way from the pod's `scheduling.koordinator.sh/device-allocated` annotation
(`hookserver.koord_devices`):

* `NVIDIA_VISIBLE_DEVICES` = the allocated GPUs' minors, comma-separated, in the annotation's order, so
  nvidia-container-runtime exposes the GPUs the scheduler chose, not the ones a device plugin picked;
* with the pod label `koordinator.sh/gpu-isolation-provider: HAMi-core` and the first GPU's
  `koordinator.sh/gpu-memory-ratio` below 100 (a shared GPU): `CUDA_DEVICE_MEMORY_LIMIT` = that GPU's
  `koordinator.sh/gpu-memory` in bytes (Go's `Quantity.Value()`, printed as a plain integer, as koordlet does),
  `CUDA_DEVICE_SM_LIMIT` = its `koordinator.sh/gpu-core` when present, `LD_PRELOAD` = the HAMi-core library
  (`GpuEnvSettings.hami_core_library_path`, koordlet's `--hami-core-library-directory-path`, default
  `/usr/local/vgpu/libvgpu.so`), and two bind mounts (`rbind`): the library at its own path, and
  `/tmp/vgpulock` (HAMi issue 696: the lock directory must be shared by the node's containers);
* with `HamiCoreVGPUMonitor` on as well: `CUDA_DEVICE_MEMORY_SHARED_CACHE` =
  `<library dir>/<pod uid>_<container>.cache`, and the host directory `<library dir>/containers/<pod uid>_<container>`
  bind-mounted at `<library dir>`, so the cache file HAMi-core writes inside the container is the one the
  node's vGPU monitor reads. koordlet creates that host directory inside its hook (mode 0777); a hook here
  does no I/O, so the mount says `create_under` and the NRI door creates it before answering
  (`hookserver.executor.hostdirs`); a pod UID or container name that is not a Kubernetes one (it becomes a
  host path component) leaves the monitor's env and mount out, with the reason.

The doors. NRI carries envs, mounts and devices in its ContainerAdjustment. koord-runtime-proxy's
`ContainerResourceHookResponse` carries `container_envs` and no mounts: at the proxy door the envs are
injected and the audit reason says the HAMi-core mounts were not carried (the library then has to be in the
image at that path, or HAMi's device plugin has to mount it; koordlet through the proxy drops them silently).
The reconciler never runs PreCreateContainer: a running container's environment cannot be changed, so a
container created before the allocation (or while the gate was off) keeps what it has until it is recreated;
there is nothing to correct from outside it.

Malformed input: an annotation that does not decode, or a HAMi-core pod whose allocation lacks
`gpu-memory-ratio` or `gpu-memory` (koordlet's hook fails there), is a not-applied result whose reason
starts with `error:` and nothing is injected; the container is still created under either failure policy.
A minor this node does not have, or one that is unhealthy, is named in the reason (`warning:`) when the view
carries the node's GPU inventory (`NodeView.gpus`); the env is still what the scheduler chose, as koordlet
sets it, because the allocation, not the agent, is the source of truth for which GPU the pod holds.

`pure_decision`: the result depends on the pod (annotations, labels, uid, door), the container's name and
the view's GPU inventory, which `hookserver.hooks.memo` keys on.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.errors import AnnotationError
from hookserver.hooks.context import ContainerRequest, RequestSource
from hookserver.hooks.outcome import ContainerMount, HookResult
from hookserver.hooks.plugins.allocation_results import NO_ANNOTATION, allocation_error
from hookserver.hooks.settings import GpuEnvSettings
from hookserver.koord_devices import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_GPU,
    GPU_CORE,
    GPU_ISOLATION_HAMI_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    LABEL_GPU_ISOLATION_PROVIDER,
    DeviceAllocation,
    NodeGpu,
    cached_device_allocations,
)
from hookserver.view import NodeView

__all__ = [
    "ENV_CUDA_DEVICE_MEMORY_LIMIT",
    "ENV_CUDA_DEVICE_MEMORY_SHARED_CACHE",
    "ENV_CUDA_DEVICE_SM_LIMIT",
    "ENV_LD_PRELOAD",
    "ENV_NVIDIA_VISIBLE_DEVICES",
    "HAMI_VGPU_LOCK_DIR",
    "GPUEnvInjectPlugin",
    "GpuEnvSettings",
    "hami_cache_paths",
]

ENV_NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
ENV_CUDA_DEVICE_MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"
ENV_CUDA_DEVICE_SM_LIMIT = "CUDA_DEVICE_SM_LIMIT"
ENV_LD_PRELOAD = "LD_PRELOAD"
ENV_CUDA_DEVICE_MEMORY_SHARED_CACHE = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
# Said in every applied decision, so `hookctl explain` answers "why does my running container not have the new
# GPUs" without a reader knowing the hook API: no door can change a running process's environment.
FIXED_AT_CREATION = "set at container creation: a running container keeps this env until it is recreated"
HAMI_VGPU_LOCK_DIR = "/tmp/vgpulock"  # koordlet hard-codes it (HAMi issue 696)

_GATE_OFF = HookResult.skip("feature gate GPUEnvInject is off")
_SAFE_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")  # a Kubernetes UID (a UUID); no '.', no '/'
_SAFE_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")  # a DNS-1123 label: a container's name
_NO_GPU = HookResult.skip(f"{ANNOTATION_DEVICE_ALLOCATED} allocates no GPU")
_MEMO_MAX = 4096


def hami_cache_paths(library_path: str, pod_uid: str, container: str) -> tuple[str, str]:
    """(`CUDA_DEVICE_MEMORY_SHARED_CACHE` in the container, its host directory), koordlet's scheme."""
    lib_dir = posixpath.dirname(library_path)
    return f"{lib_dir}/{pod_uid}_{container}.cache", f"{lib_dir}/containers/{pod_uid}_{container}"


class GPUEnvInjectPlugin:
    name = "GPUEnvInject"
    feature_gate = "GPUEnvInject"
    pure_decision = True  # pod, container name and view.gpus only (see the module doc)

    def __init__(
        self, *, enabled: bool = True, vgpu_monitor: bool = False, settings: GpuEnvSettings | None = None
    ) -> None:
        self.enabled = enabled
        self.vgpu_monitor = vgpu_monitor
        self.settings = settings if settings is not None else GpuEnvSettings()
        lib = self.settings.hami_core_library_path
        self._memo: dict[tuple[object, ...], tuple[object, HookResult]] = {}
        self._hami_mounts = (
            ContainerMount(destination=lib, source=lib),
            # koordlet assumes the node has it; a runtime fails the container when a bind mount's source is
            # missing (found through a real containerd 1.7), so the NRI door creates it, like the cache dir.
            ContainerMount(destination=HAMI_VGPU_LOCK_DIR, source=HAMI_VGPU_LOCK_DIR,
                           create_under=posixpath.dirname(HAMI_VGPU_LOCK_DIR)),
        )

    def pre_create_container(self, request: ContainerRequest, view: NodeView) -> HookResult:
        if not self.enabled:
            return _GATE_OFF
        pod = request.pod
        text = pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
        if text is None:
            return NO_ANNOTATION
        # Decisions are kept by everything they read (quantities are exact fractions: ~10 us to recompute).
        gpus_view = view.gpus
        key = (text, pod.labels.get(LABEL_GPU_ISOLATION_PROVIDER), pod.uid, request.name, pod.source, id(gpus_view))
        known = self._memo.get(key)
        if known is not None and known[0] is gpus_view:
            return known[1]
        result = self._decide(request, view, text)
        if not result.reason.startswith("error:"):  # errors are decided afresh, as in batchresource
            if len(self._memo) >= _MEMO_MAX:
                self._memo.clear()  # a bound, not an LRU: a node runs a few hundred GPU containers
            self._memo[key] = (gpus_view, result)
        return result

    def _decide(self, request: ContainerRequest, view: NodeView, text: str) -> HookResult:
        pod = request.pod
        try:
            gpus = cached_device_allocations(text).get(DEVICE_GPU)
        except AnnotationError as exc:
            return allocation_error(str(exc), text)
        if not gpus:
            return _NO_GPU
        minors = ",".join(str(d.minor) for d in gpus)
        envs = {ENV_NVIDIA_VISIBLE_DEVICES: minors}
        inputs = {"device-allocated": text, "gpu_minors": minors}
        why = [f"GPUs {minors} from {ANNOTATION_DEVICE_ALLOCATED}"]
        mounts: tuple[ContainerMount, ...] = ()
        provider = pod.labels.get(LABEL_GPU_ISOLATION_PROVIDER)
        if provider == GPU_ISOLATION_HAMI_CORE:
            inputs[LABEL_GPU_ISOLATION_PROVIDER] = provider
            hami = self._hami(request, gpus[0], envs, inputs)
            if isinstance(hami, str):
                return allocation_error(hami, text)
            mounts, hami_why = hami
            why.append(hami_why)
        warning = _check_inventory(gpus, view.gpus)
        if warning:
            why.append(f"warning: {warning}")
        if mounts and pod.source is RequestSource.PROXY:
            why.append(
                "mounts not carried by the proxy door (koord-runtime-proxy's response has no mounts): "
                + ", ".join(m.destination for m in mounts)
            )
        why.append(FIXED_AT_CREATION)
        return HookResult(
            envs=MappingProxyType(envs), reason="; ".join(why), inputs=MappingProxyType(inputs), mounts=mounts,
        )

    def _hami(
        self, request: ContainerRequest, first: DeviceAllocation, envs: dict[str, str], inputs: dict[str, str]
    ) -> tuple[tuple[ContainerMount, ...], str] | str:
        """HAMi-core's envs and mounts into `envs`/`inputs`; the mounts and a reason, or an error text."""
        ratio = first.value(GPU_MEMORY_RATIO)
        if ratio is None:
            return f"HAMi-core pod: the first GPU's allocation has no {GPU_MEMORY_RATIO}"
        inputs[GPU_MEMORY_RATIO] = str(ratio)
        if ratio >= 100:
            return (), f"HAMi-core: {GPU_MEMORY_RATIO} {ratio} >= 100 (a whole GPU), no vGPU limits"
        memory = first.value(GPU_MEMORY)
        if memory is None:
            return f"HAMi-core pod: the first GPU's allocation has no {GPU_MEMORY}"
        lib = self.settings.hami_core_library_path
        envs[ENV_CUDA_DEVICE_MEMORY_LIMIT] = str(memory)
        core = first.value(GPU_CORE)
        if core is not None:
            envs[ENV_CUDA_DEVICE_SM_LIMIT] = str(core)
        envs[ENV_LD_PRELOAD] = lib
        mounts: tuple[ContainerMount, ...] = self._hami_mounts
        why = f"HAMi-core vGPU: memory {memory} bytes" + (f", SM {core}%" if core is not None else "")
        if self.vgpu_monitor:
            uid, name = request.pod.uid, request.name
            if not _SAFE_UID.fullmatch(uid) or not _SAFE_NAME.fullmatch(name):
                # Both become one path component on the host: a crafted name must not climb out of it.
                return mounts, why + f"; vGPU monitor cache left out: pod uid {uid!r} or container {name!r} " \
                    "is not a Kubernetes UID/name"
            cache, host_dir = hami_cache_paths(lib, uid, name)
            envs[ENV_CUDA_DEVICE_MEMORY_SHARED_CACHE] = cache
            inputs["hami_cache_host_dir"] = host_dir
            mounts = (*mounts, ContainerMount(
                destination=posixpath.dirname(lib), source=host_dir, create_under=posixpath.dirname(host_dir),
            ))
            why += f"; vGPU monitor cache {cache} (host {host_dir})"
        return mounts, why


def _check_inventory(gpus: tuple[DeviceAllocation, ...], inventory: Mapping[int, NodeGpu] | None) -> str:
    if inventory is None:
        return ""
    problems: list[str] = []
    for d in gpus:
        gpu = inventory.get(d.minor)
        if gpu is None:
            problems.append(f"minor {d.minor} is not a GPU of this node")
        elif not gpu.healthy:
            problems.append(f"minor {d.minor} ({gpu.uuid}) is unhealthy: {gpu.reason or 'no reason given'}")
    return "; ".join(problems)
