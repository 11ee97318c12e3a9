"""System config (koordlet's sysreconcile; gate SystemConfig, off by default; reference §5.6): node vm
sysctls under the configured `/proc/sys` root (`--proc-root`).

  vm.min_free_kbytes         = MemTotal (KiB) × minFreeKbytesFactor / 10000
  vm.watermark_scale_factor  = watermarkScaleFactor
  vm.memcg_reap_background   = memcgReapBackGround (only where the kernel has the file: Anolis)

The first write of each sysctl records the value the node had (state dir, `NodeOriginals`), so a restarted
agent still knows it. When the strategy is disabled (the gate off, or `systemStrategy` absent from the
NodeSLO: absent means "leave the node as it was", not "write the defaults"), or on `hookserver cleanup`,
every recorded value is written back and forgotten.

Knobs (qos.knobs): the three sysctls, node level.
"""

from __future__ import annotations

from typing import Any

from hookserver.executor.plan import FileWrite

from qos.gates import FeatureGate
from qos.plan import QoSPlan, numbers
from qos.reconciler import Reconciler, Verdict
from qos.snapshot import QoSSnapshot

__all__ = ["SystemConfig", "restore_sysctl_writes", "sysctl_path"]


def sysctl_path(name: str) -> str:
    """`vm.min_free_kbytes` -> `vm/min_free_kbytes` (relative to /proc/sys)."""
    return name.replace(".", "/")


def restore_sysctl_writes(originals: dict[str, str] | Any, *, owner: str, why: str) -> list[FileWrite]:
    """Write back every recorded original (and forget it once written)."""
    return [
        FileWrite("proc_sys", sysctl_path(name), str(value), compare="int", owner=owner,
                  reason=f"restore {name} to {value}, its value before this agent ({why})",
                  original="restore", original_key=("sysctl", name))
        for name, value in sorted(originals.items())
    ]


class SystemConfig(Reconciler):
    name = "SystemConfig"
    gate = FeatureGate("SystemConfig", False, "vm.min_free_kbytes, watermark_scale_factor, memcg reaper")
    default_interval_s = 1.0
    acts_on = ("sysctl",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        if snap.slo_sources.get("systemStrategy", "default") == "default":
            return Verdict(False, "NodeSLO has no systemStrategy: the node's sysctls are left as they were")
        return Verdict(True, f"systemStrategy from {snap.slo_sources.get('systemStrategy')}")

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        originals = dict(snap.kernel.sysctl.originals)
        if not originals:
            return QoSPlan.skip(self.name, why, state=state)
        files = restore_sysctl_writes(originals, owner=self.name, why=why)
        return QoSPlan(self.name, f"disabled ({why}); restoring {', '.join(sorted(originals))}",
                       files=tuple(files), state=state)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        sysctl = snap.kernel.sysctl
        if "sysctl" not in snap.kernel.read:
            return QoSPlan.skip(self.name, "sysctls not read this round", state=state)
        strategy = snap.slo.system_strategy
        wanted: dict[str, tuple[int, str]] = {}
        notes: list[str] = []
        if sysctl.mem_total_kib <= 0:
            notes.append("MemTotal unknown (no /proc/meminfo under the proc root): min_free_kbytes not set")
        elif strategy.min_free_kbytes_factor > 0:
            value = sysctl.mem_total_kib * strategy.min_free_kbytes_factor // 10000
            wanted["vm.min_free_kbytes"] = (value, f"{sysctl.mem_total_kib} KiB × {strategy.min_free_kbytes_factor} / 10000")
        if strategy.watermark_scale_factor > 0:
            wanted["vm.watermark_scale_factor"] = (strategy.watermark_scale_factor, "watermarkScaleFactor")
        wanted["vm.memcg_reap_background"] = (strategy.memcg_reap_background, "memcgReapBackGround")
        files: list[FileWrite] = []
        for name, (value, why) in wanted.items():
            current = sysctl.values.get(name)
            if current is None:
                if name != "vm.memcg_reap_background":
                    notes.append(f"{name}: no such file under the proc root; not set")
                continue
            if current == value:
                continue
            files.append(FileWrite(
                "proc_sys", sysctl_path(name), str(value), compare="int", owner=self.name,
                reason=f"{name} {current} -> {value} ({why})", original="record", original_key=("sysctl", name),
            ))
        # A sysctl this NodeSLO no longer sets goes back to what the node had.
        for name, original in sorted(sysctl.originals.items()):
            if name not in wanted or sysctl.values.get(name) is None:
                files.extend(restore_sysctl_writes({name: original}, owner=self.name, why="no longer configured"))
        summary = ", ".join(f"{n}={v}" for n, (v, _) in wanted.items() if sysctl.values.get(n) is not None)
        values = {n.split(".", 1)[1]: v for n, (v, _) in wanted.items()}
        return QoSPlan(self.name, (summary or "nothing to set") + ("" if files else "; unchanged"),
                       numbers(mem_total_kib=sysctl.mem_total_kib, **values), files=tuple(files),
                       notes=tuple(notes), state=state)
