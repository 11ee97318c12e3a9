"""The executor's writes on systemd units mirrored into the units' properties, through a D-Bus peer on a real
unix socket: batched per unit, deduplicated, originals recorded first, unrepresentable quotas made representable,
a missing or hanging systemd a status line, properties an older systemd lacks dropped, cleanup's restore."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hookserver.executor import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.store.originals import NodeOriginals
from hookserver.systemd import ORIGINALS_SECTION, SystemdClient, UnitPropertyKeeper, restore_units
from hookserver.systemd.properties import INFINITY, property_from_text
from hookserver.systemd.wire import Variant
from tests.executor.conftest import Tree, make_executor
from tests.systemd.fake_systemd import Call, FakeSystemd

R = CgroupResource
POD_UNIT = "kubepods-besteffort-pod1234_abcd.slice"
POD = f"/kubepods.slice/kubepods-besteffort.slice/{POD_UNIT}"



def _plan(*writes: tuple[CgroupResource, int | str], d: str = POD) -> ResourcePlan:
    return ResourcePlan.single([CgroupWrite(d, r, v, owner="test", reason="t") for r, v in writes], cacheable=False)


def _props(call: Call) -> dict[str, object]:
    return {name: variant.value for name, variant in call.body[2]}


def _keeper(sock: Path, tmp_path: Path, timeout_s: float = 2.0) -> tuple[UnitPropertyKeeper, NodeOriginals]:
    originals = NodeOriginals(str(tmp_path / "state"))
    os.makedirs(tmp_path / "state", exist_ok=True)
    return UnitPropertyKeeper(SystemdClient(str(sock), timeout_s=timeout_s), originals=originals).start(), originals


def test_batch_values_on_a_pod_slice_become_its_unit_properties_once(
    v2tree: Tree, sock_path: Path, tmp_path: Path
) -> None:
    fake = FakeSystemd(sock_path)
    keeper, originals = _keeper(sock_path, tmp_path)
    v2tree.cgroup(POD, **{"cpu.weight": "1"})
    ex, _ = make_executor(v2tree, driver="systemd")
    ex.attach_mirror(keeper)
    try:
        assert ex.apply(_plan((R.CPU_SHARES, 2048), (R.CPU_CFS_QUOTA, 300000), (R.MEMORY_LIMIT, 3 << 30),
                              (R.CPUSET_CPUS, "0-1"))).ok
        assert keeper.flush()
        ex.apply(_plan((R.CPU_SHARES, 2048), (R.MEMORY_LIMIT, 3 << 30)))  # the files hold it: nothing new to say
        assert keeper.flush()
    finally:
        keeper.stop()
        fake.close()
    assert [c.body[0] for c in fake.calls] == [POD_UNIT]
    assert fake.calls[0].body[1] is True  # runtime: gone at reboot, as the kubelet's own
    assert _props(fake.calls[0]) == {"CPUWeight": 79, "CPUQuotaPerSecUSec": 3_000_000, "CPUQuotaPeriodUSec": 100_000,
                                     "MemoryMax": 3 << 30, "AllowedCPUs": b"\x03"}
    kept = {k: property_from_text(v).value for k, v in originals.section(ORIGINALS_SECTION).items()}
    assert kept == {f"{POD_UNIT}/CPUWeight": 1, f"{POD_UNIT}/CPUQuotaPerSecUSec": INFINITY,
                    f"{POD_UNIT}/CPUQuotaPeriodUSec": 100_000, f"{POD_UNIT}/MemoryMax": INFINITY,
                    f"{POD_UNIT}/AllowedCPUs": b""}
    assert keeper.status()["mode"] == f"unit properties kept through {sock_path}"


def test_a_quota_systemd_cannot_keep_is_written_as_the_one_it_keeps(
    v2tree: Tree, sock_path: Path, tmp_path: Path
) -> None:
    """systemd 252's drop-in holds CPUQuota= in whole percents: 12345 µs per 100 ms (12.345 %) came back from a
    reload as 12000 on the VM tier, and the agent would rewrite it after every reload. The file and the unit get
    12000 (the nearest whole percent); 12500 (12.5 %) goes up to 13000."""
    fake = FakeSystemd(sock_path)
    keeper, _ = _keeper(sock_path, tmp_path)
    v2tree.cgroup(POD)
    v2tree.cgroup("/kubepods/besteffort/pod-9")
    ex, _ = make_executor(v2tree, driver="systemd")
    ex.attach_mirror(keeper)
    try:
        ex.apply(_plan((R.CPU_CFS_QUOTA, 12345)))
        ex.apply(_plan((R.CPU_CFS_QUOTA, 12345), d="/kubepods/besteffort/pod-9"))  # no unit: as planned
        assert keeper.flush()
        assert v2tree.read(POD, "cpu.max") == "12000"
        ex.apply(_plan((R.CPU_CFS_QUOTA, 12500)))
        assert keeper.flush()
    finally:
        keeper.stop()
        fake.close()
    assert v2tree.read(POD, "cpu.max") == "13000"
    assert v2tree.read("/kubepods/besteffort/pod-9", "cpu.max") == "12345"
    assert [_props(c)["CPUQuotaPerSecUSec"] for c in fake.calls] == [120_000, 130_000]


def test_no_systemd_is_a_status_line_and_the_writes_still_happen(v2tree: Tree, tmp_path: Path) -> None:
    keeper = UnitPropertyKeeper(SystemdClient(str(tmp_path / "none.sock"), timeout_s=0.5), fallback_s=1).start()
    v2tree.cgroup(POD)
    ex, _ = make_executor(v2tree, driver="systemd")
    ex.attach_mirror(keeper)
    try:
        assert ex.apply(_plan((R.CPU_SHARES, 2048))).ok
        deadline = time.monotonic() + 5
        while keeper.reachable is not False and time.monotonic() < deadline:
            time.sleep(0.01)
        status = keeper.status()
    finally:
        keeper.stop()
    assert v2tree.read(POD, "cpu.weight") == "79"
    assert status["mode"].startswith("not reachable (") and status["mode"].endswith(
        "values restored on reset within 1 s"), status
    assert "ENOENT" in status["mode"] and status["pending"] == 1  # kept for the next try


def test_a_hanging_systemd_never_holds_up_a_write(v2tree: Tree, sock_path: Path, tmp_path: Path) -> None:
    fake = FakeSystemd(sock_path, behaviour=lambda call: "hang")
    keeper, _ = _keeper(sock_path, tmp_path, timeout_s=2.0)
    v2tree.cgroup(POD)
    ex, _ = make_executor(v2tree, driver="systemd")
    ex.attach_mirror(keeper)
    try:
        start = time.monotonic()
        for shares in (2048, 1024, 512):
            assert ex.apply(_plan((R.CPU_SHARES, shares))).ok
        took = time.monotonic() - start
    finally:
        keeper.stop(timeout_s=3)
        fake.close()
    assert took < 1.0  # three writes while the worker waits up to 2 s for a reply


def test_a_property_this_systemd_lacks_is_dropped_and_the_rest_is_sent(
    v2tree: Tree, sock_path: Path, tmp_path: Path
) -> None:
    def no_memory_min(call: Call) -> str:
        if "MemoryMin" in _props(call):
            return "error:org.freedesktop.DBus.Error.PropertyReadOnly:Cannot set property MemoryMin, or unknown property."
        return "ok"

    fake = FakeSystemd(sock_path, behaviour=no_memory_min)
    keeper, _ = _keeper(sock_path, tmp_path)
    v2tree.cgroup(POD)
    ex, _ = make_executor(v2tree, driver="systemd")
    ex.attach_mirror(keeper)
    try:
        ex.apply(_plan((R.MEMORY_MIN, 1 << 20), (R.MEMORY_LOW, 2 << 20)))
        assert keeper.flush()
        ex.apply(_plan((R.MEMORY_MIN, 4 << 20)))
        assert keeper.flush()
    finally:
        keeper.stop()
        fake.close()
    assert [sorted(_props(c)) for c in fake.calls] == [["MemoryLow", "MemoryMin"], ["MemoryLow"]]
    assert keeper.status()["unsupported"] == ["MemoryMin"]


def test_a_unit_that_is_gone_is_counted_not_retried(v2tree: Tree, sock_path: Path, tmp_path: Path) -> None:
    fake = FakeSystemd(sock_path, behaviour=lambda call: f"error:org.freedesktop.systemd1.NoSuchUnit:Unit "
                                                         f"{call.body[0]} not loaded.")
    keeper, _ = _keeper(sock_path, tmp_path)
    try:
        keeper.written(POD, "cpu.weight", "79", "1")
        assert keeper.flush()
    finally:
        keeper.stop()
        fake.close()
    assert len(fake.calls) == 1 and keeper.errors == 1 and "not loaded" in keeper.last_error


def test_cleanup_gives_each_unit_its_recorded_values_back(sock_path: Path, tmp_path: Path) -> None:
    gone = "kubepods-besteffort-podgone.slice"

    def answer(call: Call) -> str:
        return "error:org.freedesktop.systemd1.NoSuchUnit:gone" if call.body[0] == gone else "ok"

    fake = FakeSystemd(sock_path, behaviour=answer)
    recorded = {f"{POD_UNIT}/CPUWeight": '["CPUWeight", "t", 1]',
                f"{POD_UNIT}/AllowedCPUs": '["AllowedCPUs", "ay", ""]',
                f"{gone}/MemoryMax": f'["MemoryMax", "t", {INFINITY}]',
                "bad.slice/X": "not json"}
    try:
        results = dict(restore_units(SystemdClient(str(sock_path), timeout_s=2), recorded))
    finally:
        fake.close()
    assert results[f"{POD_UNIT}/CPUWeight"] is None and results[f"{gone}/MemoryMax"] is None
    assert "not a unit property record" in str(results["bad.slice/X"])
    pod_call = next(c for c in fake.calls if c.body[0] == POD_UNIT)
    assert pod_call.body[2] == [("AllowedCPUs", Variant("ay", b"")), ("CPUWeight", Variant("t", 1))]


def test_units_queued_while_systemd_is_away_are_sent_when_it_is_back(sock_path: Path, tmp_path: Path) -> None:
    keeper, _ = _keeper(sock_path, tmp_path, timeout_s=0.5)
    units = [f"kubepods-besteffort-pod{n}.slice" for n in ("b", "a", "c")]  # not in name order
    try:
        for unit in units:
            keeper.written(f"/kubepods.slice/kubepods-besteffort.slice/{unit}", "cpu.weight", "79", "1")
        deadline = time.monotonic() + 5
        while keeper.reachable is not False and time.monotonic() < deadline:
            time.sleep(0.01)
        assert keeper.status()["pending"] == 3
        fake = FakeSystemd(sock_path)
        keeper._retry_at = 0.0  # as if the retry delay had passed
        keeper.written(f"/kubepods.slice/kubepods-besteffort.slice/{units[0]}", "cpu.weight", "79", "1")
        assert keeper.flush()
    finally:
        keeper.stop()
    fake.close()
    assert sorted(c.body[0] for c in fake.calls) == sorted(units)
    assert keeper.reachable is True and keeper.status()["mode"].startswith("unit properties kept")


def test_a_gone_pods_units_leave_the_originals_so_they_do_not_grow_with_churn(
    v2tree: Tree, sock_path: Path, tmp_path: Path
) -> None:
    fake = FakeSystemd(sock_path)
    keeper, originals = _keeper(sock_path, tmp_path)
    other = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podother.slice"
    scope = f"{POD}/cri-containerd-{'ab' * 32}.scope"
    for d in (POD, scope, other):
        v2tree.cgroup(d)
    ex, _ = make_executor(v2tree, driver="systemd")
    ex.attach_mirror(keeper)
    try:
        ex.apply(_plan((R.CPU_SHARES, 2048)))
        ex.apply(_plan((R.MEMORY_MIN, 1 << 20), d=scope))
        ex.apply(_plan((R.CPU_SHARES, 2048), d=other))
        assert keeper.flush()
        assert len(originals.section(ORIGINALS_SECTION)) == 3
        ex.forget_cgroups([POD])  # the reconciler's pod GC: the pod and its container scope are gone
        deadline = time.monotonic() + 5
        while len(originals.section(ORIGINALS_SECTION)) != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        keeper.stop()
        fake.close()
    assert list(originals.section(ORIGINALS_SECTION)) == ["kubepods-besteffort-podother.slice/CPUWeight"]
    assert keeper.status()["units"] == 1
