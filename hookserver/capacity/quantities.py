"""The value type of the capacity formula: CPU in milli-cores and memory in bytes, both integers.

koord-manager computes with `resource.Quantity` and truncates every scaling to int64 (`MultiplyMilliQuant`,
`MultiplyQuant`); doing the same on plain integers here gives the published number exactly, so a hand
computation in `hookctl capacity` adds up to the digit.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookserver.fastinit import fast_frozen_init

__all__ = ["ZERO", "Pair", "scale"]


def scale(value: int, ratio: float) -> int:
    """Go's `int64(float64(v) * ratio)`: truncation toward zero."""
    return int(float(value) * ratio)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Pair:
    """CPU milli-cores and memory bytes."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, other: Pair) -> Pair:
        return Pair(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Pair) -> Pair:
        return Pair(self.cpu - other.cpu, self.memory - other.memory)

    def max(self, other: Pair) -> Pair:
        return Pair(max(self.cpu, other.cpu), max(self.memory, other.memory))

    def min(self, other: Pair) -> Pair:
        return Pair(min(self.cpu, other.cpu), min(self.memory, other.memory))

    def clamp0(self) -> Pair:
        return Pair(max(self.cpu, 0), max(self.memory, 0))

    def scaled(self, cpu_ratio: float, memory_ratio: float) -> Pair:
        return Pair(scale(self.cpu, cpu_ratio), scale(self.memory, memory_ratio))

    def as_dict(self) -> dict[str, int]:
        return {"cpu_milli": self.cpu, "memory_bytes": self.memory}


ZERO = Pair()
