"""The OOMScoreAdj reconciler's kernel facts: the processes of annotated pods' containers and their
`oom_score_adj`, read once per round (only while the gate is on, or originals are left to restore).

Which pods: those with koordlet's annotations (`koordinator.sh/oom-score-adj`, the pod default, or
`koordinator.sh/oom-score-adj-spec`, a JSON map container name -> value; koordinator `apis/extension`).
Which processes: the container cgroup's `cgroup.procs` in the cpu hierarchy (koordlet reads the same file),
so a process forked since the last round is seen at the next one. The sandbox (pause) container has no
container record here, so it is never read: its score is the runtime's (-998).

Originals left in the state dir by a process that has exited (or whose pid now names another process) can
never be restored; they are forgotten here so the file does not grow with every pod the node ever ran.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

from hookserver.store.originals import NodeOriginals
from hookserver.system.processes import can_lower_oom_scores, read_oom_score_adj, read_start_ticks, split_process_key
from qos.snapshot.kernel import OOMFacts, PodKernel, ProcessScore

__all__ = ["ANNOTATION_OOM_SCORE_ADJ", "ANNOTATION_OOM_SCORE_ADJ_SPEC", "ORIGINALS_SECTION", "read_oom_facts"]

log = logging.getLogger(__name__)

ANNOTATION_OOM_SCORE_ADJ = "koordinator.sh/oom-score-adj"
ANNOTATION_OOM_SCORE_ADJ_SPEC = "koordinator.sh/oom-score-adj-spec"
ORIGINALS_SECTION = "oom_score_adj"


def _container_processes(proc_root: str, procs_file: str) -> tuple[ProcessScore, ...]:
    try:
        with open(procs_file, "rb") as handle:
            text = handle.read().decode("ascii", errors="replace")
    except OSError:
        return ()  # the container stopped since the pod list was taken
    out: list[ProcessScore] = []
    for token in text.split():
        if not token.isdigit():
            continue
        pid = int(token)
        start = read_start_ticks(proc_root, pid)
        score = read_oom_score_adj(proc_root, pid)
        if start is None or score is None:
            continue  # exited between the two reads
        out.append(ProcessScore(pid=pid, start_ticks=start, score=score))
    return tuple(out)


def _live_originals(proc_root: str, originals: NodeOriginals) -> dict[str, str]:
    live: dict[str, str] = {}
    for key, value in originals.section(ORIGINALS_SECTION).items():
        parsed = split_process_key(key)
        if parsed is not None and read_start_ticks(proc_root, parsed[0]) == parsed[1]:
            live[key] = value
            continue
        try:
            originals.forget(ORIGINALS_SECTION, key)
        except OSError as exc:  # the state dir is read-only now: kept, tried again next round
            log.debug("oom_score_adj: cannot forget the original of %s: %s", key, exc)
    return live


def read_oom_facts(
    pods: Mapping[str, PodKernel],
    annotations_of: Callable[[str], Mapping[str, str]],
    *,
    cpu_root: str,
    proc_root: str,
    originals: NodeOriginals,
    wanted: bool = True,
) -> OOMFacts:
    """`pods`: the round's started containers by pod uid; `annotations_of(uid)` the pod's annotations.
    `wanted` False (gate off): only the originals are read, for the reconciler's undo."""
    processes: dict[str, tuple[ProcessScore, ...]] = {}
    if wanted:
        for uid, pod in pods.items():
            annotations = annotations_of(uid)
            if ANNOTATION_OOM_SCORE_ADJ not in annotations and ANNOTATION_OOM_SCORE_ADJ_SPEC not in annotations:
                continue
            for container in pod.containers:
                processes[container.id] = _container_processes(
                    proc_root, os.path.join(cpu_root, container.dir, "cgroup.procs"))
    return OOMFacts(processes=MappingProxyType(processes),
                    originals=MappingProxyType(_live_originals(proc_root, originals)),
                    can_lower=can_lower_oom_scores(proc_root) if processes else True)

