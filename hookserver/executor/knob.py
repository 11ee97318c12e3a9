"""What the executor knows about one cgroup file: where it lives, how a value is checked, rendered for v1 or v2,
compared with what the file holds, and merged during a leveled update.

Each controller module (`cpu`, `memory`, `cpuset`, `blkio`) builds its `Knob`s; `knobs.KNOBS` collects them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from hookserver.executor.plan import CgroupResource

__all__ = ["Knob", "Merge", "check_int_range", "int_key", "plain_render"]


class Merge(enum.Enum):
    """Pass-1 behaviour of a leveled update (reference §5.9)."""

    NONE = "none"  # written plainly in pass 1, not rewritten in pass 2
    MAX = "max"  # pass 1 writes max(old, new); pass 2 the real value
    UNION = "union"  # pass 1 writes old ∪ new unless new ⊆ old; pass 2 the real value


@dataclass(frozen=True, slots=True)
class Knob:
    """One cgroup file.

    `check` validates a plan value (v1 units) and returns an error text or "". `render` turns it into the
    file text for v1 or v2, given the file's current text (v2 `cpu.max` needs the other field). `key` maps
    file text or rendered text to a comparable value: equal keys mean "already set"; MAX/UNION merges
    compare keys. `readback` marks files whose value the kernel may clamp or round.
    `order` sorts writes within one level: lower first (the CFS period before the quota).
    """

    resource: CgroupResource
    subsystem: str
    v1_file: str
    v2_file: str
    check: Callable[[int | str, bool], str]
    render: Callable[[int | str, bool, str], str]
    key: Callable[[str, bool], Hashable]
    merge: Merge = Merge.NONE
    readback: bool = False
    order: int = 10
    # Render a merged key back to file text (UNION, MAX); None: use the rendered new or the current text.
    unkey: Callable[[Hashable, bool], str] | None = None
    # Whether the file's current text already holds the rendered text, for files of several lines where
    # one write changes one line (blkio per-device throttles); None: compare `key`s.
    holds: Callable[[str, str, bool], bool] | None = None
    # v2 only: the file that shows what an EMPTY file inherits from its parent (`cpuset.cpus.effective`). An
    # empty v2 cpuset means "whatever my parent has", not "no CPUs"; the executor compares with what it
    # inherits, so a set it already gets leaves it inheriting instead of pinning it.
    v2_inherited: str = ""

    def already(self, current: str, text: str, v2: bool) -> bool:
        if self.holds is not None:
            return self.holds(current, text, v2)
        return self.key(current, v2) == self.key(text, v2)

    def file(self, v2: bool) -> str:
        return self.v2_file if v2 else self.v1_file


def plain_render(value: int | str, v2: bool, current: str) -> str:
    """The value as text, unchanged: files whose v1 and v2 forms agree."""
    return str(value)


def int_key(text: str, v2: bool) -> Hashable:
    """An integer file's value; text that is not an integer compares as itself (and so as different)."""
    token = text.strip()
    try:
        return int(token)
    except ValueError:
        return token


def check_int_range(name: str, lo: int, hi: int, *, allow: tuple[int, ...] = ()) -> Callable[[int | str, bool], str]:
    """A checker: the value must be an int in [lo, hi] or one of `allow`."""

    def check(value: int | str, v2: bool) -> str:
        try:
            number = int(value)
        except (TypeError, ValueError):
            return f"{name} must be an integer, got {value!r}"
        if number in allow or lo <= number <= hi:
            return ""
        extra = f" or one of {list(allow)}" if allow else ""
        return f"{name} {number} out of range [{lo}, {hi}]{extra}"

    return check
