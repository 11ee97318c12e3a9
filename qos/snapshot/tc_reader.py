"""TCNetworkQoS's kernel facts: the egress tc tree of the node's interface (`tc -j qdisc/class/filter show`)
and each pod's `net_cls.classid` (cgroup v1), read once per round while the gate is on or an interface the
agent changed is left to undo.

The interface is the one configured (`qos.network_interface`), else the IPv4 default route's, as koordlet
takes the default route's link. `netns` runs `tc` in another network namespace (tests build a veth pair in
one); the node's own is the default.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.store.originals import NodeOriginals
from hookserver.system.tc import (
    Runner,
    default_route_interface,
    parse_classes,
    parse_filter_prefs,
    parse_root_qdisc,
    TcClass,
    run_tc,
)
from qos.snapshot.kernel import PodKernel, TcFacts

__all__ = ["TC_SECTION", "TcReader"]

TC_SECTION = "tc"  # originals: interface -> the root qdisc kind before the agent's htb


class TcReader:
    """`read` runs `tc` three times (~17 ms on a small node): the tree is read again only when the last read is
    `max_age_s` old (TCNetworkQoS plans every 5 s) or `invalidate` was called (the tc executor calls it after
    it changed something, so a round never plans on the tree as it was before its own last change)."""

    def __init__(
        self, *, proc_root: str = "/proc", interface: str = "", netns: str = "", tc: str = "tc",
        run: Runner = run_tc, timeout_s: float = 5.0, max_age_s: float = 4.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc_root = proc_root
        self.interface = interface
        self.netns = netns
        self.tc = tc
        self._run = run
        self.timeout_s = timeout_s
        self.max_age_s = max_age_s
        self._clock = clock
        self._cached: tuple[float, str, _Tree | str] | None = None  # (when, interface, tree or problem)

    def invalidate(self) -> None:
        self._cached = None

    def _show(self, *args: str) -> tuple[int, str]:
        return self._run([self.tc, *(("-n", self.netns) if self.netns else ()), "-j", *args], self.timeout_s)

    def read(self, originals: NodeOriginals, pods: Mapping[str, PodKernel], net_cls_root: str) -> TcFacts:
        recorded_all = originals.section(TC_SECTION)
        interface = self.interface or default_route_interface(self.proc_root) or next(iter(recorded_all), "")
        recorded = recorded_all.get(interface, "")
        classids = _net_cls(net_cls_root, pods)
        if not interface:
            return TcFacts(problem="no network interface: none configured (qos.network_interface) and no IPv4 "
                                   "default route", net_cls_root=net_cls_root, net_cls=classids)
        now = self._clock()
        cached = self._cached
        if cached is not None and cached[1] == interface and now - cached[0] < self.max_age_s:
            tree = cached[2]
        else:
            tree = self._tree(interface)
            self._cached = (now, interface, tree)
        if isinstance(tree, str):
            return TcFacts(interface=interface, problem=tree, recorded=recorded, net_cls_root=net_cls_root,
                           net_cls=classids)
        return TcFacts(interface=interface, root_kind=tree.kind, root_handle=tree.handle, classes=tree.classes,
                       cgroup_prefs=tree.prefs, recorded=recorded, net_cls_root=net_cls_root, net_cls=classids)

    def _tree(self, interface: str) -> _Tree | str:
        """The interface's tree, or the problem that keeps it from being read."""
        if shutil.which(self.tc) is None and os.sep not in self.tc:
            return f"{self.tc} is not installed (iproute2)"
        status, qdisc = self._show("qdisc", "show", "dev", interface)
        if status != 0:
            return f"tc cannot read {interface}: {qdisc.splitlines()[0] if qdisc else status}"
        kind, handle = parse_root_qdisc(qdisc)
        if kind != "htb":
            return _Tree(kind, handle)
        _, classes = self._show("class", "show", "dev", interface)
        _, filters = self._show("filter", "show", "dev", interface, "parent", "1:")
        return _Tree(kind, handle, parse_classes(classes), parse_filter_prefs(filters, "cgroup"))


@dataclass(frozen=True, slots=True)
class _Tree:
    kind: str
    handle: str
    classes: Mapping[str, TcClass] = field(default_factory=lambda: MappingProxyType({}))
    prefs: frozenset[int] = frozenset()


def _net_cls(root: str, pods: Mapping[str, PodKernel]) -> Mapping[str, int]:
    if not root:
        return MappingProxyType({})
    out: dict[str, int] = {}
    for uid, pod in pods.items():
        try:
            with open(os.path.join(root, pod.dir, "net_cls.classid"), encoding="ascii") as handle:
                out[uid] = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            continue
    return MappingProxyType(out)
