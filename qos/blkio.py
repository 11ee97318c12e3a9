"""blkio (koordlet's BlkioReconcile; gate BlkIOReconcile, off by default; reference §5.7).

For each block NodeSLO names (a device, a volume group; `podvolume` needs the PVC map and is reported as
unsupported) resolved to `maj:min` by the snapshot:
  * the BE tier (`beClass.blkioQOS.blocks`) and every pod whose `koordinator.sh/blkioQOS` annotation
    carries its own `{"blocks": [...]}` get `blkio.throttle.{read,write}_{iops,bps}_device` = `maj:min
    value` (0: unlimited; v2 `io.max`), and `blkio.cost.weight` = ioWeightPercent (default 100) where the
    kernel has it (Anolis v1, v2 `io.weight`);
  * the root gets iocost `blkio.cost.qos` = `maj:min enable=1 ctrl=user rpct=.. rlat=.. wpct=.. wlat=..`
    (defaults latency 3000 µs, percentile 95) and `blkio.cost.model` = `maj:min ctrl=auto`, where present.
A value the kernel would refuse (a negative throttle, ioWeightPercent outside 1-100, a latency percentile above
100: koordinator accepts any integer there) is left out with a note; the block's other values apply.
The executor skips a line the file already holds (per-device comparison). A block that does not resolve is
logged once by the reader and listed in the plan's notes. Lines this reconciler set and the NodeSLO no
longer asks for (or the feature turned off) are lifted (0).

Knobs (qos.framework.knobs): BE tier and BE pods' blkio throttles and cost.weight; root cost.qos / cost.model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.slo.qos import BlkIOQOS, BlockCfg

from hookserver.featuregates import FeatureGate
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import QoSSnapshot

__all__ = ["ANNOTATION_BLKIO_QOS", "BlkIO"]

ANNOTATION_BLKIO_QOS = "koordinator.sh/blkioQOS"
DEFAULT_LATENCY_US = 3000
DEFAULT_PERCENTILE = 95
DEFAULT_WEIGHT = 100
_THROTTLES = (
    (CgroupResource.BLKIO_READ_IOPS, "read_iops"),
    (CgroupResource.BLKIO_WRITE_IOPS, "write_iops"),
    (CgroupResource.BLKIO_READ_BPS, "read_bps"),
    (CgroupResource.BLKIO_WRITE_BPS, "write_bps"),
)

Line = tuple[str, CgroupResource, str]  # (cgroup dir, file, devno)


class BlkIO(Reconciler):
    name = "BlkIO"
    gate = FeatureGate("BlkIOReconcile", False, "block IO throttles and iocost per QoS class and pod")
    default_interval_s = 1.0
    acts_on = ("cgroup",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        if not snap.slo.resource_qos_strategy.be_class.blkio_qos.enable and not any(
            ANNOTATION_BLKIO_QOS in p.annotations for p in snap.pods
        ):
            return Verdict(False, "NodeSLO beClass.blkioQOS is disabled and no pod asks by annotation")
        return Verdict(True, "blkioQOS enabled")

    def initial_state(self, now: float) -> Any:
        return frozenset()

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        lifted = self._lift(state if isinstance(state, frozenset) else frozenset(), set(), why)
        if not lifted:
            return QoSPlan.skip(self.name, why, state=frozenset())
        return QoSPlan(self.name, f"disabled ({why}); lifting {len(lifted)} throttles",
                       writes=(ResourcePlan.single(lifted),), state=frozenset())

    def _lift(self, previous: frozenset[Line], now_set: set[Line], why: str) -> list[CgroupWrite]:
        return [
            CgroupWrite(d, r, f"{devno} 0", owner=self.name, reason=f"lift throttle on {devno} ({why})")
            for d, r, devno in sorted(previous - now_set, key=lambda x: (x[0], x[1].value, x[2]))
        ]

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        previous: frozenset[Line] = state if isinstance(state, frozenset) else frozenset()
        devices = {(d.name, d.type): d for d in snap.kernel.devices}
        files = snap.kernel.cgroup_files
        notes = [f"block {d.name} ({d.type}): {d.problem}" for d in snap.kernel.devices if d.problem]
        writes: list[CgroupWrite] = []
        root: list[CgroupWrite] = []
        lines: set[Line] = set()

        def throttle(directory: str, who: str, blocks: Iterable[BlockCfg]) -> None:
            for block in blocks:
                dev = devices.get((block.name, block.type))
                if dev is None or not dev.devno:
                    continue
                cfg, refused = block.io_cfg.checked()
                notes.extend(f"{who}: {block.name}: {text}" for text in refused)
                for resource, attr in _THROTTLES:
                    value = getattr(cfg, attr) or 0
                    if value or (directory, resource, dev.devno) in previous:
                        writes.append(CgroupWrite(directory, resource, f"{dev.devno} {value}", owner=self.name,
                                                  reason=f"{who}: {block.name} {attr} {value or 'unlimited'}"))
                    if value:
                        lines.add((directory, resource, dev.devno))
                if "blkio.cost.weight" in files:
                    weight = cfg.io_weight_percent or DEFAULT_WEIGHT
                    writes.append(CgroupWrite(directory, CgroupResource.BLKIO_COST_WEIGHT, weight, owner=self.name,
                                              reason=f"{who}: ioWeightPercent {weight}"))

        strategy = snap.slo.resource_qos_strategy
        be = strategy.be_class.blkio_qos
        tier = snap.kernel.tiers.get("besteffort", "")
        if be.enable and tier:
            throttle(tier, "BE tier", be.blocks)
        for pod in snap.pods:
            raw = pod.annotations.get(ANNOTATION_BLKIO_QOS)
            pk = snap.kernel.pods.get(pod.uid)
            if not raw or pk is None or not pod.active:
                continue
            try:
                cfg = BlkIOQOS.model_validate(json.loads(raw))
            except (ValueError, ValidationError) as exc:
                notes.append(f"{pod.key}: {ANNOTATION_BLKIO_QOS} invalid ({str(exc).splitlines()[0]}); ignored")
                continue
            unknown = [b for b in cfg.blocks if (b.name, b.type) not in devices]
            if unknown:
                notes.append(f"{pod.key}: blocks {', '.join(b.name for b in unknown)} are not in the NodeSLO; ignored")
            throttle(pk.dir, pod.key, [b for b in cfg.blocks if (b.name, b.type) in devices] if cfg.enable else [])
        if "blkio.cost.qos" in files:
            for cls_name, cls in (("LSR", strategy.lsr_class), ("LS", strategy.ls_class), ("BE", strategy.be_class)):
                if not cls.blkio_qos.enable:
                    continue
                for block in cls.blkio_qos.blocks:
                    dev = devices.get((block.name, block.type))
                    if dev is None or not dev.devno:
                        continue
                    c, refused = block.io_cfg.checked()
                    notes.extend(f"{cls_name} {block.name}: {text}" for text in refused)
                    qos_line = (f"{dev.devno} enable=1 ctrl=user rpct={c.read_latency_percent or DEFAULT_PERCENTILE} "
                                f"rlat={c.read_latency or DEFAULT_LATENCY_US} wpct={c.write_latency_percent or DEFAULT_PERCENTILE} "
                                f"wlat={c.write_latency or DEFAULT_LATENCY_US}")
                    root.append(CgroupWrite("", CgroupResource.BLKIO_COST_QOS, qos_line, owner=self.name,
                                            reason=f"{cls_name} {block.name}: iocost qos"))
                    if "blkio.cost.model" in files and not c.enable_user_model:
                        root.append(CgroupWrite("", CgroupResource.BLKIO_COST_MODEL, f"{dev.devno} ctrl=auto",
                                                owner=self.name, reason=f"{block.name}: iocost model auto"))
        # de-duplicate (several classes may name one device for the root)
        root = list({(w.resource, w.value): w for w in root}.values())
        lifted = self._lift(previous, lines, "no longer configured")
        plans = tuple(ResourcePlan.single(ws) for ws in (root, writes + lifted) if ws)
        summary = f"{len(lines)} throttle lines on {len({d for _, _, d in lines})} devices; {len(root)} iocost lines"
        return QoSPlan(self.name, summary, numbers(lines=len(lines), lifted=len(lifted), root=len(root)),
                       writes=plans, notes=tuple(dict.fromkeys(notes)), state=frozenset(lines))
