"""The few NVML calls the GPU collector makes, behind a Protocol, so tests bring a fake and hosts without a
driver never import more than they must.

`PynvmlApi` is the real one (pynvml). `pynvml` is imported on `init()`, not at module import, and every
`NVMLError` is translated here, once, into `NvmlUnavailable` (no library, no driver, no device: the
collector disables itself with the reason) or `NvmlCallError` (one call failed: counted, cycle goes on).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from hookserver.errors import HookServerError

__all__ = ["GpuDevice", "GpuProcess", "NvmlApi", "NvmlCallError", "NvmlUnavailable", "PynvmlApi"]


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


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_memory_bytes: int


class NvmlApi(Protocol):
    def init(self) -> None: ...

    def shutdown(self) -> None: ...

    def devices(self) -> list[GpuDevice]: ...

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


class PynvmlApi:
    """NVML through pynvml."""

    def __init__(self) -> None:
        self._nvml: ModuleType | None = None
        self._handles: dict[int, Any] = {}
        self._last_seen_us: dict[int, int] = {}

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

    def shutdown(self) -> None:
        nvml, self._nvml = self._nvml, None
        self._handles.clear()
        if nvml is not None:
            try:
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

    def devices(self) -> list[GpuDevice]:
        nvml = self._lib()
        count = int(self._call("device count", nvml.nvmlDeviceGetCount))
        out: list[GpuDevice] = []
        for index in range(count):
            handle = self._handle(index)
            memory = self._call(f"device {index} memory", nvml.nvmlDeviceGetMemoryInfo, handle)
            pci = self._call(f"device {index} pci", nvml.nvmlDeviceGetPciInfo, handle)
            try:
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
            except nvml.NVMLError:
                minor = -1  # not supported on some platforms (e.g. WSL)
            out.append(
                GpuDevice(
                    index=index,
                    uuid=_text(self._call(f"device {index} uuid", nvml.nvmlDeviceGetUUID, handle)),
                    name=_text(self._call(f"device {index} name", nvml.nvmlDeviceGetName, handle)),
                    minor=minor,
                    memory_total_bytes=int(memory.total),
                    bus_id=_text(pci.busId),
                )
            )
        return out

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
        since = self._last_seen_us.get(index, 0)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(self._handle(index), since)
        except nvml.NVMLError_NotFound:
            return {}  # no process sampled since `since`
        except nvml.NVMLError as exc:
            raise NvmlCallError(f"NVML device {index} process utilization: {exc}") from exc
        out: dict[int, float] = {}
        for sample in samples:
            out[int(sample.pid)] = max(out.get(int(sample.pid), 0.0), float(sample.smUtil))
            self._last_seen_us[index] = max(self._last_seen_us.get(index, 0), int(sample.timeStamp))
        return out
