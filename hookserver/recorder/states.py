"""The state CPU burst and memory QoS planned a recorded round from, kept in the frame.

Why: the agent plans every second and records every 10 s. CPU suppress and the evictors carry little from one
round to the next that the frame does not show, but CPU burst does: its token buckets fill and drain each
second with the container's usage, and it remembers the burst it planned last round (a value the kernel did
not take is not planned again for five minutes). A replay from one frame to the next cannot rebuild that
from 10 s samples, so the recorder keeps the state each round started from, and the replay as recorded plans
from it: its decisions are the agent's, bit for bit. Memory QoS carries only whether the agent has set
anything (which decides whether turning it off resets the files); its per-pod signatures only spare work.

Encoded small: an empty part is left out, so a node not using quota burst pays nothing per frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from qos.cpu.burst import BurstState, CPUBurst, TokenBucket
from qos.memory_qos import MemoryQoS, MemoryQoSState

__all__ = ["KEPT", "encode_state", "restore_state"]

KEPT = (CPUBurst.name, MemoryQoS.name)  # the reconcilers whose round-start state a frame keeps


def encode_state(name: str, state: Any) -> dict[str, Any] | None:
    """The part of `state` the replay restores, as JSON (None: nothing beyond the initial state)."""
    if name == CPUBurst.name and isinstance(state, BurstState):
        body: dict[str, Any] = {}
        if state.buckets:
            body["buckets"] = {d: [b.tokens, b.at] for d, b in state.buckets.items()}
        if state.planned_burst:
            body["planned"] = dict(state.planned_burst)
        if state.refused:
            body["refused"] = {d: [v, at] for d, (v, at) in state.refused.items()}
        return body or None
    if name == MemoryQoS.name and isinstance(state, MemoryQoSState):
        return {"wrote": True} if state.wrote else None
    return None


def restore_state(name: str, own: Any, recorded: Mapping[str, Any] | None) -> Any:
    """`own` (the replay's state after its previous frame) with the recorded part put back. The parts not kept
    (CPU burst's gauge values, memory QoS's per-pod signatures) stay the replay's own."""
    body = recorded or {}
    if name == CPUBurst.name:
        scaled = own.scaled if isinstance(own, BurstState) else MappingProxyType({})
        return BurstState(
            buckets=MappingProxyType({d: TokenBucket(float(v[0]), float(v[1]))
                                      for d, v in body.get("buckets", {}).items()}),
            planned_burst=MappingProxyType({d: int(v) for d, v in body.get("planned", {}).items()}),
            refused=MappingProxyType({d: (int(v[0]), float(v[1])) for d, v in body.get("refused", {}).items()}),
            scaled=scaled)
    if name == MemoryQoS.name:
        pods = own.pods if isinstance(own, MemoryQoSState) else MappingProxyType({})
        return MemoryQoSState(pods, wrote=bool(body.get("wrote", False)))
    return own
