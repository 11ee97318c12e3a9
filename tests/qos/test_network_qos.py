"""TCNetworkQoS's pieces without a kernel: koordlet's class table (hand-computed), reading `tc`'s output (its
text and JSON shapes), the planner's commands from an empty, a finished and a foreign interface, the undo, and
the tc executor's memory of what this kernel cannot do."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.executor.netcmd import TcExecutor
from hookserver.executor.plan import NetCommand
from hookserver.slo.document import spec_from_json
from hookserver.slo.qos import NetworkQOS
from hookserver.store import StateStore
from hookserver.store.originals import NodeOriginals
from hookserver.system.tc import (
    TcClass,
    default_route_interface,
    parse_classes,
    parse_filter_prefs,
    parse_rate,
    parse_root_qdisc,
)
from qos.isolation.network_qos import TCNetworkQoS, class_specs, net_cls_classid
from qos.snapshot.kernel import TcFacts
from tests.qos.helpers import pod, snapshot
from tests.qos.part2_helpers import kernel, pod_kernel

M = 10**6


def _nq(**kw: Any) -> NetworkQOS:
    return NetworkQOS.model_validate({"enable": True, **kw})


def test_class_table_is_koordlets() -> None:
    notes: list[str] = []
    specs = class_specs(100 * M, _nq(egressRequest=20, egressLimit="60M"), _nq(egressRequest="10M", egressLimit=30), notes)
    assert [(s.classid, s.parent, s.rate_bps, s.ceil_bps, s.prio) for s in specs] == [
        ("1:1", "root", 100 * M, 100 * M, 0),
        ("1:2", "1:1", 70 * M, 100 * M, 1),   # 100 - 20 - 10
        ("1:3", "1:1", 20 * M, 60 * M, 2),
        ("1:4", "1:1", 10 * M, 30 * M, 3),
    ]
    assert notes == []


def test_a_class_without_networkqos_is_unlimited_with_the_smallest_rate() -> None:
    notes: list[str] = []
    specs = class_specs(50 * M, NetworkQOS(), _nq(egressRequest="60M"), notes)
    assert (specs[2].rate_bps, specs[2].ceil_bps) == (1000, 50 * M)  # LS off: no limit
    assert (specs[3].rate_bps, specs[3].ceil_bps) == (50 * M, 50 * M)  # a request above the link: the link
    assert specs[1].rate_bps == 1000 and "leave the system class" in notes[0]
    assert class_specs(100 * M, _nq(egressRequest="25%"), NetworkQOS(), [])[2].rate_bps == 25 * M
    with pytest.raises(ValueError, match="lsClass.networkQOS.egressLimit='fast'"):
        class_specs(100 * M, _nq(egressLimit="fast"), NetworkQOS(), [])


def test_reading_tc() -> None:
    assert [parse_rate(t) for t in ("50Mbit", "33333Kbit", "1600bit", "2Gbit", "12Kbps", 800)] == [
        50 * M, 33_333_000, 1600, 2 * 10**9, 96_000, 800]
    with pytest.raises(ValueError):
        parse_rate("fast")
    text = ("class htb 1:1 root rate 50Mbit ceil 50Mbit burst 1600b cburst 1600b \n"
            "class htb 1:2 parent 1:1 prio 1 rate 30Mbit ceil 50Mbit burst 1593b cburst 1600b \n")
    assert parse_classes(text) == {"1:1": TcClass("1:1", "root", 50 * M, 50 * M), "1:2": TcClass("1:2", "1:1", 30 * M, 50 * M, 1)}
    js = '[{"class":"htb","handle":"1:3","parent":"1:1","prio":2,"rate":"20Mbit","ceil":"40Mbit"}]'
    assert parse_classes(js) == {"1:3": TcClass("1:3", "1:1", 20 * M, 40 * M, 2)}
    assert parse_root_qdisc('[{"kind":"noqueue","handle":"0:","root":true,"options":{}}]') == ("noqueue", "0:")
    assert parse_root_qdisc("not json") == ("", "")
    assert parse_filter_prefs('[{"protocol":"ip","pref":1,"kind":"cgroup"},{"pref":2,"kind":"u32"},'
                              '{"pref":3,"kind":"cgroup"}]', "cgroup") == frozenset({1, 3})


def test_default_route_interface(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "route").write_text(
        "Iface\tDestination\tGateway\n eth1\t0010A8C0\t00000000\neth0\t00000000\t0100A8C0\n")
    assert default_route_interface(str(tmp_path)) == "eth0"
    assert default_route_interface(str(tmp_path / "none")) == ""


SLO = {"systemStrategy": {"totalNetworkBandwidth": "100M"},
       "resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 20, "egressLimit": 60}},
                               "beClass": {"networkQOS": {"enable": True, "egressRequest": 10, "egressLimit": 30}}}}


def _snap(tc: TcFacts, slo: dict[str, Any] | None = None, pods: Sequence[Any] = ()) -> Any:
    resolved = spec_from_json(slo if slo is not None else SLO, origin="test")
    kernel_pods = [pod_kernel(p.name) for p in pods]
    return snapshot(slo=resolved.spec, pods=tuple(pods), kernel=kernel(*kernel_pods, read=("pods", "tc"), tc=tc))


def _commands(plan: Any) -> list[str]:
    return [" ".join(c.args) for c in plan.commands]


def test_an_empty_interface_gets_the_whole_tree() -> None:
    plan = TCNetworkQoS().plan(_snap(TcFacts(interface="eth0", root_kind="noqueue", root_handle="0:")), None)
    assert _commands(plan) == [
        "qdisc replace dev eth0 root handle 1: htb default 2",
        "class add dev eth0 parent root classid 1:1 htb rate 100000000bit ceil 100000000bit",
        "class add dev eth0 parent 1:1 classid 1:2 htb rate 70000000bit ceil 100000000bit prio 1",
        "class add dev eth0 parent 1:1 classid 1:3 htb rate 20000000bit ceil 60000000bit prio 2",
        "class add dev eth0 parent 1:1 classid 1:4 htb rate 10000000bit ceil 30000000bit prio 3",
        "filter add dev eth0 protocol ip prio 1 parent 1: handle 2: cgroup",
        "filter add dev eth0 protocol ip prio 2 parent 1: handle 3: cgroup",
        "filter add dev eth0 protocol ip prio 3 parent 1: handle 4: cgroup",
    ]
    first = plan.commands[0]
    assert (first.original, first.original_key, first.original_value) == ("record", ("tc", "eth0"), "noqueue")


def _built(**kw: Any) -> TcFacts:
    classes = {c.classid: c for c in (TcClass("1:1", "root", 100 * M, 100 * M), TcClass("1:2", "1:1", 70 * M, 100 * M, 1),
                                      TcClass("1:3", "1:1", 20 * M, 60 * M, 2), TcClass("1:4", "1:1", 10 * M, 30 * M, 3))}
    values: dict[str, Any] = dict(interface="eth0", root_kind="htb", root_handle="1:", classes=MappingProxyType(classes),
                                  cgroup_prefs=frozenset({1, 2, 3}), recorded="noqueue")
    values.update(kw)
    return TcFacts(**values)


def test_a_finished_tree_needs_nothing_and_a_changed_limit_one_change() -> None:
    assert TCNetworkQoS().plan(_snap(_built()), None).commands == ()
    slo = {**SLO, "resourceQOSStrategy": {**SLO["resourceQOSStrategy"],
                                          "beClass": {"networkQOS": {"enable": True, "egressRequest": 10, "egressLimit": 50}}}}
    assert _commands(TCNetworkQoS().plan(_snap(_built(), slo), None)) == [
        "class change dev eth0 parent 1:1 classid 1:4 htb rate 10000000bit ceil 50000000bit prio 3"]


def test_a_foreign_root_qdisc_or_missing_tools_are_one_status_line() -> None:
    foreign = TCNetworkQoS().plan(_snap(TcFacts(interface="eth0", root_kind="tbf", root_handle="8001:")), None)
    assert foreign.skipped == "eth0 has a root qdisc tbf 8001: this agent did not make: left alone"
    missing = TCNetworkQoS().plan(_snap(TcFacts(interface="eth0", problem="tc is not installed (iproute2)")), None)
    assert missing.skipped == "unsupported: tc is not installed (iproute2)" and missing.commands == ()


def test_verdicts_terway_and_no_bandwidth() -> None:
    terway = {"systemStrategy": {"totalNetworkBandwidth": "1G"},
              "resourceQOSStrategy": {"policies": {"netQOSPolicy": "terwayQos"}}}
    verdict = TCNetworkQoS().enabled(_snap(TcFacts(), terway))
    assert not verdict.enabled and "terwayQos: unsupported" in verdict.reason
    assert not TCNetworkQoS().enabled(_snap(TcFacts(), {})).enabled
    assert TCNetworkQoS().enabled(_snap(TcFacts())).enabled


def test_net_cls_follows_the_qos_label_and_is_reset_when_disabled() -> None:
    pods = [pod("be1", "BE"), pod("ls1", "LS"), pod("none", "")]
    classids = {"uid-be1": 0, "uid-ls1": net_cls_classid(3), "uid-none": 0}
    facts = _built(net_cls_root="/sys/fs/cgroup/net_cls", net_cls=MappingProxyType(classids))
    plan = TCNetworkQoS().plan(_snap(facts, pods=pods), None)
    assert [(f.root, f.path, f.value) for f in plan.files] == [
        ("net_cls", "kubepods/besteffort/podbe1/net_cls.classid", str(0x10004))]
    off = TCNetworkQoS().plan_disabled(_snap(dataclasses.replace(facts, net_cls=MappingProxyType(
        {"uid-be1": 0x10004, "uid-ls1": 0x10003, "uid-none": 7})), pods=pods), None, "off")
    assert _commands(off) == ["qdisc del dev eth0 root"] and off.commands[0].original == "restore"
    assert sorted((f.path.split("/")[2], f.value) for f in off.files) == [("podbe1", "0"), ("podls1", "0")]
    no_net_cls = TCNetworkQoS().plan(_snap(_built(), pods=pods), None)
    assert no_net_cls.files == () and "no net_cls hierarchy" in no_net_cls.notes[0]


def test_the_executor_stops_asking_for_what_the_kernel_lacks() -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
        calls.append(list(argv))
        if argv[-1] == "cgroup":
            return 2, "Error: TC classifier not found.\nWe have an error talking to the kernel"
        if "del" in argv:
            return 2, "Error: Cannot delete qdisc with handle of zero."
        return 0, ""

    clock = [0.0]
    originals = NodeOriginals("")
    originals.record("tc", "eth0", "noqueue")
    tc = TcExecutor(store=StateStore(), originals=originals, netns="ns1", run=run, clock=lambda: clock[0])
    flt = NetCommand(("filter", "add", "dev", "eth0", "cgroup"))
    first, second = tc.apply([flt, flt])
    assert not first.ok and "TC classifier not found" in first.error
    assert second.skipped and "unsupported here" in second.error and len(calls) == 1
    assert calls[0][:3] == ["tc", "-n", "ns1"]
    clock[0] = 601.0
    tc.apply([flt])
    assert len(calls) == 2  # tried again after the back-off
    undo = tc.apply([NetCommand(("qdisc", "del", "dev", "eth0", "root"), original="restore", original_key=("tc", "eth0"))])
    assert undo[0].ok and undo[0].skipped and originals.section("tc") == {}


def test_the_reader_reads_tc_again_only_when_old_or_told(tmp_path: Path) -> None:
    calls: list[str] = []

    def run(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
        calls.append(argv[2] if argv[1] == "-j" else argv[4])
        if "qdisc" in argv:
            return 0, '[{"kind":"htb","handle":"1:","root":true}]'
        return 0, "class htb 1:1 root rate 50Mbit ceil 50Mbit" if "class" in argv else "[]"

    from qos.snapshot.tc_reader import TcReader

    clock = [0.0]
    reader = TcReader(interface="eth0", tc="/bin/true", run=run, max_age_s=4.0, clock=lambda: clock[0])
    originals = NodeOriginals("")
    first = reader.read(originals, {}, "")
    assert first.root_kind == "htb" and first.classes["1:1"].rate_bps == 50 * M and len(calls) == 3
    clock[0] = 3.0
    assert reader.read(originals, {}, "") == first and len(calls) == 3  # cached
    executor = TcExecutor(store=StateStore(), originals=originals, run=lambda argv, t: (0, ""),
                          on_change=reader.invalidate)
    executor.apply([NetCommand(("class", "change", "dev", "eth0"))])
    reader.read(originals, {}, "")
    assert len(calls) == 6  # the executor changed something: read again at once
    clock[0] = 7.5
    reader.read(originals, {}, "")
    assert len(calls) == 9  # old: read again


def test_a_bad_interface_name_is_a_clear_config_error() -> None:
    from hookserver.config import load_settings
    from hookserver.errors import ConfigError

    with pytest.raises(ConfigError, match="network_interface"):
        load_settings(overrides={"qos": {"network_interface": "eth0; reboot"}}, environ={})
    assert load_settings(overrides={"qos": {"network_interface": "bond0.12"}}, environ={}).qos.network_interface == "bond0.12"
