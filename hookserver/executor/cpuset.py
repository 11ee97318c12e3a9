"""The cpuset controller's files and their rules.

Values are cpu/node lists (`0-3,8`); sets that are equal as sets are not rewritten. On v2 an empty file inherits
its parent's set (`cpuset.*.effective` shows it): it is compared as that set, and an empty value may be written
to go back to inheriting. In a leveled update the
kernel refuses a child that is not a subset of its parent, so pass 1 widens top-down to old ∪ new (or does
nothing when new ⊆ old) and pass 2 narrows bottom-up to the real value.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from hookserver.system.cpulist import format_cpu_list, parse_cpu_list
from hookserver.executor.knob import Knob, Merge
from hookserver.executor.plan import CgroupResource

__all__ = ["CPUSET_KNOBS"]

_MAX_ID = 1 << 16


def _check_list(name: str) -> Callable[[int | str, bool], str]:
    def check(value: int | str, v2: bool) -> str:
        text = str(value)
        try:
            ids = parse_cpu_list(text)
        except ValueError as exc:
            return f"{name} {text!r}: {exc}"
        if not ids:
            # v2 takes an empty list: the cgroup inherits its parent's set again (what `hookserver cleanup`
            # restores where the kubelet left the file empty); v1 refuses it, and no task could run there.
            return "" if v2 and not text.strip() else f"{name} must not be empty"
        if max(ids) >= _MAX_ID:
            return f"{name} {text!r}: id {max(ids)} too large"
        return ""

    return check


def _render(value: int | str, v2: bool, current: str) -> str:
    # An empty list is written as a bare newline: the kernel never sees a zero-length write (the VFS returns
    # before the cgroup's handler), so "" would leave a v2 cpuset pinned while the write reports success.
    return format_cpu_list(parse_cpu_list(str(value))) or "\n"


def _key(text: str, v2: bool) -> Hashable:
    try:
        return parse_cpu_list(text)
    except ValueError:
        return text.strip()


def _unkey(key: Hashable, v2: bool) -> str:
    assert isinstance(key, frozenset)
    return format_cpu_list(key)


def _knob(resource: CgroupResource) -> Knob:
    check = _check_list(resource.value)
    return Knob(
        resource, "cpuset", resource.value, resource.value,
        check=check, render=_render, key=_key, merge=Merge.UNION, readback=True,
        order=4 if resource is CgroupResource.CPUSET_MEMS else 5, unkey=_unkey,
        v2_inherited=f"{resource.value}.effective",
    )


# mems before cpus: matches the order runc sets them and the kernel's own checks on a fresh cpuset.
CPUSET_KNOBS: tuple[Knob, ...] = (_knob(CgroupResource.CPUSET_MEMS), _knob(CgroupResource.CPUSET_CPUS))
