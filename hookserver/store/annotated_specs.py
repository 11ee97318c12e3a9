"""A container's batch requests and limits from koord-manager's `node.koordinator.sh/extended-resource-spec`
annotation, for a pod whose spec the agent does not have.

Why: a BE pod known only from the proxy or NRI (standalone mode, or before the informer delivers it) has no
pod spec, and what the runtime announced for it is the kubelet's view of a BestEffort container: cpu.shares 2
and no quota, i.e. "no request". Its batch-cpu request then never reached the BE CPU request sum, and the
BE-satisfaction CPU evictor saw a request of 0 on every round (issue 39). koord-manager's webhook copies each
app container's batch-cpu/batch-memory requests and limits from the pod spec into this annotation
(`pkg/webhook/pod/mutating/extended_resource_spec.go`), so its entry for a container is the spec's own batch
resources: it stands in for the spec exactly, under the same names and quantity texts.

Lenient where the batch hook is strict: the hook reports a malformed annotation (its decision carries the
error); here it only means "not known", so `store.specs` falls back to the announced values, and the pod gets
one warning line. The hook's parser is not imported: the store sits below the hooks (.importlinter). Both
judge quantities by `hookserver.quantity.resource_amount`.

Cost: `container_spec` runs per container per round (collectors, snapshot builder, kernel reader), so a
text's parse is cached (bounded LRU, keyed by the annotation text; a pod's text is one string object, whose
hash Python keeps).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.errors import InputError
from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC, BATCH_CPU, BATCH_MEMORY, LEGACY_BATCH_NAMES
from hookserver.quantity import resource_amount
from hookserver.store.records import PodRecord

__all__ = ["AnnotatedSpec", "annotated_container_spec"]

log = logging.getLogger(__name__)

# (requests, limits): resource name -> quantity text, batch resources only, under their current names.
AnnotatedSpec = tuple[Mapping[str, str], Mapping[str, str]]

# A pod's annotations are at most 256 KiB together (the apiserver's limit); a longer text is not one it admitted.
_MAX_TEXT = 256 * 1024
# Distinct annotation texts kept parsed: one per BE pod on the node (kubelet's default is 110 pods), with room.
_CACHE_TEXTS = 1024
_EMPTY: Mapping[str, str] = MappingProxyType({})


class _Malformed(str):
    """Why a text could not be read: cached like a parse, so a bad annotation is parsed once, not per round."""

    __slots__ = ()


def annotated_container_spec(pod: PodRecord, name: str) -> AnnotatedSpec | None:
    """The annotation's (requests, limits) for container `name`, or None: no annotation, no entry for that
    name (an init container, a container added outside the spec), or a malformed annotation (logged once)."""
    text = pod.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if text is None:
        return None
    entries = _entries(text)
    if isinstance(entries, _Malformed):
        _warn_once(pod.uid, pod.key, entries)
        return None
    return entries.get(name)


@functools.lru_cache(maxsize=_CACHE_TEXTS)
def _entries(text: str) -> Mapping[str, AnnotatedSpec] | _Malformed:
    try:
        return MappingProxyType(_parse(text))
    except (ValueError, InputError) as exc:  # json's errors are ValueErrors; a bad quantity is an InputError
        return _Malformed(str(exc))


@functools.lru_cache(maxsize=_CACHE_TEXTS)
def _warn_once(uid: str, key: str, problem: str) -> None:
    """Cached, so a malformed annotation costs its pod one line, not one per container per round."""
    log.warning("pod %s (%s): %s annotation not read, its requests come from the runtime's announced values: %s",
                key, uid, ANNOTATION_EXTENDED_RESOURCE_SPEC, problem)


def _parse(text: str) -> dict[str, AnnotatedSpec]:
    """Container name -> (requests, limits) of the webhook's JSON `{"containers": {"<name>": {"requests": {...},
    "limits": {...}}}}`. ValueError/InputError on any malformed part: a half-read annotation would count a pod
    short."""
    if len(text) > _MAX_TEXT:
        raise ValueError(f"{len(text)} bytes, over {_MAX_TEXT}")
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
    containers = doc.get("containers")
    if containers is None:
        return {}
    if not isinstance(containers, dict):
        raise ValueError("'containers' must be an object")
    out: dict[str, AnnotatedSpec] = {}
    for name, entry in containers.items():
        if entry is None:
            entry = {}
        if not isinstance(entry, dict):
            raise ValueError(f"containers[{name}] must be an object with 'requests' and 'limits'")
        out[name] = (_batch(entry.get("requests"), f"containers[{name}].requests"),
                     _batch(entry.get("limits"), f"containers[{name}].limits"))
    return out


def _batch(values: object, where: str) -> Mapping[str, str]:
    """The batch resources of one requests/limits object as quantity texts under their current names (a
    deprecated name counts where the current one is absent, as the batch hook reads them)."""
    if values is None:
        return _EMPTY
    if not isinstance(values, dict):
        raise ValueError(f"{where} must be an object of resource name to quantity")
    out: dict[str, str] = {}
    for resource in (BATCH_CPU, BATCH_MEMORY):
        key = resource if resource in values else LEGACY_BATCH_NAMES[resource]
        if key in values:
            out[resource] = resource_amount(values[key], field=f"{where}[{key}]").text
    return MappingProxyType(out) if out else _EMPTY
