"""The kubelet's CPU manager checkpoint, `<kubelet root dir>/cpu_manager_state`, read the way koordlet reads it
(`calKubeletAllocatedCPUs` in `pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go`, which decodes
the kubelet's `state.CPUManagerCheckpoint`):

    {"policyName": "static", "defaultCpuSet": "0,5-63", "entries": {"<pod uid>": {"<container>": "1-4"}},
     "checksum": 1234567890}

The kubelet writes the file whatever its policy (`"policyName": "none"` and no entries under the default
policy), so where it exists it says which policy the kubelet really runs: hookserver reads the policy here
instead of trusting a setting, and the static policy's exclusive CPUs per container.

A missing file is `None` (no kubelet on this host, or another root dir); a file that is empty, truncated, not
JSON or not the checkpoint's shape raises `SystemFileError` naming the file, so the caller can say so once and
fall back. One container whose cpuset does not parse is skipped and named in `problems`, as koordlet skips it
(`could not parse cpuset ... for container`), without losing the pod's other containers. The checksum is not
verified: the kubelet's is a hash of Go's in-memory dump of the struct, which only the kubelet can recompute.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.errors import SystemFileError
from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.files import read_text

__all__ = ["CPU_MANAGER_STATE_FILE", "KubeletCpuManagerState", "read_cpu_manager_state"]

CPU_MANAGER_STATE_FILE = "cpu_manager_state"


@dataclass(frozen=True, slots=True)
class KubeletCpuManagerState:
    """The checkpoint, decoded: the policy, the shared (default) set and each container's exclusive CPUs."""

    path: str
    policy: str
    default_cpus: frozenset[int]
    # pod uid -> container name -> the CPUs the kubelet pinned it to (empty sets kept: the caller decides)
    entries: Mapping[str, Mapping[str, frozenset[int]]] = field(default_factory=lambda: MappingProxyType({}))
    problems: tuple[str, ...] = ()


def read_cpu_manager_state(kubelet_root_dir: str) -> KubeletCpuManagerState | None:
    """`<kubelet_root_dir>/cpu_manager_state`; None when it does not exist. Raises SystemFileError when it cannot
    be read or is not the kubelet's checkpoint."""
    path = os.path.join(kubelet_root_dir, CPU_MANAGER_STATE_FILE)
    text = read_text(path)
    if text is None:
        return None
    if not text.strip():
        raise SystemFileError(f"{path}: empty", path=path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemFileError(f"{path}: not JSON ({exc.msg} at offset {exc.pos}): truncated or corrupt",
                              path=path) from exc
    if not isinstance(doc, dict):
        raise SystemFileError(f"{path}: not the kubelet's checkpoint (a JSON {type(doc).__name__})", path=path)
    policy = doc.get("policyName")
    if not isinstance(policy, str) or not policy:
        raise SystemFileError(f"{path}: no policyName", path=path)
    try:
        default_cpus = parse_cpu_list(_string(doc.get("defaultCpuSet", ""), "defaultCpuSet", path))
    except ValueError as exc:
        raise SystemFileError(f"{path}: defaultCpuSet: {exc}", path=path) from exc
    raw_entries = doc.get("entries") or {}
    if not isinstance(raw_entries, dict):
        raise SystemFileError(f"{path}: entries is not a map of pod uid to containers", path=path)
    entries: dict[str, Mapping[str, frozenset[int]]] = {}
    problems: list[str] = []
    for uid, containers in sorted(raw_entries.items()):
        if not isinstance(containers, dict):
            # The kubelet's v1 checkpoint keyed entries by container id with a cpuset string: koordlet's decode
            # of it fails, and so does this one, whole.
            raise SystemFileError(f"{path}: entries[{uid!r}] is not a map of container to cpuset "
                                  "(an old v1 checkpoint?)", path=path)
        pinned: dict[str, frozenset[int]] = {}
        for container, cpuset in sorted(containers.items()):
            try:
                pinned[container] = parse_cpu_list(_string(cpuset, f"entries[{uid}][{container}]", path))
            except (ValueError, SystemFileError) as exc:
                problems.append(f"pod {uid} container {container}: {exc}")
        entries[uid] = MappingProxyType(pinned)
    return KubeletCpuManagerState(path=path, policy=policy, default_cpus=default_cpus,
                                  entries=MappingProxyType(entries), problems=tuple(problems))


def _string(value: object, what: str, path: str) -> str:
    if not isinstance(value, str):
        raise SystemFileError(f"{path}: {what} is not a string", path=path)
    return value
