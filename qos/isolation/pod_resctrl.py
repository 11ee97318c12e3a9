"""PodResctrl (koordlet's `runtimehooks/hooks/resctrl`, gate Resctrl, off by default): a resctrl group of its
own for each pod that asks for one in `node.koordinator.sh/resctrl`, beside the class-level LSR/LS/BE groups
(`qos.resctrl`, gate RdtResctrl).

koordlet's rules (facts from koordinator `apis/extension/resctrl.go` and `pkg/koordlet/util/resctrl`):
  * The annotation is JSON: `{"llc": {"schemata": {"range": [start %, end %]}, "schemataPerCache":
    [{"cacheID": n, "range": [s, e]}]}, "mb": {"schemata": {"percent": p}, "schemataPerCache": [{"cacheID":
    n, "percent": p}]}}`. Per-cache entries override the all-cache value for their cache id.
  * The group is `koordlet-<pod uid>` under the resctrl root; the L3 mask is the class-level formula over the
    CBM width (`qos.framework.resctrl_groups`), the MB value likewise per vendor.
  * A schemata line is written only when every cache id has a value: a pod that sets cache 0 only (of two)
    gets no L3 line, and a pod without `mb` no MB line (the group then keeps the kernel's full default).
    A range outside 0..100 or with end <= start is an error: no L3 line.
  * Every task of the pod's containers not yet in the group is written to its `tasks`; a group whose pod is
    gone or lost the annotation is removed (the kernel returns its tasks to the default group).

Where this agent differs, and why: koordlet also answers PreRunPodSandbox / PreCreateContainer so that NRI
starts the container inside the group (`rdt_class`); here the group is made and the tasks moved by this
reconciler only (within one round, 1 s), because hookserver's hook results carry no RDT class yet. Only
groups this agent created are removed (a `koordlet-*` group left by koordlet is used but never removed: its
pod's group was not ours to delete); `hookserver cleanup` removes the created ones.

While this gate is on, the class-level reconciler leaves the tasks of annotated pods alone, so a task is
never moved back and forth between the pod's group and its class's (one owner per task).

Knobs (qos.framework.knobs): the pod-level groups' schemata and tasks, pod level.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hookserver.executor.plan import FileWrite
from hookserver.featuregates import FeatureGate
from hookserver.system.resctrl import schemata_holds
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler
from qos.framework.resctrl_groups import cat_mask, mba_value, remove_group_writes, task_writes, unusable
from qos.snapshot.kernel import ResctrlFacts
from qos.snapshot.model import QoSSnapshot
from qos.snapshot.pod_resctrl_reader import ANNOTATION_POD_RESCTRL, POD_GROUP_PREFIX, POD_GROUPS_SECTION

__all__ = ["PodResctrl", "ResctrlAnnotationError", "pod_schemata"]


class ResctrlAnnotationError(ValueError):
    """The pod's `node.koordinator.sh/resctrl` cannot be used (the plan's notes name the pod)."""


class _NoLine(Exception):
    """The L3 line is left out (koordlet logs the range and writes no L3)."""


def _obj(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ResctrlAnnotationError(f"{where} is not an object")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResctrlAnnotationError(f"{where}={value!r} is not an integer")
    return value


def _per_cache(section: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    entries = section.get("schemataPerCache")
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ResctrlAnnotationError(f"{where}.schemataPerCache is not a list")
    return [_obj(e, f"{where}.schemataPerCache[{i}]") for i, e in enumerate(entries)]


def _l3_values(llc: Mapping[str, Any], r: ResctrlFacts, notes: list[str]) -> dict[str, int]:
    """Cache id -> mask (0 = unset), as koordlet fills them: the all-cache range, then per-cache ones."""
    values = dict.fromkeys(r.l3_domains, 0)

    def mask(rng: object, where: str) -> int | None:
        if not isinstance(rng, list) or len(rng) != 2:
            return None  # koordlet: a range without exactly two numbers is ignored
        start, end = _int(rng[0], f"{where}[0]"), _int(rng[1], f"{where}[1]")
        if start < 0 or end > 100 or end <= start:
            notes.append(f"llc range {start}..{end} % is not within 0..100 with end > start: no L3 line")
            raise _NoLine
        return cat_mask(r.cbm_bits, start, end, min_bits=max(r.min_cbm_bits, 1))

    schemata = _obj(llc.get("schemata"), "llc.schemata")
    whole = mask(schemata.get("range"), "llc.schemata.range")
    if whole is not None:
        values = dict.fromkeys(values, whole)
    for i, entry in enumerate(_per_cache(llc, "llc")):
        one = mask(entry.get("range"), f"llc.schemataPerCache[{i}].range")
        if one is not None:
            values[str(_int(entry.get("cacheID", 0), f"llc.schemataPerCache[{i}].cacheID"))] = one
    return values


def _mb_values(mb: Mapping[str, Any], r: ResctrlFacts) -> dict[str, int]:
    values = dict.fromkeys(r.mb_domains, 0)

    def value(percent: int) -> int:
        return mba_value(percent, vendor=r.vendor, gran=r.mba_gran, minimum=r.mba_min) if percent > 0 else 0

    percent = _int(_obj(mb.get("schemata"), "mb.schemata").get("percent", 0), "mb.schemata.percent")
    if percent:
        values = dict.fromkeys(values, value(percent))
    for i, entry in enumerate(_per_cache(mb, "mb")):
        cache = str(_int(entry.get("cacheID", 0), f"mb.schemataPerCache[{i}].cacheID"))
        values[cache] = value(_int(entry.get("percent", 0), f"mb.schemataPerCache[{i}].percent"))
    return values


def _line(kind: str, values: Mapping[str, int], known: tuple[str, ...], fmt: str) -> str:
    """`KIND:id=v;...` when every known cache id, and only those, has a positive value; else ""."""
    if not values or set(values) != set(known) or any(v <= 0 for v in values.values()):
        return ""
    return f"{kind}:" + ";".join(f"{d}={format(values[d], fmt)}" for d in sorted(values, key=_cache_order))


def _cache_order(cache: str) -> tuple[int, str]:
    return (int(cache), cache) if cache.isdigit() else (1 << 30, cache)


def pod_schemata(text: str, r: ResctrlFacts) -> tuple[list[str], list[str]]:
    """The schemata lines (L3, MB; each only when complete) for an annotation, and notes on what was left out.
    Raises ResctrlAnnotationError for text that is not koordlet's JSON shape."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ResctrlAnnotationError(f"{ANNOTATION_POD_RESCTRL} is not JSON: {exc}") from None
    config = _obj(doc, ANNOTATION_POD_RESCTRL)
    notes: list[str] = []
    lines: list[str] = []
    llc, mb = _obj(config.get("llc"), "llc"), _obj(config.get("mb"), "mb")
    if llc and r.cat:
        try:
            l3 = _line("L3", _l3_values(llc, r, notes), r.l3_domains, "x")
        except _NoLine:
            l3 = ""
        if l3:
            lines.append(l3)
        elif not notes:
            notes.append("llc does not give every L3 cache a range: no L3 line")
    elif llc:
        notes.append("no L3 CAT on this node: llc ignored")
    if mb and r.mba:
        line = _line("MB", _mb_values(mb, r), r.mb_domains, "d")
        if line:
            lines.append(line)
        else:
            notes.append("mb does not give every memory domain a percent: no MB line")
    elif mb:
        notes.append("no MBA on this node: mb ignored")
    return lines, notes


class PodResctrl(Reconciler):
    name = "PodResctrl"
    gate = FeatureGate("Resctrl", False, "a resctrl group per pod from its node.koordinator.sh/resctrl annotation")
    default_interval_s = 1.0
    acts_on = ("resctrl",)

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        created = snap.kernel.resctrl.pod_created
        if not created:
            return QoSPlan.skip(self.name, why, state=state)
        return QoSPlan(self.name, f"disabled ({why}); removing pod groups {', '.join(sorted(created))}",
                       files=tuple(remove_group_writes(created, section=POD_GROUPS_SECTION, owner=self.name, why=why)),
                       state=state)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        skipped = unusable(snap, self.name, state)
        if skipped is not None:
            return skipped
        r = snap.kernel.resctrl
        files: list[FileWrite] = []
        notes: list[str] = []
        wanted: set[str] = set()
        moved = 0
        for pod in snap.pods:
            text = pod.annotations.get(ANNOTATION_POD_RESCTRL)
            pk = snap.kernel.pods.get(pod.uid)
            if text is None or pk is None or not pod.active:
                continue
            group = POD_GROUP_PREFIX + pod.uid
            try:
                lines, why = pod_schemata(text, r)
            except ResctrlAnnotationError as exc:
                notes.append(f"{pod.key}: {exc}; no group")
                continue
            notes += [f"{pod.key}: {n}" for n in why]
            wanted.add(group)
            exists = group in r.pod_groups
            if not exists:
                files.append(FileWrite("resctrl", group, op="mkdir", owner=self.name, original="record",
                                       original_key=(POD_GROUPS_SECTION, group),
                                       reason=f"{pod.key}: create its resctrl group"))
            for line in lines:
                if exists and schemata_holds(r.pod_groups[group], line):
                    continue
                files.append(FileWrite("resctrl", f"{group}/schemata", line, compare="schemata", owner=self.name,
                                       reason=f"{pod.key}: {ANNOTATION_POD_RESCTRL} -> {line}"))
            tasks = task_writes(pk, pod.key, group, r.pod_group_tasks.get(group, frozenset()), owner=self.name)
            moved += len(tasks)
            files += tasks
        stale = {g for g in r.pod_created if g not in wanted}
        files += remove_group_writes(stale, section=POD_GROUPS_SECTION, owner=self.name,
                                     why="its pod is gone or no longer asks for one")
        summary = f"{len(wanted)} pod groups; {moved} tasks to move; {len(stale)} groups to remove"
        return QoSPlan(self.name, summary, numbers(pod_groups=len(wanted), tasks_moved=moved, removed=len(stale)),
                       files=tuple(files), notes=tuple(dict.fromkeys(notes)), state=state)
