"""The pod-level resctrl groups for the Resctrl hook's reconciler (`qos.isolation.pod_resctrl`): every
`koordlet-<pod uid>` directory under the resctrl root, with its schemata and tasks, and which of them this
agent created. Read beside the class-level groups (`kernel_reader.read_resctrl`), into the same facts.

koordlet names a pod's group `koordlet-` + the pod's uid (`pkg/koordlet/util/resctrl`, ClosdIdPrefix), so a
node that ran koordlet before has the same names, and the class-level groups (LSR, LS, BE) never match.
"""

from __future__ import annotations

import dataclasses
import os
from types import MappingProxyType

from hookserver.errors import SystemFileError
from hookserver.system.files import read_text
from qos.snapshot.kernel import ResctrlFacts

__all__ = ["ANNOTATION_POD_RESCTRL", "POD_GROUPS_SECTION", "POD_GROUP_PREFIX", "with_pod_groups"]

# koordinator apis/extension: AnnotationResctrl = NodeDomainPrefix + "/resctrl" (a JSON ResctrlConfig).
ANNOTATION_POD_RESCTRL = "node.koordinator.sh/resctrl"
POD_GROUP_PREFIX = "koordlet-"
POD_GROUPS_SECTION = "resctrl_pod_groups"


def _text(path: str) -> str:
    try:
        return read_text(path) or ""
    except SystemFileError:  # a group being removed right now: read as empty, seen whole next round
        return ""


def with_pod_groups(facts: ResctrlFacts, root: str, *, created: frozenset[str]) -> ResctrlFacts:
    """`facts` with the pod-level groups found under `root` (none when resctrl is unusable)."""
    if facts.problem:
        return dataclasses.replace(facts, pod_created=created)
    schemata: dict[str, str] = {}
    tasks: dict[str, frozenset[int]] = {}
    try:
        names = sorted(e.name for e in os.scandir(root) if e.is_dir() and e.name.startswith(POD_GROUP_PREFIX))
    except OSError:
        names = []
    for name in names:
        schemata[name] = _text(os.path.join(root, name, "schemata")).strip()
        tasks[name] = frozenset(int(t) for t in _text(os.path.join(root, name, "tasks")).split() if t.isdigit())
    return dataclasses.replace(facts, pod_groups=MappingProxyType(schemata), pod_group_tasks=MappingProxyType(tasks),
                               pod_created=created)
