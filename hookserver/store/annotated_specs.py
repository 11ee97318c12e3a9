"""A container's batch requests and limits from koord-manager's `node.koordinator.sh/extended-resource-spec`
annotation, for a pod whose spec the agent does not have.

Why: a BE pod known only from the proxy or NRI (standalone mode, or before the informer delivers it) has no
pod spec, and what the runtime announced for it is the kubelet's view of a BestEffort container: cpu.shares 2
and no quota, i.e. "no request". Its batch-cpu request then never reached the BE CPU request sum, and the
BE-satisfaction CPU evictor saw a request of 0 on every round (issue 39). koord-manager's webhook copies each
app container's batch-cpu/batch-memory requests and limits from the pod spec into this annotation
(`pkg/webhook/pod/mutating/extended_resource_spec.go`), so its entry for a container is the spec's own batch
resources: it stands in for the spec exactly, under the same names and quantity texts.

One parser with the batch hook (`hookserver.extended_resource_spec`, a shared leaf below both), read
leniently here where the hook is strict: the hook reports a malformed annotation (its decision carries the
error); here it only means "not known", so `store.specs` falls back to the announced values, and the pod gets
one warning line.

Cost: `container_spec` runs per container per round (collectors, snapshot builder, kernel reader), so a
text's parse is cached (bounded LRU, keyed by the annotation text; a pod's text is one string object, whose
hash Python keeps).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.errors import InputError
from hookserver.extended_resource_spec import batch_quantities, parse_spec_text
from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC
from hookserver.store.records import PodRecord

__all__ = ["AnnotatedSpec", "annotated_container_spec"]

log = logging.getLogger(__name__)

# (requests, limits): resource name -> quantity text, batch resources only, under their current names.
AnnotatedSpec = tuple[Mapping[str, str], Mapping[str, str]]

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
    """Container name -> (requests, limits) as quantity texts; _Malformed on any malformed part (a half-read
    annotation would count a pod short)."""
    try:
        parsed = parse_spec_text(text)
    except InputError as exc:  # AnnotationError / QuantityError, naming the JSON path
        return _Malformed(str(exc))
    return MappingProxyType({name: _frozen(batch_quantities(entry)) for name, entry in parsed.items()})


def _frozen(pair: tuple[dict[str, str], dict[str, str]]) -> AnnotatedSpec:
    return (MappingProxyType(pair[0]) if pair[0] else _EMPTY, MappingProxyType(pair[1]) if pair[1] else _EMPTY)


@functools.lru_cache(maxsize=_CACHE_TEXTS)
def _warn_once(uid: str, key: str, problem: str) -> None:
    """Cached, so a malformed annotation costs its pod one line, not one per container per round."""
    log.warning("pod %s (%s): %s annotation not read, its requests come from the runtime's announced values: %s",
                key, uid, ANNOTATION_EXTENDED_RESOURCE_SPEC, problem)
