"""System config (koordlet's sysreconcile; gate SystemConfig, off by default; reference §5.6): node-wide memory
settings, under the configured roots (`--proc-root`, `--sys-root`).

  vm.min_free_kbytes            = node memory (KiB) × minFreeKbytesFactor / 10000; the Node's memory capacity
                                  as koordlet uses it, or MemTotal from /proc/meminfo without a Node
  vm.watermark_scale_factor     = watermarkScaleFactor
  memcg_reaper.reap_background  = memcgReapBackGround (`/sys/kernel/mm/memcg_reaper/reap_background`, Anolis;
                                  only where the file exists)

Like koordlet (`ValidateResourceValue`, `pkg/koordlet/util/system/system_resource.go`), a computed value outside
the kernel setting's sane range is not written, with a note: min_free_kbytes in [10 MiB, 10 GiB] (in KiB),
watermark_scale_factor in [10, 400]. The NodeSLO itself takes what koordinator's webhook takes
(`minFreeKbytesFactor > 0` with no upper bound), so this range is what keeps a factor above 10000 (more than
the node's memory) off the kernel.

The first write of each records the value the node had (state dir, `NodeOriginals`), so a restarted agent
still knows it. When the strategy is disabled (the gate off, or `systemStrategy` absent from the NodeSLO:
absent means "leave the node as it was", not "write the defaults"), or on `hookserver cleanup`, every
recorded value is written back and forgotten.

Knobs (qos.framework.knobs): the three settings, node level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookserver.executor.plan import FileWrite

from hookserver.featuregates import FeatureGate
from qos.snapshot.kernel import NODE_SETTINGS
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import QoSSnapshot

__all__ = ["SystemConfig", "restore_setting_writes", "setting_write"]

_OPTIONAL = frozenset({"memcg_reaper.reap_background"})
# koordlet's RangeValidators for the settings it computes (inclusive).
_KOORDLET_RANGES: Mapping[str, tuple[int, int]] = {
    "vm.min_free_kbytes": (10 * 1024, 10 * 1024 * 1024),
    "vm.watermark_scale_factor": (10, 400),
}


def setting_write(name: str, value: str, **kw: Any) -> FileWrite:
    root, path = NODE_SETTINGS[name]
    return FileWrite(root, path, value, compare="int", original_key=("sysctl", name), **kw)  # type: ignore[arg-type]


def restore_setting_writes(originals: Mapping[str, str], *, owner: str, why: str) -> list[FileWrite]:
    """Write back every recorded original (and forget it once written)."""
    return [
        setting_write(name, str(value), owner=owner, original="restore",
                      reason=f"restore {name} to {value}, its value before this agent ({why})")
        for name, value in sorted(originals.items()) if name in NODE_SETTINGS
    ]


class SystemConfig(Reconciler):
    name = "SystemConfig"
    gate = FeatureGate("SystemConfig", False, "vm.min_free_kbytes, watermark_scale_factor, memcg reaper")
    default_interval_s = 1.0
    acts_on = ("sysctl",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        if snap.slo_sources.get("systemStrategy", "default") == "default":
            return Verdict(False, "NodeSLO has no systemStrategy: the node's settings are left as they were")
        return Verdict(True, f"systemStrategy from {snap.slo_sources.get('systemStrategy')}")

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        originals = dict(snap.kernel.sysctl.originals)
        if not originals:
            return QoSPlan.skip(self.name, why, state=state)
        files = restore_setting_writes(originals, owner=self.name, why=why)
        return QoSPlan(self.name, f"disabled ({why}); restoring {', '.join(sorted(originals))}",
                       files=tuple(files), state=state)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        sysctl = snap.kernel.sysctl
        if "sysctl" not in snap.kernel.read:
            return QoSPlan.skip(self.name, "node settings not read this round", state=state)
        strategy = snap.slo.system_strategy
        wanted: dict[str, tuple[int, str]] = {}
        notes: list[str] = []
        node_kib = snap.node.memory_capacity_bytes // 1024 if snap.node is not None else 0
        total_kib, source = (node_kib, "Node memory capacity") if node_kib > 0 else (sysctl.mem_total_kib, "MemTotal")
        if total_kib <= 0:
            notes.append("node memory unknown (no Node, no MemTotal under the proc root): min_free_kbytes not set")
        elif strategy.min_free_kbytes_factor > 0:
            value = total_kib * strategy.min_free_kbytes_factor // 10000
            wanted["vm.min_free_kbytes"] = (value, f"{source} {total_kib} KiB × {strategy.min_free_kbytes_factor} / 10000")
        if strategy.watermark_scale_factor > 0:
            wanted["vm.watermark_scale_factor"] = (strategy.watermark_scale_factor, "watermarkScaleFactor")
        wanted["memcg_reaper.reap_background"] = (strategy.memcg_reap_background, "memcgReapBackGround")
        for name, (low, high) in _KOORDLET_RANGES.items():
            if name in wanted and not low <= wanted[name][0] <= high:
                value, why = wanted.pop(name)
                notes.append(f"{name} {value} ({why}) is outside koordlet's range [{low}, {high}]: not set")
        files: list[FileWrite] = []
        for name, (value, why) in wanted.items():
            current = sysctl.values.get(name)
            if current is None:
                if name not in _OPTIONAL:
                    notes.append(f"{name}: no such file under its root; not set")
                continue
            if current == value:
                continue
            files.append(setting_write(name, str(value), owner=self.name, original="record",
                                       reason=f"{name} {current} -> {value} ({why})"))
        # A setting this NodeSLO no longer sets goes back to what the node had.
        for name, original in sorted(sysctl.originals.items()):
            if name not in wanted or sysctl.values.get(name) is None:
                files.extend(restore_setting_writes({name: original}, owner=self.name, why="no longer configured"))
        summary = ", ".join(f"{n}={v}" for n, (v, _) in wanted.items() if sysctl.values.get(n) is not None)
        values = {n.rsplit(".", 1)[1]: v for n, (v, _) in wanted.items()}
        return QoSPlan(self.name, (summary or "nothing to set") + ("" if files else "; unchanged"),
                       numbers(total_kib=total_kib, **values), files=tuple(files),
                       notes=tuple(notes), state=state)
