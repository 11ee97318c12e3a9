"""What koordlet reports as `node.koordinator.sh/cpu-basic-info` (`pkg/koordlet/util/cpuinfo.go`
`getCPUBasicInfo`): the CPU model and vendor from /proc/cpuinfo ("unknown" when absent, as koordlet's readers
return), hyper-threading from
`/sys/devices/system/cpu/smt/active`, turbo from `/sys/devices/system/cpu/intel_pstate/no_turbo` (Intel only,
as koordlet), and the L3 CAT bit mask from `/sys/fs/resctrl/info/L3/cbm_mask`. A missing file leaves its field
at the zero value, as koordlet's readers do (omitted from the JSON). koord-manager keys CPU normalization
ratios on model, hyper-threading and turbo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookserver.system.files import read_text
from hookserver.system.roots import SystemRoots

__all__ = ["CpuBasicInfo", "read_cpu_basic_info"]


@dataclass(frozen=True, slots=True)
class CpuBasicInfo:
    cpu_model: str = ""
    hyper_thread_enabled: bool = False
    turbo_enabled: bool = False
    cat_l3_cbm_mask: str = ""
    vendor_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """koordinator's `CPUBasicInfo` (every field `omitempty`), in its field order."""
        out: dict[str, Any] = {}
        if self.cpu_model:
            out["cpuModel"] = self.cpu_model
        if self.hyper_thread_enabled:
            out["hyperThreadEnabled"] = True
        if self.turbo_enabled:
            out["turboEnabled"] = True
        if self.cat_l3_cbm_mask:
            out["catL3CbmMask"] = self.cat_l3_cbm_mask
        if self.vendor_id:
            out["vendorID"] = self.vendor_id
        return out


def _cpuinfo_field(text: str, *keys: str) -> str:
    for line in text.splitlines():
        head, sep, value = line.partition(":")
        if sep and any(key in head for key in keys):
            return value.strip()
    return "unknown"


def _flag(text: str | None, on: str) -> bool:
    return text is not None and text.strip() == on


def read_cpu_basic_info(roots: SystemRoots) -> CpuBasicInfo:
    cpuinfo = read_text(roots.proc_path("cpuinfo")) or ""
    no_turbo = read_text(roots.sys_path("devices", "system", "cpu", "intel_pstate", "no_turbo"))
    return CpuBasicInfo(
        cpu_model=_cpuinfo_field(cpuinfo, "model name", "Model Name"),
        hyper_thread_enabled=_flag(read_text(roots.sys_path("devices", "system", "cpu", "smt", "active")), "1"),
        turbo_enabled=_flag(no_turbo, "0"),
        cat_l3_cbm_mask=(read_text(roots.sys_path("fs", "resctrl", "info", "L3", "cbm_mask")) or "").strip(),
        vendor_id=_cpuinfo_field(cpuinfo, "vendor_id"),
    )
