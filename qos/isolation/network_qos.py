"""TCNetworkQoS (koordlet's `runtimehooks/hooks/tc`, gate TCNetworkQoS, off by default): the node's egress
bandwidth split between QoS classes with an htb tree on the node's interface, from NodeSLO
`systemStrategy.totalNetworkBandwidth` and `resourceQOSStrategy.{ls,be}Class.networkQOS`.

koordlet's tree (facts from koordinator, not its code), bandwidths in bits/s, T = totalNetworkBandwidth:

    qdisc 1:   htb, root, default class 1:2 (unclassified traffic is the system class's)
    class 1:1  parent root   rate T                          ceil T
    class 1:2  parent 1:1    rate T - LS request - BE request ceil T          prio 1  (system)
    class 1:3  parent 1:1    rate LS egressRequest           ceil LS egressLimit  prio 2
    class 1:4  parent 1:1    rate BE egressRequest           ceil BE egressLimit  prio 3
    filters    `cgroup` classifiers under 1: at prio 1, 2, 3 (handles 2:, 3:, 4:): a packet goes to the class
               its socket's net_cls.classid names; pods get net_cls.classid 0x10002 (SYSTEM), 0x10003
               (LSE/LSR/LS), 0x10004 (BE) from their `koordinator.sh/qosClass` label (none: left alone).

An integer request or limit is a percentage of T, a string a quantity ("20M"); only egress is shaped (the
ingress values are parsed by koordlet and not used by its tc plugin). The interface is the IPv4 default
route's (or `qos.network_interface`).

Where this agent differs, and why:
  * An unset or zero limit means no limit (ceil T), and a class's rate is at least 1 kbit/s: koordlet writes
    rate 0 / ceil 0 for a class whose networkQOS is off, which htb cannot carry. A string "N%" counts as a
    percentage too (koordlet's quantity parser would read it as 0).
  * koordlet deletes any other htb it finds at the root. Here a root qdisc that is neither the kernel's
    default kind nor an htb 1: is left alone and the status says so: it is someone else's shaping.
  * koordlet also classifies non-hostNetwork pods by IP (ipsets `system_class`/`ls_class`/`be_class` and
    iptables mangle POSTROUTING CLASSIFY rules) and gives pods with `koordinator.sh/networkQOS` their own
    class; this agent's store has no pod IPs, so neither is done here (net_cls only, cgroup v1).
  * NodeSLO `netQOSPolicy: terwayQos` is unsupported: koordlet then writes config files for the Terway CNI's
    own QoS agent (/var/lib/terway/qos), which nothing here runs; the status says so.

Undo: the kind of root qdisc the interface had is recorded (state dir, section `tc`) before the htb replaces
it; turning the gate or NodeSLO off, and `hookserver cleanup`, delete the htb (its classes and filters go with
it) and the kernel's default qdisc returns. net_cls.classids this agent set are reset to 0 when turned off.

Knobs (qos.framework.knobs): the interface's egress tc tree (node level) and pods' net_cls.classid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.errors import QuantityError
from hookserver.executor.plan import FileWrite, NetCommand
from hookserver.featuregates import FeatureGate
from hookserver.quantity import parse_quantity
from hookserver.slo.qos import NetworkQOS
from hookserver.system.tc import rates_match
from qos.framework.plan import QoSPlan, kernel_part_skip, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.kernel import TcFacts
from qos.snapshot.model import QoSSnapshot
from qos.snapshot.tc_reader import TC_SECTION

__all__ = ["CLASSID_OF_QOS", "DEFAULT_QDISCS", "ClassSpec", "TCNetworkQoS", "class_specs", "net_cls_classid"]

MAJOR = 1
SYSTEM, LS, BE = 2, 3, 4
# koordinator.sh/qosClass -> class minor (koordlet's GetPodNetQoSClassByName).
CLASSID_OF_QOS: Mapping[str, int] = {"SYSTEM": SYSTEM, "LSE": LS, "LSR": LS, "LS": LS, "BE": BE}
FILTERS = ((1, SYSTEM), (2, LS), (3, BE))  # (prio, class minor): koordlet's cgroup filters
MIN_RATE_BPS = 1000
# Root qdiscs the kernel puts on an interface by itself: replacing one takes nothing from anyone.
DEFAULT_QDISCS = frozenset({"", "noqueue", "pfifo_fast", "fq_codel", "mq", "fq", "pfifo", "noop", "cake"})


def net_cls_classid(minor: int) -> int:
    """net_cls.classid for class 1:<minor> (0xAAAABBBB: major in the high 16 bits)."""
    return MAJOR << 16 | minor


@dataclass(frozen=True, slots=True)
class ClassSpec:
    classid: str
    parent: str
    rate_bps: int
    ceil_bps: int
    prio: int = 0

    def args(self, op: str, interface: str) -> tuple[str, ...]:
        out = ("class", op, "dev", interface, "parent", self.parent, "classid", self.classid, "htb",
               "rate", f"{self.rate_bps}bit", "ceil", f"{self.ceil_bps}bit")
        return (*out, "prio", str(self.prio)) if self.prio else out


def _bandwidth(value: int | str | None, total: int, where: str) -> int:
    """koordlet's IntOrString: an int is a percentage of `total`, a string a quantity in bits/s."""
    if value is None:
        return 0
    if isinstance(value, int):
        return total * value // 100
    text = value.strip()
    if text.endswith("%") and text[:-1].isdigit():
        return total * int(text[:-1]) // 100
    try:
        return max(parse_quantity(text).value(), 0)
    except QuantityError as exc:
        raise ValueError(f"{where}={value!r}: {exc}") from None


def _class_bounds(cfg: NetworkQOS, total: int, where: str) -> tuple[int, int]:
    if not cfg.enable:
        return 0, 0
    return (_bandwidth(cfg.egress_request, total, f"{where}.egressRequest"),
            _bandwidth(cfg.egress_limit, total, f"{where}.egressLimit"))


def class_specs(total: int, ls: NetworkQOS, be: NetworkQOS, notes: list[str]) -> list[ClassSpec]:
    """The four classes for a node of `total` bits/s (see the module's table)."""
    ls_req, ls_lim = _class_bounds(ls, total, "lsClass.networkQOS")
    be_req, be_lim = _class_bounds(be, total, "beClass.networkQOS")
    system = total - ls_req - be_req
    if system < MIN_RATE_BPS:
        notes.append(f"LS and BE egress requests ({ls_req} + {be_req} bit/s) leave the system class "
                     f"{system} bit/s of {total}: it gets {MIN_RATE_BPS}")

    def leaf(minor: int, rate: int, ceil: int, prio: int) -> ClassSpec:
        rate = min(max(rate, MIN_RATE_BPS), total)
        ceil = min(ceil, total) if ceil > 0 else total
        return ClassSpec(f"{MAJOR}:{minor}", f"{MAJOR}:1", rate, max(ceil, rate), prio)

    return [
        ClassSpec(f"{MAJOR}:1", "root", total, total),
        leaf(SYSTEM, system, total, 1),
        leaf(LS, ls_req, ls_lim, 2),
        leaf(BE, be_req, be_lim, 3),
    ]


def _total_bps(snap: QoSSnapshot) -> int:
    try:
        return max(parse_quantity(snap.slo.system_strategy.total_network_bandwidth).value(), 0)
    except QuantityError:
        return 0


class TCNetworkQoS(Reconciler):
    name = "TCNetworkQoS"
    gate = FeatureGate("TCNetworkQoS", False, "egress bandwidth per QoS class with tc htb classes (NodeSLO networkQOS)")
    default_interval_s = 5.0
    acts_on = ("tc", "cgroup")

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        policy = snap.slo.resource_qos_strategy.policies.net_qos_policy
        if policy == "terwayQos":
            return Verdict(False, "NodeSLO netQOSPolicy terwayQos: unsupported (it configures the Terway CNI's own "
                                  "QoS agent through /var/lib/terway/qos, which this agent does not run)")
        if _total_bps(snap) <= 0:
            return Verdict(False, "NodeSLO systemStrategy.totalNetworkBandwidth is not set")
        return Verdict(True, f"netQOSPolicy tc over {snap.slo.system_strategy.total_network_bandwidth} bit/s")

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        tc = snap.kernel.tc
        commands: list[NetCommand] = []
        if tc.recorded and tc.root_kind == "htb" and tc.root_handle == f"{MAJOR}:":
            commands.append(NetCommand(("qdisc", "del", "dev", tc.interface, "root"), owner=self.name,
                                       original="restore", original_key=(TC_SECTION, tc.interface),
                                       reason=f"remove the htb this agent made ({why}); {tc.recorded or 'the default'} returns"))
        ours = {net_cls_classid(m) for m in (SYSTEM, LS, BE)}
        files = [self._net_cls_write(tc, snap, uid, 0, f"reset ({why})")
                 for uid, value in sorted(tc.net_cls.items()) if value in ours]
        if not commands and not files:
            return QoSPlan.skip(self.name, why, state=state)
        return QoSPlan(self.name, f"disabled ({why}); removing the htb on {tc.interface or '-'}",
                       commands=tuple(commands), files=tuple(f for f in files if f is not None), state=state)

    def _net_cls_write(self, tc: TcFacts, snap: QoSSnapshot, uid: str, value: int, why: str) -> FileWrite | None:
        pk = snap.kernel.pods.get(uid)
        if pk is None:
            return None
        return FileWrite("net_cls", f"{pk.dir}/net_cls.classid", str(value), compare="int", owner=self.name,
                         reason=f"pod {uid}: net_cls.classid {value:#x} ({why})")

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        tc = snap.kernel.tc
        skipped = kernel_part_skip(self.name, state, read=snap.kernel.read, part="tc", what="tc", problem=tc.problem)
        if skipped is not None:
            return skipped
        ours = tc.root_kind == "htb" and tc.root_handle == f"{MAJOR}:"
        if not ours and tc.root_kind not in DEFAULT_QDISCS:
            return QoSPlan.skip(self.name, f"{tc.interface} has a root qdisc {tc.root_kind} {tc.root_handle} this agent "
                                           "did not make: left alone", state=state)
        notes: list[str] = []
        strategy = snap.slo.resource_qos_strategy
        total = _total_bps(snap)
        try:
            specs = class_specs(total, strategy.ls_class.network_qos, strategy.be_class.network_qos, notes)
        except ValueError as exc:
            return QoSPlan.skip(self.name, f"NodeSLO networkQOS: {exc}", state=state)
        iface = tc.interface
        commands: list[NetCommand] = []
        if not ours or not tc.recorded:
            commands.append(NetCommand(
                ("qdisc", "replace" if not ours else "change", "dev", iface, "root", "handle", f"{MAJOR}:", "htb",
                 "default", str(SYSTEM)),
                owner=self.name, original="record", original_key=(TC_SECTION, iface),
                original_value=tc.root_kind if not ours else "htb (found)",
                reason=f"{iface}: htb root for the QoS classes (was {tc.root_kind or 'none'})"))
        have = tc.classes if ours else {}
        for spec in specs:
            now = have.get(spec.classid)
            if now is None:
                op = "add"
            elif (now.parent != spec.parent or not rates_match(now.rate_bps, spec.rate_bps)
                  or not rates_match(now.ceil_bps, spec.ceil_bps) or now.prio != spec.prio):
                op = "change"
            else:
                continue
            commands.append(NetCommand(spec.args(op, iface), owner=self.name,
                                       reason=f"class {spec.classid}: rate {spec.rate_bps} ceil {spec.ceil_bps} bit/s"))
        prefs = tc.cgroup_prefs if ours else frozenset()
        for prio, minor in FILTERS:
            if prio not in prefs:
                commands.append(NetCommand(
                    ("filter", "add", "dev", iface, "protocol", "ip", "prio", str(prio), "parent", f"{MAJOR}:",
                     "handle", f"{minor}:", "cgroup"),
                    owner=self.name, reason=f"net_cls classid {net_cls_classid(minor):#x} -> class {MAJOR}:{minor}"))
        files = self._net_cls_writes(snap, tc, notes)
        shown = {f"class_{s.classid.replace(':', '_')}": f"{s.rate_bps}/{s.ceil_bps}" for s in specs}
        summary = (f"{iface}: {len(commands)} tc changes, {len(files)} net_cls writes; "
                   + ", ".join(f"{s.classid} {s.rate_bps}/{s.ceil_bps}" for s in specs))
        return QoSPlan(self.name, summary, numbers(total_bps=total, **shown), commands=tuple(commands),
                       files=tuple(files), notes=tuple(notes), state=state)

    def _net_cls_writes(self, snap: QoSSnapshot, tc: TcFacts, notes: list[str]) -> list[FileWrite]:
        if not tc.net_cls_root:
            notes.append("no net_cls hierarchy (cgroup v2, or not mounted): pods are not classified, their "
                         "traffic is the system class's")
            return []
        out: list[FileWrite] = []
        for pod in snap.pods:
            minor = CLASSID_OF_QOS.get(pod.qos_label)
            if minor is None or not pod.active or pod.uid not in tc.net_cls:
                continue
            want = net_cls_classid(minor)
            if tc.net_cls[pod.uid] != want:
                write = self._net_cls_write(tc, snap, pod.uid, want, f"{pod.key} is {pod.qos_label}")
                if write is not None:
                    out.append(write)
        return out
