"""resctrl (koordlet's resctrl reconcile; gate RdtResctrl, on by default; reference §5.8): L3 cache (CAT) and
memory bandwidth (MBA) partitions for three groups under the resctrl root (`<sys-root>/fs/resctrl`):
LSR (LSE and LSR pods), LS and BE, from NodeSLO `resourceQOSStrategy.<class>.resctrlQOS`.

  L3 mask   over the CBM width w (bits of `info/L3/cbm_mask`):
            start = ceil(w × catRangeStartPercent / 100), end = ceil(w × catRangeEndPercent / 100),
            mask  = ((1 << end) − 1) >> start << start, in hex, the same for every L3 domain;
            at least `min_cbm_bits` ways (widened upward, noted).
  MB        Intel: mbaPercent rounded up to a multiple of 10 (and of `bandwidth_gran`), at least
            `min_bandwidth`; AMD: 100 % → 2048 (unlimited), else int(160 × mbaPercent / 100).
  tasks     every task id of the class's containers that is not in its group yet is written to the
            group's `tasks` (a write moves one task; a task that exited meanwhile is harmless).

A class whose resctrlQOS is disabled gets the full mask and 100 % MB (its group is not narrowed) and its
tasks are not moved. No resctrl mount, or no CAT and no MBA in `info/`, is one "unsupported" status.
A pod with its own group (`node.koordinator.sh/resctrl`, gate Resctrl: `qos.isolation.pod_resctrl`) keeps
its tasks there: they are not moved into its class's group while that gate is on.
Groups this agent created are recorded in the state dir; when the feature is turned off (gate or NodeSLO)
or on `hookserver cleanup` they are removed, and the kernel puts their tasks back in the default group.

Knobs (qos.framework.knobs): resctrl schemata and tasks of the three groups, node level.
"""

from __future__ import annotations

import math
from typing import Any

from hookserver.executor.plan import FileWrite
from hookserver.slo.qos import ResctrlQOS
from hookserver.system.resctrl import schemata_holds

from hookserver.featuregates import FeatureGate
from qos.snapshot.kernel import ResctrlFacts
from qos.framework.plan import QoSPlan, numbers
from qos.framework.resctrl_groups import cat_mask, mba_value, remove_group_writes, task_writes, unusable
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import QoSSnapshot
from qos.snapshot.pod_resctrl_reader import ANNOTATION_POD_RESCTRL

__all__ = ["GROUP_OF_QOS", "Resctrl", "cat_mask", "mba_value", "remove_group_writes"]

GROUP_OF_QOS = {"LSE": "LSR", "LSR": "LSR", "LS": "LS", "BE": "BE"}
class Resctrl(Reconciler):
    name = "Resctrl"
    gate = FeatureGate("RdtResctrl", True, "L3 cache and memory bandwidth partitions (resctrl) per QoS class")
    default_interval_s = 1.0
    acts_on = ("resctrl",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        strategy = snap.slo.resource_qos_strategy
        on = [n for n, c in (("LSR", strategy.lsr_class), ("LS", strategy.ls_class), ("BE", strategy.be_class))
              if c.resctrl_qos.enable]
        if not on:
            return Verdict(False, "NodeSLO resourceQOSStrategy: resctrlQOS disabled for every class")
        return Verdict(True, f"resctrlQOS enabled for {', '.join(on)}")

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        created = snap.kernel.resctrl.created
        if not created:
            return QoSPlan.skip(self.name, why, state=state)
        return QoSPlan(self.name, f"disabled ({why}); removing groups {', '.join(sorted(created))}",
                       files=tuple(remove_group_writes(created, section="resctrl_groups", owner=self.name, why=why)), state=state)

    def _schemata(self, r: ResctrlFacts, cfg: ResctrlQOS, notes: list[str], group: str) -> tuple[str, str]:
        enable = cfg.enable
        start, end, mba = (cfg.cat_range_start_percent, cfg.cat_range_end_percent, cfg.mba_percent) if enable else (0, 100, 100)
        l3 = mb = ""
        if r.cat:
            if end <= start:
                notes.append(f"{group}: catRange {start}..{end} % is empty; using {r.min_cbm_bits} way(s)")
            ways_needed = max(r.min_cbm_bits, 1)
            mask = cat_mask(r.cbm_bits, start, end, min_bits=ways_needed)
            if bin(mask).count("1") > math.ceil(r.cbm_bits * end / 100) - math.ceil(r.cbm_bits * start / 100):
                notes.append(f"{group}: L3 range widened to {ways_needed} way(s) (min_cbm_bits)")
            l3 = "L3:" + ";".join(f"{d}={mask:x}" for d in r.l3_domains)
        if r.mba:
            value = mba_value(mba, vendor=r.vendor, gran=r.mba_gran, minimum=r.mba_min)
            mb = "MB:" + ";".join(f"{d}={value}" for d in r.mb_domains)
        return l3, mb

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        skipped = unusable(snap, self.name, state)
        if skipped is not None:
            return skipped
        r = snap.kernel.resctrl
        if r.num_closids and r.num_closids < 4 and len(r.groups) < 3:
            return QoSPlan.skip(self.name, f"unsupported: only {r.num_closids} CLOSIDs (needs 4: default + LSR, LS, BE)",
                                state=state)
        strategy = snap.slo.resource_qos_strategy
        classes = {"LSR": strategy.lsr_class.resctrl_qos, "LS": strategy.ls_class.resctrl_qos,
                   "BE": strategy.be_class.resctrl_qos}
        notes: list[str] = []
        files: list[FileWrite] = []
        shown: dict[str, str] = {}
        for group, cfg in classes.items():
            if group not in r.groups:
                files.append(FileWrite("resctrl", group, op="mkdir", owner=self.name, original="record",
                                       original_key=("resctrl_groups", group), reason=f"create resctrl group {group}"))
            l3, mb = self._schemata(r, cfg, notes, group)
            current = r.groups.get(group, "")
            for line in (l3, mb):
                if not line:
                    continue
                shown[f"{group}_{line.split(':', 1)[0]}"] = line
                if group in r.groups and schemata_holds(current, line):
                    continue
                files.append(FileWrite(
                    "resctrl", f"{group}/schemata", line, compare="schemata", owner=self.name,
                    reason=(f"{group}: {'L3 ' + str(cfg.cat_range_start_percent) + '..' + str(cfg.cat_range_end_percent) + '%' if line.startswith('L3') else 'MB ' + str(cfg.mba_percent) + '%'}"
                            f" over {r.cbm_bits}-bit CBM, {r.vendor}" + ("" if cfg.enable else " (class disabled: full)")),
                ))
        if not r.cat:
            notes.append("no L3 CAT in info/: cache partitions unsupported, MB only")
        if not r.mba:
            notes.append("no MBA in info/: memory bandwidth unsupported, L3 only")
        moved = 0
        for pod in snap.pods:
            target = GROUP_OF_QOS.get(pod.qos)
            pk = snap.kernel.pods.get(pod.uid)
            if target is None or pk is None or not pod.active or not classes[target].enable:
                continue
            if ANNOTATION_POD_RESCTRL in pod.annotations and snap.gate_on("Resctrl"):
                continue  # in its own pod-level group (qos.isolation.pod_resctrl): one owner per task
            tasks = task_writes(pk, pod.key, target, r.group_tasks.get(target, frozenset()), owner=self.name)
            moved += len(tasks)
            files += tasks
        summary = "; ".join(f"{k}={v}" for k, v in shown.items()) + f"; {moved} tasks to move"
        return QoSPlan(self.name, summary, numbers(cbm_bits=r.cbm_bits, tasks_moved=moved, **shown), files=tuple(files),
                       notes=tuple(dict.fromkeys(notes)), state=state)
