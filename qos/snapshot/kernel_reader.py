"""Reads `KernelFacts` once per round, before any planner runs (all part-2 I/O happens here).

Only what an enabled feature needs is read: container CFS files for CPU burst, task ids for resctrl (every
pod's for the class-level groups, annotated pods' for the pod-level ones),
sysctls for system config, block devices for blkio. A missing or unreadable file is None / absent, never
an exception: planners say "unsupported" or skip. Each part that cannot be read is logged once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from hookserver.aio.hotgate import paced
from hookserver.slo.model import NodeSLOSpec
from hookserver.store.originals import NodeOriginals
from hookserver.store.records import PodRecord, named_containers_by_pod, started_containers
from hookserver.store.specs import container_spec
from hookserver.store.state import StoreSnapshot
from hookserver.store.timeseries import TimeSeriesStore
from hookserver.system.cgroupnames import (
    ContainerRuntime,
    KubeQoS,
    container_dir_name,
    kube_qos_of_status,
    normalize_cgroup_dir,
    pod_dir,
    qos_dir,
    runtime_of,
    strip_runtime_prefix,
)
from hookserver.errors import SystemFileError
from hookserver.system.files import read_text as _read_text

from qos.snapshot.cgroups import CgroupView
from qos.snapshot.kernel import (
    NODE_SETTINGS,
    BlockDevice,
    ContainerKernel,
    CoreSchedFacts,
    KernelFacts,
    OOMFacts,
    PodKernel,
    ResctrlFacts,
    SysctlFacts,
    TcFacts,
)
from qos.snapshot.node import quantity_or_zero
from qos.snapshot.oom_reader import ORIGINALS_SECTION, read_oom_facts
from qos.snapshot.coresched_reader import CoreSchedReader
from qos.snapshot.tc_reader import TC_SECTION, TcReader
from qos.snapshot.pod_resctrl_reader import ANNOTATION_POD_RESCTRL, POD_GROUPS_SECTION, with_pod_groups

__all__ = [
    "BATCH_MEMORY",
    "OPTIONAL_CGROUP_FILES",
    "RESCTRL_GROUPS",
    "KernelReader",
    "read_resctrl",
    "resolve_block_device",
]

log = logging.getLogger(__name__)

BATCH_MEMORY = "kubernetes.io/batch-memory"
BATCH_CPU = "kubernetes.io/batch-cpu"
CONTAINER_THROTTLED = "container_cpu_throttled_ratio"
CONTAINER_CPU = "container_cpu_usage"
CONTAINER_MEMORY = "container_memory_usage"
ANNOTATION_CPU_BURST = "koordinator.sh/cpuBurst"  # qos.cpu_burst.ANNOTATION_CPU_BURST
# koordlet's group names (resctrl dirs under the root).
RESCTRL_GROUPS = ("LSR", "LS", "BE")
# Optional files probed once at the kubepods dir (their presence depends on the kernel).
OPTIONAL_CGROUP_FILES = (
    ("cpu", "cpu.cfs_burst_us", "cpu.max.burst"),
    ("cpu", "cpu.bvt_warp_ns", "cpu.bvt_warp_ns"),
    ("cpu", "cpu.idle", "cpu.idle"),
    ("memory", "memory.min", "memory.min"),
    ("memory", "memory.low", "memory.low"),
    ("memory", "memory.high", "memory.high"),
    ("memory", "memory.wmark_ratio", "memory.wmark_ratio"),
    ("memory", "memory.wmark_scale_factor", "memory.wmark_scale_factor"),
    ("memory", "memory.wmark_min_adj", "memory.wmark_min_adj"),
    ("memory", "memory.priority", "memory.priority"),
    ("memory", "memory.use_priority_oom", "memory.use_priority_oom"),
    ("memory", "memory.oom.group", "memory.oom.group"),
    ("blkio", "blkio.throttle.read_bps_device", "io.max"),
    ("blkio", "blkio.cost.weight", "io.weight"),
    ("blkio", "blkio.cost.qos", "io.cost.qos"),
    ("blkio", "blkio.cost.model", "io.cost.model"),
)
# iocost's qos and model live at the hierarchy root only.
ROOT_ONLY = frozenset({"blkio.cost.qos", "blkio.cost.model"})


def read_text(path: str) -> str | None:
    """A kernel file's text; None when missing or unreadable (EACCES, EIO: logged once per path)."""
    try:
        return _read_text(path)
    except SystemFileError as exc:
        if path not in _LOGGED:
            _LOGGED.add(path)
            log.warning("qos: cannot read %s: %s", path, exc)
        return None


_LOGGED: set[str] = set()
PERIOD_TTL_S = 60.0
BURST_LINGER_S = 120.0


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    token = text.strip().split()[0] if text.strip() else ""
    if token == "max":
        return -1
    try:
        return int(token)
    except ValueError:
        return None


def _quantity(values: Mapping[str, str], key: str, *, milli: bool) -> int:
    return max(quantity_or_zero(values, key, milli=milli), 0)


def resolve_block_device(sys_root: str, name: str, kind: str) -> BlockDevice:
    """`maj:min` of a NodeSLO block: a device (`/dev/vdb` or `vdb`), or a volume group (the disk under its
    first logical volume, as koordlet resolves it from the VG's physical volume)."""
    block = os.path.join(sys_root, "class", "block")
    if kind == "device":
        base = os.path.basename(name.rstrip("/"))
        devno = (read_text(os.path.join(block, base, "dev")) or "").strip()
        if not devno:
            return BlockDevice(name, kind, problem=f"no block device {base!r} under {block}")
        return BlockDevice(name, kind, devno=devno)
    if kind == "volumegroup":
        try:
            entries = sorted(os.listdir(block))
        except OSError as exc:
            return BlockDevice(name, kind, problem=f"cannot list {block}: {exc.strerror}")
        prefix = name.replace("-", "--") + "-"
        for entry in entries:
            dm_name = (read_text(os.path.join(block, entry, "dm", "name")) or "").strip()
            if not dm_name.startswith(prefix):
                continue
            try:
                slaves = sorted(os.listdir(os.path.join(block, entry, "slaves")))
            except OSError:
                slaves = []
            for slave in slaves:
                disk = slave
                if os.path.exists(os.path.join(block, slave, "partition")):
                    parent = os.path.basename(os.path.dirname(os.path.realpath(os.path.join(block, slave))))
                    disk = parent or slave
                devno = (read_text(os.path.join(block, disk, "dev")) or "").strip()
                if devno:
                    return BlockDevice(name, kind, devno=devno)
        return BlockDevice(name, kind, problem=f"no logical volume of volume group {name!r} found under {block}")
    if kind == "podvolume":
        return BlockDevice(name, kind, problem=f"{kind} blocks need the PVC to device map; not supported by this agent")
    return BlockDevice(name, kind, problem=f"block type {kind!r} is not supported (koordlet skips it too)")


def read_resctrl(root: str, proc_root: str, *, created: frozenset[str] = frozenset()) -> ResctrlFacts:
    """The resctrl filesystem at `root` (normally /sys/fs/resctrl)."""
    if not os.path.isdir(root) or read_text(os.path.join(root, "schemata")) is None:
        return ResctrlFacts(problem=f"resctrl is not mounted at {root} (mount -t resctrl resctrl {root})")
    info = os.path.join(root, "info")
    mask = (read_text(os.path.join(info, "L3", "cbm_mask")) or "").strip()
    cbm_bits = 0
    if mask:
        try:
            cbm_bits = int(mask, 16).bit_length()
        except ValueError:
            cbm_bits = 0
    mba = os.path.isdir(os.path.join(info, "MB"))
    cat = cbm_bits > 0
    if not cat and not mba:
        return ResctrlFacts(root_exists=True, problem=f"{info} offers neither L3 CAT nor MBA: this CPU or kernel has no RDT allocation")
    l3: tuple[str, ...] = ()
    mb: tuple[str, ...] = ()
    for line in (read_text(os.path.join(root, "schemata")) or "").splitlines():
        name, _, rest = line.strip().partition(":")
        domains = tuple(item.split("=", 1)[0].strip() for item in rest.split(";") if "=" in item)
        if name.strip() == "L3":
            l3 = domains
        elif name.strip() == "MB":
            mb = domains
    cpuinfo = read_text(os.path.join(proc_root, "cpuinfo")) or ""
    vendor = "amd" if "AuthenticAMD" in cpuinfo or "HygonGenuine" in cpuinfo else "intel"
    groups: dict[str, str] = {}
    tasks: dict[str, frozenset[int]] = {}
    for group in RESCTRL_GROUPS:
        gdir = os.path.join(root, group)
        if not os.path.isdir(gdir):
            continue
        groups[group] = (read_text(os.path.join(gdir, "schemata")) or "").strip()
        tasks[group] = frozenset(int(t) for t in (read_text(os.path.join(gdir, "tasks")) or "").split() if t.isdigit())
    return ResctrlFacts(
        root_exists=True, cat=cat and bool(l3), mba=mba and bool(mb), cbm_bits=cbm_bits,
        min_cbm_bits=_int(read_text(os.path.join(info, "L3", "min_cbm_bits"))) or 1,
        num_closids=_int(read_text(os.path.join(info, "L3", "num_closids")))
        or _int(read_text(os.path.join(info, "MB", "num_closids"))) or 0,
        l3_domains=l3, mb_domains=mb,
        mba_min=_int(read_text(os.path.join(info, "MB", "min_bandwidth"))) or 10,
        mba_gran=_int(read_text(os.path.join(info, "MB", "bandwidth_gran"))) or 10,
        vendor=vendor, groups=MappingProxyType(groups), group_tasks=MappingProxyType(tasks), created=created,
    )


class KernelReader:
    """Implements `qos.readers.KernelSource`. `enabled(gate)` says which features are on (the runner's gates)."""

    def __init__(
        self,
        view: CgroupView,
        *,
        runtime: ContainerRuntime = ContainerRuntime.CONTAINERD,
        proc_root: str = "/proc",
        sys_root: str = "/sys",
        resctrl_root: str = "",
        originals: NodeOriginals | None = None,
        enabled: Callable[[str], bool] = lambda gate: True,
        tc: TcReader | None = None,
        core_sched: CoreSchedReader | None = None,
    ) -> None:
        self.view = view
        self.tc = tc or TcReader(proc_root=proc_root)
        self.core_sched = core_sched or CoreSchedReader(sys_root=sys_root)
        self.runtime = runtime
        self.proc_root = proc_root
        self.sys_root = sys_root
        self.resctrl_root = resctrl_root or os.path.join(sys_root, "fs", "resctrl")
        self.originals = originals or NodeOriginals("")
        self._enabled = enabled
        self.tiers = MappingProxyType({
            "kubepods": qos_dir(view.driver, KubeQoS.GUARANTEED),
            "burstable": qos_dir(view.driver, KubeQoS.BURSTABLE),
            "besteffort": qos_dir(view.driver, KubeQoS.BESTEFFORT),
        })
        self._files: frozenset[str] | None = None
        self._be_recorded = False
        self._burst_until: float | None = None
        self._periods: dict[str, tuple[int, float]] = {}
        self._devices: tuple[tuple[tuple[str, str], ...], tuple[BlockDevice, ...]] | None = None

    def enabled(self, gate: str) -> bool:
        """A gate the runner does not know (its reconciler is not registered) counts as off."""
        try:
            return bool(self._enabled(gate))
        except KeyError:
            return False

    # -- pieces ------------------------------------------------------------------------------------
    def cgroup_files(self) -> frozenset[str]:
        """Optional files the kernel offers at the kubepods dir, by v1 name. Probed until the dir exists."""
        if self._files is not None:
            return self._files
        found: set[str] = set()
        kubepods = self.tiers["kubepods"]
        probed = False
        for subsystem, v1, v2 in OPTIONAL_CGROUP_FILES:
            base = os.path.join(self.view.hierarchy_root(subsystem), kubepods)
            if not os.path.isdir(base):
                continue
            probed = True
            if v1 in ROOT_ONLY:
                base = self.view.hierarchy_root(subsystem)
            if os.path.exists(os.path.join(base, v2 if self.view.v2 else v1)):
                found.add(v1)
        result = frozenset(found)
        if probed:
            self._files = result
        return result

    def _net_cls_root(self) -> str:
        """The net_cls hierarchy (cgroup v1 only: v2 has no net_cls), "" when the node has none."""
        if self.view.v2:
            return ""
        root = self.view.hierarchy_root("net_cls")
        return root if os.path.isfile(os.path.join(root, "net_cls.classid")) else ""

    def _pod_dir(self, pod: PodRecord) -> str:
        try:
            if pod.cgroup_parent:
                return normalize_cgroup_dir(pod.cgroup_parent)
            kube = kube_qos_of_status(pod.kube_qos)
            return pod_dir(self.view.driver, kube, pod.uid) if kube is not None else ""
        except Exception:  # noqa: BLE001 - a crafted parent or uid: no directory, never a crash
            return ""

    def _cfs(self, rel: str, *, container: bool = True) -> tuple[int | None, int, int | None]:
        root = self.view.hierarchy_root("cpu")
        if self.view.v2:
            raw = read_text(os.path.join(root, rel, "cpu.max"))
            quota = period = None
            if raw is not None and raw.split():
                fields = raw.split()
                quota = _int(fields[0])
                period = _int(fields[1]) if len(fields) > 1 else None
            burst = _int(read_text(os.path.join(root, rel, "cpu.max.burst")))
            return quota, period or 100_000, burst
        quota = _int(read_text(os.path.join(root, rel, "cpu.cfs_quota_us")))
        if not container:
            return quota, 100_000, None
        # The period is set once (kubelet's --cpu-cfs-quota-period) and almost never changes: re-read a minute.
        cached = self._periods.get(rel)
        now = time.monotonic()
        if cached is not None and now - cached[1] < PERIOD_TTL_S:
            period = cached[0]
        else:
            period = _int(read_text(os.path.join(root, rel, "cpu.cfs_period_us"))) or 100_000
            self._periods[rel] = (period, now)
        burst = _int(read_text(os.path.join(root, rel, "cpu.cfs_burst_us")))
        return quota, period, burst

    def _tasks(self, rel: str) -> frozenset[int]:
        name = "cgroup.threads" if self.view.v2 else "tasks"
        text = read_text(os.path.join(self.view.hierarchy_root("cpu"), rel, name)) or ""
        return frozenset(int(t) for t in text.split() if t.isdigit())

    def _pods(self, snap: StoreSnapshot, series: TimeSeriesStore, now: float, *, cfs: bool,
              tasks: Callable[[PodRecord], bool]) -> dict[str, PodKernel]:
        throttled = {dict(k.labels).get("container", ""): v for k, ts, v, _ in series.latest(CONTAINER_THROTTLED) if ts >= now - 5}
        usage = {dict(k.labels).get("container", ""): v for k, ts, v, _ in series.latest(CONTAINER_CPU) if ts >= now - 5}
        memory = {dict(k.labels).get("container", ""): v for k, ts, v, _ in series.latest(CONTAINER_MEMORY) if ts >= now - 5}
        by_pod = named_containers_by_pod(snap.containers.values())
        out: dict[str, PodKernel] = {}
        for pod in paced(snap.pods.values()):  # the hot gate: step aside between pods
            if pod.deletion_timestamp or pod.phase in ("Succeeded", "Failed"):
                continue
            pdir = self._pod_dir(pod)
            if not pdir:
                continue
            be = (pod.qos_class or ("BE" if pod.kube_qos.lower() == "besteffort" else "")) == "BE"
            pod_tasks = tasks(pod)
            containers: list[ContainerKernel] = []
            for c in started_containers(pod, by_pod.get(pod.uid, [])):
                try:
                    name = container_dir_name(self.view.driver, runtime_of(c.id, self.runtime), c.id)
                except Exception:  # noqa: BLE001 - a crafted id: skip this container
                    continue
                cdir = f"{pdir}/{name}"
                spec = container_spec(pod, c.name, c)  # the pod spec, else what the runtime announced
                requests, limits = spec.requests, spec.limits
                if be:
                    cpu_limit = _quantity(limits, BATCH_CPU, milli=False)
                    mem_req = _quantity(requests, BATCH_MEMORY, milli=False)
                    mem_lim = _quantity(limits, BATCH_MEMORY, milli=False)
                else:
                    cpu_limit = _quantity(limits, "cpu", milli=True)
                    mem_req = _quantity(requests, "memory", milli=False)
                    mem_lim = _quantity(limits, "memory", milli=False)
                quota, period, burst = self._cfs(cdir) if cfs else (None, 100_000, None)
                containers.append(ContainerKernel(
                    id=c.id, name=c.name, dir=cdir, cpu_limit_milli=cpu_limit, memory_request_bytes=mem_req,
                    memory_limit_bytes=mem_lim, quota_us=quota, period_us=period, burst_us=burst,
                    # the collectors label containers by the bare ID
                    throttled_ratio=throttled.get(strip_runtime_prefix(c.id)),
                    cpu_usage_cores=usage.get(strip_runtime_prefix(c.id)),
                    memory_usage_bytes=memory.get(strip_runtime_prefix(c.id)),
                    tasks=self._tasks(cdir) if pod_tasks else frozenset(),
                ))
            quota, period, _ = self._cfs(pdir, container=False) if cfs else (None, 100_000, None)
            limited = bool(containers) and all(c.cpu_limit_milli > 0 for c in containers)
            mem_limited = bool(containers) and all(c.memory_limit_bytes > 0 for c in containers)
            out[pod.uid] = PodKernel(
                uid=pod.uid, dir=pdir, containers=tuple(containers), quota_us=quota, period_us=period,
                cpu_limit_milli=sum(c.cpu_limit_milli for c in containers) if limited else 0,
                memory_request_bytes=sum(c.memory_request_bytes for c in containers),
                memory_limit_bytes=sum(c.memory_limit_bytes for c in containers) if mem_limited else 0,
            )
        if len(self._periods) > 4 * max(len(out), 64):
            self._periods.clear()
        return out

    def sysctl(self) -> SysctlFacts:
        values: dict[str, int | None] = {}
        for name, (root, rel) in NODE_SETTINGS.items():
            base = os.path.join(self.proc_root, "sys") if root == "proc_sys" else self.sys_root
            values[name] = _int(read_text(os.path.join(base, rel)))
        total = 0
        for line in (read_text(os.path.join(self.proc_root, "meminfo")) or "").splitlines():
            if line.startswith("MemTotal:"):
                total = _int(line.split(":", 1)[1]) or 0
                break
        return SysctlFacts(mem_total_kib=total, values=MappingProxyType(values),
                           originals=self.originals.section("sysctl"))

    def devices(self, slo: NodeSLOSpec) -> tuple[BlockDevice, ...]:
        """The NodeSLO's blocks (every class), resolved; cached while the configured names stay the same."""
        wanted: list[tuple[str, str]] = []
        strategy = slo.resource_qos_strategy
        for cls in (strategy.lsr_class, strategy.ls_class, strategy.be_class):
            for block in cls.blkio_qos.blocks:
                if (block.name, block.type) not in wanted:
                    wanted.append((block.name, block.type))
        key = tuple(wanted)
        if self._devices is not None and self._devices[0] == key:
            return self._devices[1]
        resolved = tuple(resolve_block_device(self.sys_root, name, kind) for name, kind in wanted)
        for dev in resolved:
            if dev.problem:
                log.warning("blkio: block %s (%s): %s", dev.name, dev.type, dev.problem)
        self._devices = (key, resolved)
        return resolved

    def record_be_tier(self) -> None:
        """Before CPU suppress first narrows the BE tier, keep what its quota and cpuset were (state dir),
        for `hookserver cleanup`. Recorded at first sight, once: a later agent keeps the first record."""
        if self._be_recorded:
            return
        tier = self.tiers["besteffort"]
        files = (("cpu", "cpu.max" if self.view.v2 else "cpu.cfs_quota_us"), ("cpuset", "cpuset.cpus"))
        done = True
        for subsystem, name in files:
            root = self.view.hierarchy_root(subsystem)
            text = read_text(os.path.join(root, tier, name))
            if self.view.v2 and text is not None and not text.strip() and name == "cpuset.cpus":
                # v2: empty means "inherits the parent's CPUs", a state `hookserver cleanup` can restore by
                # writing it empty again. Recording nothing here let the first round's own write be taken
                # for the original (a real v2 node kept the agent's pin after cleanup).
                done = self._record_original(f"{subsystem}:{tier}/{name}", "") and done
                continue
            if text is not None and not text.strip() and name == "cpuset.cpus":
                # An empty cpuset (a v1 cpuset cgroup made without cpus) can never be written back: what the
                # tier could run on is what its parent allows.
                text = read_text(os.path.join(root, os.path.dirname(tier), name))
            if text is None or (name == "cpuset.cpus" and not text.strip()):
                done = False
                continue
            done = self._record_original(f"{subsystem}:{tier}/{name}", text.strip()) and done
        self._be_recorded = done

    def _record_original(self, key: str, value: str) -> bool:
        """Keep one BE tier file's original for cleanup; False when the state dir cannot be written."""
        try:
            self.originals.record("cgroup", key, value)
        except OSError as exc:
            log.warning("qos: cannot record the BE tier's %s in the state dir: %s", key, exc)
            return False
        return True

    # -- the facts -------------------------------------------------------------------------------
    def read(self, snap: StoreSnapshot, series: TimeSeriesStore, now: float, *, replay_gate: str = "") -> KernelFacts:
        """`replay_gate`: a `hookctl qos plan` replay of that gate's reconciler, which reads what the reconciler
        needs as if its gate were on and the NodeSLO asked for it (the replay may plan under another --slo)."""
        slo = snap.node_slo if isinstance(snap.node_slo, NodeSLOSpec) else NodeSLOSpec.model_validate({})
        # CPUBurst and RdtResctrl are on by default: read their per-container files only when the NodeSLO
        # (or a pod annotation) asks for them, so a node that uses neither pays nothing per round.
        strategy = slo.resource_qos_strategy
        # After the policy turns to none (and for a while after start), keep reading, so the reset to base
        # quota and zero burst can see what to undo.
        burst_wanted = slo.cpu_burst_strategy.policy != "none" or any(
            ANNOTATION_CPU_BURST in p.annotations for p in snap.pods.values()
        )
        if burst_wanted or self._burst_until is None:
            self._burst_until = now + BURST_LINGER_S
        burst = replay_gate == "CPUBurst" or (self.enabled("CPUBurst") and (burst_wanted or now < self._burst_until))
        resctrl_wanted = replay_gate == "RdtResctrl" or any(
            c.resctrl_qos.enable for c in (strategy.lsr_class, strategy.ls_class, strategy.be_class))
        resctrl_on = self.enabled("RdtResctrl") or replay_gate == "RdtResctrl"
        read = {"pods"}
        if self.enabled("BECPUSuppress"):
            self.record_be_tier()
        resctrl = ResctrlFacts()
        created = frozenset(self.originals.section("resctrl_groups"))
        # The pod-level groups (gate Resctrl): read when on, or while groups it created are left to remove.
        pod_groups_on = self.enabled("Resctrl") or replay_gate == "Resctrl"
        pod_created = frozenset(self.originals.section(POD_GROUPS_SECTION))
        if resctrl_on or created or pod_groups_on or pod_created:
            resctrl = read_resctrl(self.resctrl_root, self.proc_root, created=created)
            if pod_groups_on or pod_created:
                resctrl = with_pod_groups(resctrl, self.resctrl_root, created=pod_created)
            read.add("resctrl")
        class_tasks = resctrl_on and resctrl_wanted and not resctrl.problem
        pod_tasks = pod_groups_on and not resctrl.problem
        pods = self._pods(snap, series, now, cfs=burst,
                          tasks=lambda pod: class_tasks or (pod_tasks and ANNOTATION_POD_RESCTRL in pod.annotations))
        sysctl = SysctlFacts(originals=self.originals.section("sysctl"))
        if self.enabled("SystemConfig") or sysctl.originals or replay_gate == "SystemConfig":
            sysctl = self.sysctl()
            read.add("sysctl")
        oom_on = self.enabled("OOMScoreAdj") or replay_gate == "OOMScoreAdj"
        oom = OOMFacts()
        if oom_on or self.originals.section(ORIGINALS_SECTION):
            oom = read_oom_facts(
                pods, lambda uid: snap.pods[uid].annotations if uid in snap.pods else {},
                cpu_root=self.view.hierarchy_root("cpu"), proc_root=self.proc_root, originals=self.originals,
                wanted=oom_on,
            )
            read.add("oom")
        tc = TcFacts()
        if self.enabled("TCNetworkQoS") or replay_gate == "TCNetworkQoS" or self.originals.section(TC_SECTION):
            tc = self.tc.read(self.originals, pods, self._net_cls_root())
            read.add("tc")
        core_sched = CoreSchedFacts()
        if self.enabled("CoreSched") or replay_gate == "CoreSched":
            core_sched = self.core_sched.read(pods, self.view.hierarchy_root("cpu"))
            read.add("core_sched")
        devices: tuple[BlockDevice, ...] = ()
        if self.enabled("BlkIOReconcile") or replay_gate == "BlkIOReconcile":
            devices = self.devices(slo)
            read.add("blkio")
        return KernelFacts(
            read=frozenset(read), v2=self.view.v2, tiers=self.tiers, cgroup_files=self.cgroup_files(),
            pods=MappingProxyType(pods), sysctl=sysctl, devices=devices, resctrl=resctrl, oom=oom, tc=tc,
            core_sched=core_sched,
        )
