"""OOMScoreAdj (koordlet's `runtimehooks/hooks/oomscoreadj`, gate OOMScoreAdj, off by default): the OOM
killer's ordering per pod, from the pod's annotations, on every process of its containers.

koordlet's rules (facts from koordinator, not its code):
  * `koordinator.sh/oom-score-adj-spec` is a JSON map container name -> value; a container it names gets
    that value. Otherwise `koordinator.sh/oom-score-adj` (an integer) is the pod's default. Neither: the
    container is left alone. Init and sidecar containers count; the sandbox (pause) container never (its
    score is the runtime's, -998, and lowering it could get the sandbox killed first).
  * Pods Running or Pending only; the value goes to `/proc/<pid>/oom_score_adj` of every pid in the
    container's cgroup, and koordlet does it from its reconciler only (no runtime-hook stage): a process
    forked since is caught at the next round. A pid already at the value is not rewritten.
  * An unparsable annotation or a value outside [-1000, 1000] leaves the container alone (logged there;
    here a note in the plan, shown by `hookctl qos`).
  * Removing the annotation does not put the runtime's value back.

Where this agent differs, and why:
  * A value below -997 is raised to -997, the kubelet's guaranteed-pod value: -998 is the sandbox's and
    -999 the kubelet's and the runtime's; a pod process more protected than those would outlive the node
    agents that keep the node alive. The plan's note says which container was raised.
  * Before the first change to a process, its score is recorded in the state dir under the process's
    `<pid>@<start ticks>` key (`hookserver.system.processes`), so `hookserver cleanup` (and turning the gate
    off) puts it back on that same process and never on a process that reused the pid. Originals of
    processes that exited are forgotten by the snapshot reader.

Without CAP_SYS_RESOURCE (a container that dropped it) the kernel refuses to lower a score below what the
runtime set; a lowering is then not attempted each second, and the plan's note says so (raising still works).

Failure policy: this never runs on a creation path, so it can never block one; a process that exits
mid-round is a skipped write, not a failure (hookserver.executor.sysfiles).

Knob (qos.framework.knobs): `oom_score_adj` at container level for every class.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hookserver.executor.plan import FileWrite
from hookserver.featuregates import FeatureGate
from hookserver.system.processes import OOM_SCORE_ADJ_MAX, OOM_SCORE_ADJ_MIN, process_key, split_process_key
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler
from qos.snapshot.model import QoSSnapshot
from qos.snapshot.oom_reader import ANNOTATION_OOM_SCORE_ADJ, ANNOTATION_OOM_SCORE_ADJ_SPEC, ORIGINALS_SECTION

__all__ = ["KUBELET_POD_MIN", "OOMScoreAdj", "restore_writes", "target_score"]

# pkg/kubelet/qos/policy.go: guaranteedOOMScoreAdj; the kubelet and kube-proxy run at -999, the sandbox at -998.
KUBELET_POD_MIN = -997
_ACTIVE_PHASES = ("Running", "Pending")


class AnnotationProblem(ValueError):
    """The pod's oom-score-adj annotation cannot be used (shown in the plan's notes, container left alone)."""


def target_score(annotations: Mapping[str, str], container: str) -> int | None:
    """koordlet's choice for `container`: its entry in the spec map, else the pod default, else None.
    Raises AnnotationProblem naming the annotation for a value that does not parse or is out of range."""
    spec = annotations.get(ANNOTATION_OOM_SCORE_ADJ_SPEC, "")
    if spec:
        try:
            parsed = json.loads(spec)
        except ValueError as exc:
            raise AnnotationProblem(f"{ANNOTATION_OOM_SCORE_ADJ_SPEC} is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise AnnotationProblem(f"{ANNOTATION_OOM_SCORE_ADJ_SPEC} is not a map of container name -> integer")
        if container in parsed:
            return _checked(parsed[container], f"{ANNOTATION_OOM_SCORE_ADJ_SPEC}[{container}]")
    default = annotations.get(ANNOTATION_OOM_SCORE_ADJ, "")
    if default:
        try:
            value: object = int(default.strip(), 10)
        except ValueError:
            raise AnnotationProblem(f"{ANNOTATION_OOM_SCORE_ADJ}={default!r} is not an integer") from None
        return _checked(value, ANNOTATION_OOM_SCORE_ADJ)
    return None


def _checked(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnnotationProblem(f"{where}={value!r} is not an integer")
    if not OOM_SCORE_ADJ_MIN <= value <= OOM_SCORE_ADJ_MAX:
        raise AnnotationProblem(f"{where}={value} is outside [{OOM_SCORE_ADJ_MIN}, {OOM_SCORE_ADJ_MAX}]")
    return value


def restore_writes(originals: Mapping[str, str], *, owner: str, why: str) -> list[FileWrite]:
    """Put recorded scores back (process key -> value), each forgotten once written."""
    out: list[FileWrite] = []
    for key, value in sorted(originals.items()):
        parsed = split_process_key(key)
        if parsed is None:
            continue
        out.append(FileWrite("proc", f"{parsed[0]}/oom_score_adj", value, compare="int", owner=owner,
                             original="restore", original_key=(ORIGINALS_SECTION, key),
                             reason=f"restore oom_score_adj of pid {parsed[0]} to {value} ({why})"))
    return out


class OOMScoreAdj(Reconciler):
    name = "OOMScoreAdj"
    gate = FeatureGate("OOMScoreAdj", False, "oom_score_adj of pod processes from the koordinator.sh/oom-score-adj annotations")
    default_interval_s = 1.0
    acts_on = ("process",)

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        originals = snap.kernel.oom.originals
        if not originals:
            return QoSPlan.skip(self.name, why, state=state)
        return QoSPlan(self.name, f"disabled ({why}); restoring {len(originals)} processes' oom_score_adj",
                       files=tuple(restore_writes(originals, owner=self.name, why=why)), state=state)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        if "oom" not in snap.kernel.read:
            return QoSPlan.skip(self.name, "processes not read this round", state=state)
        oom = snap.kernel.oom
        processes = oom.processes
        kernel_pods = snap.kernel.pods
        files: list[FileWrite] = []
        notes: list[str] = []
        containers = at_value = held = 0
        for pod in snap.pods:
            pk = kernel_pods.get(pod.uid)
            if pk is None or pod.terminating or pod.phase not in _ACTIVE_PHASES:
                continue
            for c in pk.containers:
                if c.id not in processes:
                    continue
                try:
                    wanted = target_score(pod.annotations, c.name)
                except AnnotationProblem as exc:
                    notes.append(f"{pod.key}/{c.name}: {exc}; left alone")
                    continue
                if wanted is None:
                    continue
                target = max(wanted, KUBELET_POD_MIN)
                if target != wanted:
                    notes.append(f"{pod.key}/{c.name}: {wanted} raised to {target} (below is the kubelet's, "
                                 "the runtime's and the sandbox's)")
                containers += 1
                for proc in processes[c.id]:
                    if proc.score == target:
                        at_value += 1
                        continue
                    if target < proc.score and not oom.can_lower:
                        held += 1
                        notes.append(f"{pod.key}/{c.name}: cannot lower oom_score_adj to {target} without "
                                     "CAP_SYS_RESOURCE; left where the runtime put it")
                        continue
                    files.append(FileWrite(
                        "proc", f"{proc.pid}/oom_score_adj", str(target), compare="int", owner=self.name,
                        original="record", original_key=(ORIGINALS_SECTION, process_key(proc.pid, proc.start_ticks)),
                        reason=f"{pod.key}/{c.name}: pid {proc.pid} oom_score_adj {proc.score} -> {target}",
                    ))
        summary = f"{containers} containers annotated; {len(files)} processes to set, {at_value} already at their value"
        if held:
            summary += f", {held} held (no CAP_SYS_RESOURCE to lower)"
        return QoSPlan(self.name, summary,
                       numbers(containers=containers, to_set=len(files), at_value=at_value, held=held),
                       files=tuple(files), notes=tuple(dict.fromkeys(notes)), state=state)
