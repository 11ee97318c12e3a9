"""CPUSetAllocator: containers' cpusets from koord-scheduler's allocation, LS containers in the share pool.

koordlet's hook (`pkg/koordlet/runtimehooks/hooks/cpuset/{cpuset,rule}.go`), decided the same way:

* a pod whose `scheduling.koordinator.sh/resource-status` names a `cpuset` (koord-scheduler writes it for
  LSE and LSR pods) gets exactly those CPUs in every container, init containers included (koordlet's hook runs
  on every CreateContainer and its reconciler on every container status, init ones too), and its CFS quota
  unset (-1, pod and containers: koordinator#489, throttling inside an exclusive cpuset is pure loss) unless
  `hook.disable_unset_cpu_quota` (koordlet's `--disable-unset-cpu-quota`) is set;
* LS pods, SYSTEM pods (the node's system-qos cpuset when it has one) and pods without a QoS label outside the
  kubelet's besteffort tier get the LS share pool: every online CPU minus the bound ones, the node's reserved
  CPUs and exclusive SYSTEM CPUs (`hookserver.topology.pools`, the pool the NRT report publishes);
* BE containers are left alone: CPU suppress owns every BE cpuset (`qos/framework/knobs.py`);
* the pod's sandbox (pause) container gets its cpuset by the same rule at PreRunPodSandbox (koordlet sets it from
  its reconciler's sandbox level, `RegisterCgroupReconciler(SandboxLevel, ...)`, and its pod response's CPUSet
  goes into the proxy's answer). The pod-level `cpuset_cpus` is the sandbox's: the proxy's response carries it,
  and the dispatcher (NRI, where the runtime told the sandbox ID) and the reconciler write it to the sandbox's
  cgroup (`hookserver.executor.plan.pod_level_writes`), never to the pod cgroup;
* host applications (NodeSLO `hostApplications`): `host_app` gives an LS one the LS share pool, koordlet's
  `getHostAppCpuset`, which refuses every other class; the reconciler writes it on its ticker.

A resource-status that does not decode, or names CPUs this node does not have online, is an error the audit
shows (`hookctl explain`) but not a hook failure: the container is still created, unpinned, under either
failure policy, because a runtime that refuses the container helps nobody and the kernel would refuse the
cpuset anyway. An LSE/LSR pod without a cpuset gets the share pool (koordlet's rule for an unbound pod under
the kubelet's `none` policy) and the audit says it was not bound.

Not `pure_decision`: the share pool depends on the other pods. The pools are computed once per store pod map
and node (identity), so a call costs a dict lookup and a small join.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType

from hookserver.hooks.context import ContainerRequest, PodRequest, QoSClass, Resources
from hookserver.hooks.outcome import HookResult
from hookserver.slo import HostApplicationSpec
from hookserver.system.cpulist import format_cpu_list
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS, CpuPools, ResourceStatusError, compute_pools, pod_cpuset
from hookserver.view import NodeView

__all__ = ["CPUSetAllocatorPlugin"]

_GATE_OFF = HookResult.skip("feature gate CPUSetAllocator is off")
_BE = HookResult.skip("BE container: its cpuset is CPU suppress's")
_BE_SANDBOX = HookResult.skip("BE pod: its sandbox's cpuset is CPU suppress's, and its quota BatchResource's")
_EMPTY: Mapping[str, str] = MappingProxyType({})


class CPUSetAllocatorPlugin:
    name = "CPUSetAllocator"
    feature_gate = "CPUSetAllocator"
    pure_decision = False  # the LS share pool depends on every pod's allocation

    def __init__(
        self, *, enabled: bool = True, cpus: tuple[CpuInfo, ...] = (), unset_cpu_quota: bool = True,
        kubelet_allocated: Callable[[], frozenset[int]] | None = None,
    ) -> None:
        """`kubelet_allocated`: the CPUs the kubelet's static CPU manager gave guaranteed containers (the NRT
        publisher's latest read of `cpu_manager_state`); they leave both share pools, as in the NRT report, so
        an LS or BE container is never pinned onto a CPU the kubelet gave away."""
        self.enabled = enabled
        self._kubelet_allocated: Callable[[], frozenset[int]] = kubelet_allocated or frozenset  # none: empty
        self.cpus = cpus
        self.unset_cpu_quota = unset_cpu_quota
        self._online = frozenset(c.cpu for c in cpus if c.online)
        self._lock = threading.Lock()
        self._memo: tuple[object, object, frozenset[int], CpuPools] | None = None
        self._pool_results: tuple[CpuPools, dict[tuple[QoSClass, str], HookResult]] | None = None

    # -- pools ----------------------------------------------------------------------------------
    def pools(self, view: NodeView) -> CpuPools:
        """The pools for this view's pods and node, computed once per (pod map, node) identity."""
        memo = self._memo
        allocated = self._kubelet_allocated()
        if memo is not None and memo[0] is view.pods and memo[1] is view.node and (memo[2] is allocated or memo[2] == allocated):
            return memo[3]
        annotations = view.node.annotations if view.node is not None else _EMPTY
        pools = compute_pools(self.cpus, view.pods, annotations, kubelet_allocated=allocated)
        with self._lock:
            self._memo = (view.pods, view.node, allocated, pools)
        return pools

    # -- host applications ----------------------------------------------------------------------
    def host_app(self, app: HostApplicationSpec, view: NodeView) -> HookResult:
        """koordlet's `SetHostAppCPUSet` / `getHostAppCpuset`: an LS host application gets the LS share pool (the
        CPUs no koord-scheduler-bound pod holds); any other class is refused there ("only LS is supported"), so
        it is a not-applied result here, and nothing is written."""
        if not self.enabled:
            return _GATE_OFF
        if app.qos != "LS":
            return _error(f"host application {app.name!r} is {app.qos}: only LS is supported (koordlet's rule)",
                          "its cpuset left alone")
        if not self._online:
            return HookResult.skip("node CPU topology unknown: no share pool to pin to")
        cpus = self.pools(view).ls_cpus
        if not cpus:
            return _error("the LS share pool is empty (every CPU bound or reserved)", "its cpuset left alone")
        text = format_cpu_list(cpus)
        return HookResult(resources=Resources(cpuset_cpus=text), reason=f"LS host application {app.name}: LS share pool -> cpuset {text}",
                          inputs=MappingProxyType({"share_pool": text}))

    # -- stages ---------------------------------------------------------------------------------
    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        """The sandbox (pause) container's cpuset by the containers' rule, and the pod quota unset for a bound
        pod. The pod-level `cpuset_cpus` is the sandbox's, never the pod cgroup's (koordlet's `PodResponse`):
        the proxy's response carries it (koord-runtime-proxy's docker path applies it to the sandbox), and the
        dispatcher and the reconciler write it to the sandbox's cgroup where they can name it."""
        if not self.enabled:
            return _GATE_OFF
        return self._pinned(request, request.cgroup_parent, "", view, "sandbox")

    def pre_create_container(self, request: ContainerRequest, view: NodeView) -> HookResult:
        return self._container(request, view)

    def pre_update_container_resources(self, request: ContainerRequest, view: NodeView) -> HookResult:
        return self._container(request, view)

    def _container(self, request: ContainerRequest, view: NodeView) -> HookResult:
        if not self.enabled:
            return _GATE_OFF
        parent = request.cgroup_parent or request.pod.cgroup_parent
        return self._pinned(request.pod, parent, request.resources.cpuset_cpus or "", view, "container")

    def _pinned(self, pod: PodRequest, parent: str, kubelet_cpuset: str, view: NodeView, what: str) -> HookResult:
        """koordlet's `getContainerCPUSet` for one container (`what`: "container" or "sandbox") of `pod`."""
        qos = QoSClass.from_labels(pod.labels)
        if qos is QoSClass.BE:
            return _BE if what == "container" else _BE_SANDBOX
        try:
            bound = pod_cpuset(pod.annotations)
        except ResourceStatusError as exc:
            return _error(str(exc), f"{what} left unpinned")
        if bound:
            return self._bound(pod, qos, bound, what)
        if qos is QoSClass.NONE and "besteffort" in parent:  # koordlet's `GetKubeQoSByCgroupParent`
            return HookResult.skip(f"kube-BestEffort pod without a QoS label: its {what}'s cpuset is CPU suppress's")
        if qos is QoSClass.NONE and kubelet_cpuset:
            return HookResult.skip("the kubelet chose this container's cpuset (static CPU manager): kept")
        if not self._online:
            return HookResult.skip("node CPU topology unknown: no share pool to pin to")
        return self._pool_result(self.pools(view), qos, what)

    def _pool_result(self, pools: CpuPools, qos: QoSClass, what: str) -> HookResult:
        """The share-pool result for a class, made once per pools object: a pod's sandbox and each of its
        containers (and every other pod of the class until the pools change) get the same frozen result."""
        memo = self._pool_results
        if memo is None or memo[0] is not pools:
            memo = self._pool_results = (pools, {})
        result = memo[1].get((qos, what))
        if result is None:
            result = memo[1][(qos, what)] = self._share_pool(pools, qos, what)
        return result

    def _share_pool(self, pools: CpuPools, qos: QoSClass, what: str) -> HookResult:
        if qos is QoSClass.SYSTEM and pools.system:
            cpus, why = pools.system, f"SYSTEM {what}: the node's system-qos cpuset"
        else:
            cpus = pools.ls_cpus
            why = _share_pool_why(qos, pools, what)
        if not cpus:
            return _error("the LS share pool is empty (every CPU bound or reserved)", f"{what} left unpinned")
        text = format_cpu_list(cpus)
        inputs = {"share_pool": text}
        if qos in (QoSClass.LSE, QoSClass.LSR):
            inputs["error"] = f"{qos.value} pod without a cpuset in {ANNOTATION_RESOURCE_STATUS}: not bound by koord-scheduler"
            why = f"{qos.value} pod not bound (no cpuset in its resource-status): share pool, as koordlet does"
        return HookResult(
            resources=Resources(cpuset_cpus=text),
            reason=f"{why} -> cpuset {text}",
            inputs=MappingProxyType(inputs),
        )

    def _bound(self, pod: PodRequest, qos: QoSClass, bound: frozenset[int], what: str) -> HookResult:
        text = format_cpu_list(bound)
        if self._online and not bound <= self._online:
            missing = format_cpu_list(bound - self._online)
            return _error(
                f"{ANNOTATION_RESOURCE_STATUS} cpuset {text} names CPUs this node does not have online ({missing}; "
                f"online {format_cpu_list(self._online)})",
                f"{what} left unpinned",
            )
        quota = -1 if self.unset_cpu_quota else None
        quota_why = "CFS quota unset (-1)" if quota == -1 else "CFS quota kept (hook.disable_unset_cpu_quota)"
        where = "sandbox cpuset" if what == "sandbox" else "cpuset"
        if what == "sandbox":
            quota_why = f"pod {quota_why}" + (", koordinator#489" if quota == -1 else "")
        return HookResult(
            resources=Resources(cpuset_cpus=text, cpu_quota_us=quota),
            reason=f"{qos.value or 'unlabelled'} pod bound by koord-scheduler: {where} {text} from resource-status; {quota_why}",
            inputs=MappingProxyType({"resource-status": pod.annotations.get(ANNOTATION_RESOURCE_STATUS, "")}),
        )


def _share_pool_why(qos: QoSClass, pools: CpuPools, what: str) -> str:
    parts = [f"online {format_cpu_list(pools.online)}"]
    bound = frozenset().union(*(c for _, c in pools.exclusive.values()))
    if bound:
        parts.append(f"minus bound {format_cpu_list(bound)} ({len(pools.exclusive)} pods)")
    if pools.reserved:
        parts.append(f"minus reserved {format_cpu_list(pools.reserved)}")
    if pools.system:
        parts.append(f"minus system-qos {format_cpu_list(pools.system)}")
    return f"{qos.value or 'unlabelled'} {what}: LS share pool ({', '.join(parts)})"


def _error(message: str, consequence: str) -> HookResult:
    """Not applied, and said loudly: the audit's reason starts with `error:`; the container is still created."""
    return HookResult(applied=False, reason=f"error: {message}; {consequence}", inputs=MappingProxyType({"error": message}))
