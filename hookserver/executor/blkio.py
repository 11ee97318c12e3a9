"""The blkio controller: the weight (v1 `blkio.weight` [10, 1000] becomes v2 `io.weight` [1, 10000]), the
per-device throttles and iocost (below).

v2 `io.weight` reads back as `default <n>` (plus per-device lines); only the default is compared.
"""

from __future__ import annotations

import re
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


# -- throttles and iocost (per-device lines) ----------------------------------------------------------
# A plan value is one line `maj:min value` (throttles) or `maj:min key=value ...` (iocost); the file holds
# one line per device. "Already set" means that device's line says so (`holds`), not that the file equals
# the line. A throttle of 0 lifts the limit: the kernel then drops the device's line (v2: `max`).
_V2_FIELD = {
    CgroupResource.BLKIO_READ_BPS: "rbps",
    CgroupResource.BLKIO_WRITE_BPS: "wbps",
    CgroupResource.BLKIO_READ_IOPS: "riops",
    CgroupResource.BLKIO_WRITE_IOPS: "wiops",
}
_DEVNO = re.compile(r"^\d+:\d+$")


def _split_line(value: int | str) -> tuple[str, str]:
    devno, _, rest = str(value).strip().partition(" ")
    return devno, rest.strip()


def _device_lines(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        devno, rest = _split_line(line)
        if _DEVNO.match(devno):
            out[devno] = rest
    return out


def _check_throttle(value: int | str, v2: bool) -> str:
    devno, rest = _split_line(value)
    if not _DEVNO.match(devno) or not rest.isdigit():
        return f"a throttle must be 'maj:min <non-negative integer>', got {value!r}"
    return ""


def _throttle_knob(resource: CgroupResource) -> Knob:
    field = _V2_FIELD[resource]

    def render(value: int | str, v2: bool, current: str) -> str:
        devno, rest = _split_line(value)
        if v2:
            return f"{devno} {field}={'max' if int(rest) == 0 else rest}"
        return f"{devno} {rest}"

    def holds(current: str, text: str, v2: bool) -> bool:
        devno, rest = _split_line(text)
        line = _device_lines(current).get(devno)
        if v2:
            wanted = dict(t.split("=", 1) for t in rest.split() if "=" in t)[field]
            have = dict(t.split("=", 1) for t in (line or "").split() if "=" in t).get(field, "max")
            return have == wanted
        if rest == "0":
            return line is None or line == "0"
        return line == rest

    return Knob(resource, "blkio", resource.value, "io.max", check=_check_throttle, render=render,
                key=lambda text, v2: text.strip(), holds=holds)


def _check_cost_line(value: int | str, v2: bool) -> str:
    devno, rest = _split_line(value)
    if not _DEVNO.match(devno) or not rest or any("=" not in t for t in rest.split()):
        return f"an iocost line must be 'maj:min key=value ...', got {value!r}"
    return ""


def _cost_holds(current: str, text: str, v2: bool) -> bool:
    devno, rest = _split_line(text)
    have = dict(t.split("=", 1) for t in _device_lines(current).get(devno, "").split() if "=" in t)
    for token in rest.split():
        key, _, want = token.partition("=")
        got = have.get(key)
        if got is None:
            return False
        try:
            if float(got) != float(want):
                return False
        except ValueError:
            if got != want:
                return False
    return True


def _check_cost_weight(value: int | str, v2: bool) -> str:
    return check_int_range("blkio.cost.weight", 1, 100)(value, v2)


BLKIO_KNOBS = BLKIO_KNOBS + tuple(_throttle_knob(r) for r in _V2_FIELD) + (
    Knob(
        CgroupResource.BLKIO_COST_WEIGHT, "blkio", "blkio.cost.weight", "io.weight",
        check=_check_cost_weight, render=lambda value, v2, current: str(int(value)), key=_key,
    ),
    Knob(
        CgroupResource.BLKIO_COST_QOS, "blkio", "blkio.cost.qos", "io.cost.qos",
        check=_check_cost_line, render=lambda value, v2, current: str(value).strip(),
        key=lambda text, v2: text.strip(), holds=_cost_holds,
    ),
    Knob(
        CgroupResource.BLKIO_COST_MODEL, "blkio", "blkio.cost.model", "io.cost.model",
        check=_check_cost_line, render=lambda value, v2, current: str(value).strip(),
        key=lambda text, v2: text.strip(), holds=_cost_holds,
    ),
)
