"""The blkio controller's weight: v1 `blkio.weight` [10, 1000] becomes v2 `io.weight` [1, 10000].

v2 `io.weight` reads back as `default <n>` (plus per-device lines); only the default is compared.
"""

from __future__ import annotations

from collections.abc import Hashable

from hookserver.executor.convert import blkio_weight_to_io_weight
from hookserver.executor.knob import Knob, check_int_range
from hookserver.executor.plan import CgroupResource

__all__ = ["BLKIO_KNOBS"]


def _render(value: int | str, v2: bool, current: str) -> str:
    weight = int(value)
    return str(blkio_weight_to_io_weight(weight)) if v2 else str(weight)


def _key(text: str, v2: bool) -> Hashable:
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 1 or (len(fields) == 2 and fields[0] == "default"):
            try:
                return int(fields[-1])
            except ValueError:
                return line.strip()
    return text.strip()


BLKIO_KNOBS: tuple[Knob, ...] = (
    Knob(
        CgroupResource.BLKIO_WEIGHT, "blkio", "blkio.weight", "io.weight",
        check=check_int_range("blkio.weight", 10, 1000), render=_render, key=_key, readback=True,
    ),
)
