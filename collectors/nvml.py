"""The few NVML calls the GPU collector makes, behind a Protocol, so tests bring a fake and hosts without a
driver never import more than they must.

`PynvmlApi` is the real one (pynvml). `pynvml` is imported on `init()`, not at module import, and every
`NVMLError` is translated here, once, into `NvmlUnavailable` (no library, no driver, no device: the
collector disables itself with the reason) or `NvmlCallError` (one call failed: counted, cycle goes on).

Health follows koordlet (statesinformer/impl/states_device_linux.go): every device registers for XID
critical-error events; an XID outside the application-error list `IGNORED_XIDS` marks its device unhealthy
for the life of the process (koordlet has no way back either), an event without a device marks every
device unhealthy, and a device that cannot register (too old) is unhealthy from the start. Where koordlet
blocks a goroutine in `EventSetWait(5000)`, `devices()` drains the queue with a zero timeout, so a
health change reaches the inventory within one collector interval and no thread is spent waiting.
On top of that, a device that stops answering (GPU_IS_LOST) is reported unhealthy while it does not answer.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Protocol

from hookserver.errors import HookServerError
from hookserver.gpu_inventory import sysfs_bus_id
from hookserver.system.roots import SystemRoots

__all__ = [
    "IGNORED_XIDS",
    "GpuDevice",
    "GpuProcess",
    "NvmlApi",
    "NvmlCallError",
    "NvmlUnavailable",
    "PynvmlApi",
    "pcie_root_of",
    "sysfs_bus_id",
]

log = logging.getLogger(__name__)

# XIDs koordlet treats as application errors, not device faults (13 graphics engine exception, 31 MMU fault,
# 43 channel stopped, 45 preemptive cleanup, 68 video processor exception, 109 context switch timeout).
IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})

_XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError
# Errors that mean the device itself is gone, not that one query failed.
_LOST_ERRORS = ("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED")
_PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")


class NvmlUnavailable(HookServerError):
    """NVML cannot be used on this host (library or driver missing, init failed)."""


class NvmlCallError(HookServerError):
    """One NVML call failed on a device that otherwise works."""


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    uuid: str
    name: str
    minor: int
    memory_total_bytes: int
    bus_id: str
    # What the Device report needs beyond the collector's series (koordlet's states_device_linux.go):
    # the NUMA node (None where the driver or kernel cannot tell), the PCIe root complex of the bus id
    # (`pci0000:00`, from sysfs), and health (False after an XID koordlet counts as fatal, or when the
    # device stopped answering), with the reason shown by `hookctl devices`.
    numa_node: int | None = None
    pcie_root: str = ""
    healthy: bool = True
    unhealthy_reason: str = ""
    # koordlet's condition reason for an unhealthy device (`Xid79`, `DeviceHealthCheckNotSupported`,
    # `DeviceLost`): the Device object's `Healthy` condition carries it, `unhealthy_reason` is its message.
    unhealthy_code: str = ""


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_memory_bytes: int


class NvmlApi(Protocol):
    def init(self) -> None: ...

    def shutdown(self) -> None: ...

    def devices(self) -> list[GpuDevice]:
        """The inventory now, with health; called every cycle, so it must stay cheap."""
        ...

    def driver_version(self) -> str: ...

    def utilization(self, index: int) -> tuple[float, float]:
        """(GPU %, memory controller %) over the driver's last sample period."""
        ...

    def memory_used(self, index: int) -> int: ...

    def processes(self, index: int) -> list[GpuProcess]: ...

    def process_utilization(self, index: int) -> dict[int, float]:
        """pid -> SM utilisation % from samples since the previous call."""
        ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def pcie_root_of(roots: SystemRoots, bdf: str) -> str:
    """The PCIe root complex (`pci0000:16`) the device hangs under, from where its sysfs link points; ''
    when sysfs does not know the device. Only the part below the sys root is searched, so a test tree's
    own path cannot match."""
    link = roots.sys_path("bus", "pci", "devices", bdf)
    if not bdf or not os.path.lexists(link):
        return ""
    target = os.path.realpath(link)
    sys_real = os.path.realpath(roots.sys)
    rel = os.path.relpath(target, sys_real) if target.startswith(sys_real + os.sep) else target
    for part in rel.split(os.sep):
        if _PCIE_ROOT.match(part):
            return part
    return ""


def _numa_node_of(roots: SystemRoots, bdf: str) -> int | None:
    """The device's NUMA node from sysfs (what koordlet reads); None for -1 (no affinity) or no file.

    Not nvmlDeviceGetNumaNodeId: NVML documents it for "platforms where the GPUs are NUMA nodes" (the GPU's
    own memory on a coherent Grace-Hopper board), not the CPU node a PCIe GPU hangs off, which topology needs.
    """
    try:
        with open(roots.sys_path("bus", "pci", "devices", bdf, "numa_node")) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


@dataclass(frozen=True, slots=True)
class _Static:
    """What does not change while the device is plugged in: read once per UUID."""

    name: str
    minor: int
    memory_total_bytes: int
    bus_id: str
    numa_node: int | None
    pcie_root: str


class PynvmlApi:
    """NVML through pynvml."""

    def __init__(self, roots: SystemRoots | None = None, *, max_events_per_poll: int = 64) -> None:
        self.roots = roots if roots is not None else SystemRoots()
        self.max_events_per_poll = max_events_per_poll
        self._nvml: ModuleType | None = None
        self._handles: dict[int, Any] = {}
        self._last_seen_us: dict[str, int] = {}  # UUID (index before the first inventory) -> newest sample
        self._static: dict[str, _Static] = {}
        self._by_index: dict[int, str] = {}  # index -> UUID at the last inventory
        self._unhealthy: dict[str, tuple[str, str]] = {}  # UUID -> (code, message), sticky
        self._event_set: Any = None

    def _lib(self) -> ModuleType:
        if self._nvml is None:
            raise NvmlUnavailable("NVML is not initialised")
        return self._nvml

    def init(self) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pynvml announces its rename on import
                import pynvml
        except ImportError as exc:
            raise NvmlUnavailable(f"pynvml is not installed: {exc}") from exc
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(f"nvmlInit failed: {exc}") from exc
        self._nvml = pynvml
        try:
            self._event_set = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as exc:
            # koordlet exits here; an agent that also does CPU QoS keeps going, with liveness checks only.
            log.warning("NVML event set: %s; XID health checks are off", exc)
            self._event_set = None

    def shutdown(self) -> None:
        nvml, self._nvml = self._nvml, None
        self._handles.clear()
        self._static.clear()
        self._by_index.clear()
        event_set, self._event_set = self._event_set, None
        if nvml is not None:
            try:
                if event_set is not None:
                    nvml.nvmlEventSetFree(event_set)
                nvml.nvmlShutdown()
            except nvml.NVMLError as exc:
                raise NvmlCallError(f"nvmlShutdown failed: {exc}") from exc

    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is None:
            nvml = self._lib()
            handle = self._call(f"device {index} handle", nvml.nvmlDeviceGetHandleByIndex, index)
            self._handles[index] = handle
        return handle

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        nvml = self._lib()
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            raise NvmlCallError(f"NVML {what}: {exc}") from exc

    def _is_lost(self, exc: Exception) -> bool:
        nvml = self._lib()
        return getattr(exc, "value", None) in {getattr(nvml, name, None) for name in _LOST_ERRORS}

    def driver_version(self) -> str:
        return _text(self._call("driver version", self._lib().nvmlSystemGetDriverVersion))

    def devices(self) -> list[GpuDevice]:
        """Count, then per device a handle, its UUID and its memory (the liveness probe); the rest is read
        once per UUID. Pending XID events are drained first, so their verdict is in this inventory."""
        nvml = self._lib()
        self._poll_events()
        count = int(self._call("device count", nvml.nvmlDeviceGetCount))
        handles: dict[int, Any] = {}
        by_index: dict[int, str] = {}
        out: list[GpuDevice] = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                nvml.nvmlDeviceGetMemoryInfo(handle)
            except nvml.NVMLError as exc:
                known = self._by_index.get(index)
                if not self._is_lost(exc) or known is None or known not in self._static:
                    raise NvmlCallError(f"NVML device {index}: {exc}") from exc
                # The device stopped answering: still listed (its pods still hold it), as unhealthy.
                by_index[index] = known
                out.append(self._device(index, known, lost=f"device stopped answering: {exc}"))
                continue
            handles[index] = handle
            by_index[index] = uuid
            if uuid not in self._static:
                self._static[uuid] = self._discover(index, handle, uuid)
            out.append(self._device(index, uuid))
        self._handles = handles
        self._by_index = by_index
        return out

    def _device(self, index: int, uuid: str, *, lost: str = "") -> GpuDevice:
        st = self._static[uuid]
        dev = GpuDevice(
            index=index, uuid=uuid, name=st.name, minor=st.minor, memory_total_bytes=st.memory_total_bytes,
            bus_id=st.bus_id, numa_node=st.numa_node, pcie_root=st.pcie_root,
        )
        if uuid in self._unhealthy:
            code, message = self._unhealthy[uuid]
            return replace(dev, healthy=False, unhealthy_code=code, unhealthy_reason=message)
        if lost:
            return replace(dev, healthy=False, unhealthy_code="DeviceLost", unhealthy_reason=lost)
        return dev

    def _discover(self, index: int, handle: Any, uuid: str) -> _Static:
        """Read what a device is once, and register it for XID events."""
        nvml = self._lib()
        memory = self._call(f"device {index} memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        pci = self._call(f"device {index} pci", nvml.nvmlDeviceGetPciInfo, handle)
        name = _text(self._call(f"device {index} name", nvml.nvmlDeviceGetName, handle))
        try:
            minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
        except nvml.NVMLError:
            minor = -1  # not supported on some platforms (e.g. WSL)
        try:
            mig_current, _pending = nvml.nvmlDeviceGetMigMode(handle)
            if mig_current:
                log.warning("GPU %s (%s) has MIG on: it is reported whole, its MIG instances are not", index, uuid)
        except nvml.NVMLError:
            pass  # not a MIG-capable device
        bus_id = _text(pci.busId)
        bdf = sysfs_bus_id(bus_id)
        if self._event_set is not None:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, _XID_CRITICAL_ERROR, self._event_set)
            except nvml.NVMLError_NotSupported:
                # koordlet's rule: a device too old for health checks is marked unhealthy.
                self._unhealthy[uuid] = ("DeviceHealthCheckNotSupported", "device does not support health checking")
            except nvml.NVMLError as exc:
                log.warning("GPU %s (%s): XID events not registered: %s", index, uuid, exc)
        return _Static(
            name=name, minor=minor, memory_total_bytes=int(memory.total), bus_id=bus_id,
            numa_node=_numa_node_of(self.roots, bdf), pcie_root=pcie_root_of(self.roots, bdf),
        )

    def _poll_events(self) -> None:
        """Drain pending XID events without waiting (timeout 0), at most `max_events_per_poll` a cycle."""
        if self._event_set is None:
            return
        nvml = self._lib()
        for _ in range(self.max_events_per_poll):
            try:
                data = nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except nvml.NVMLError_Timeout:
                return
            except nvml.NVMLError as exc:
                log.warning("NVML event wait: %s", exc)
                return
            if not int(data.eventType) & _XID_CRITICAL_ERROR:
                continue
            xid = int(data.eventData)
            if xid in IGNORED_XIDS:
                continue
            verdict = (f"Xid{xid}", f"Xid error detected on device, error code: {xid}")
            uuid = ""
            if data.device:
                try:
                    uuid = _text(nvml.nvmlDeviceGetUUID(data.device))
                except nvml.NVMLError:
                    uuid = ""
            targets = [uuid] if uuid else list(self._static)  # no device named: all of them (koordlet)
            for target in targets:
                if target not in self._unhealthy:
                    log.warning("GPU %s unhealthy: %s", target, verdict[1])
                self._unhealthy[target] = verdict

    def utilization(self, index: int) -> tuple[float, float]:
        rates = self._call(f"device {index} utilization", self._lib().nvmlDeviceGetUtilizationRates, self._handle(index))
        return float(rates.gpu), float(rates.memory)

    def memory_used(self, index: int) -> int:
        memory = self._call(f"device {index} memory", self._lib().nvmlDeviceGetMemoryInfo, self._handle(index))
        return int(memory.used)

    def processes(self, index: int) -> list[GpuProcess]:
        procs = self._call(
            f"device {index} processes", self._lib().nvmlDeviceGetComputeRunningProcesses, self._handle(index)
        )
        # usedGpuMemory is None where the driver cannot tell (e.g. without privileges).
        return [GpuProcess(int(p.pid), int(p.usedGpuMemory or 0)) for p in procs]

    def process_utilization(self, index: int) -> dict[int, float]:
        nvml = self._lib()
        key = self._by_index.get(index, f"#{index}")  # by UUID: an index moves when a device disappears
        since = self._last_seen_us.get(key, 0)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(self._handle(index), since)
        except nvml.NVMLError_NotFound:
            return {}  # no process sampled since `since`
        except nvml.NVMLError as exc:
            raise NvmlCallError(f"NVML device {index} process utilization: {exc}") from exc
        out: dict[int, float] = {}
        for sample in samples:
            out[int(sample.pid)] = max(out.get(int(sample.pid), 0.0), float(sample.smUtil))
            self._last_seen_us[key] = max(self._last_seen_us.get(key, 0), int(sample.timeStamp))
        return out
