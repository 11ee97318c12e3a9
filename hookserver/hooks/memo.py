"""Stage outcomes memoized by the identity of their inputs, for the NRI hot path.

A plugin that sets `pure_decision = True` promises that its container hooks return a value that depends
only on the request's pod (the `PodRequest` as a whole), the container's name and resources, and the
view's NodeSLO, node and GPU inventory (`view.node_slo`, `view.node`, `view.cpu_normalization_ratio`,
`view.gpus`): no I/O, no state
of its own, nothing else of the container (id, annotations, env, cgroup parent, attempt) and not the
view's pod map. When every hook of a stage makes that promise, the same inputs give the same outcome,
and running the hooks again (breaker admission, three clock reads, the outcome records) is ~4 us of a
CreateContainer that the runtime waits for on a busy CPU.

The key is identity, never equality: the NRI translation hands out one `PodRequest` per pod and one
`Resources` per resource set (`nri.translate`), and the store one NodeSLO and one node object until they
change, so equal inputs are the same objects and a changed input is a new object, hence a miss. (Other
pods coming and going do not count: a pure hook does not read them.) The entry holds those objects, so
an id is never reused while its entry lives. Outcomes with an error are not kept. The memo is per
connection (one thread) and bounded.
"""

from __future__ import annotations

from hookserver.hooks.context import ContainerRequest
from hookserver.hooks.outcome import StageOutcome
from hookserver.hooks.stages import Stage
from hookserver.view import NodeView

__all__ = ["StageMemo"]

# (pod, resources, node_slo, node, handlers, outcome, gpus)
_Entry = tuple[object, object, object, object, object, StageOutcome, object]


class StageMemo:
    __slots__ = ("_entries", "_max", "hits", "misses")

    def __init__(self, max_entries: int = 1024) -> None:
        self._entries: dict[tuple[Stage, int, str, int, int, int], _Entry] = {}
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, stage: Stage, handlers: object, request: ContainerRequest, view: NodeView) -> StageOutcome | None:
        """The outcome kept for exactly these inputs (and these handlers), or None."""
        pod, resources, slo, node = request.pod, request.resources, view.node_slo, view.node
        entry = self._entries.get((stage, id(pod), request.name, id(resources), id(slo), id(node)))
        if (
            entry is not None and entry[0] is pod and entry[1] is resources and entry[2] is slo and entry[3] is node
            and entry[4] is handlers and entry[6] is view.gpus
        ):
            self.hits += 1
            return entry[5]
        self.misses += 1
        return None

    def put(
        self, stage: Stage, handlers: object, request: ContainerRequest, view: NodeView, outcome: StageOutcome
    ) -> None:
        if outcome.failed:
            return  # an error is never reused: the next call runs the hooks again
        entries = self._entries
        if len(entries) >= self._max:
            entries.clear()  # a bound, not an LRU: the working set is the node's pods x containers
        pod, resources, slo, node = request.pod, request.resources, view.node_slo, view.node
        entries[(stage, id(pod), request.name, id(resources), id(slo), id(node))] = (
            pod, resources, slo, node, handlers, outcome, view.gpus,
        )

    def __len__(self) -> int:
        return len(self._entries)

    def status(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries)}
