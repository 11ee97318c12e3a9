"""hookserver.systemd on the real systemd 252 of the VM tier: our own D-Bus client on /run/systemd/private, and
how each unit property the keeper sets comes back from a `daemon-reload` (systemd re-reads the runtime drop-ins
SetUnitProperties wrote under /run/systemd/system.control and writes the cgroup files from them).

Why: the keeper is only right if what systemd keeps equals what the agent wrote; a value systemd rounds in its
drop-in (CPUQuota= with two decimals) would come back different after every reload, and the agent would write
it back each time. What was seen goes to systemd-properties.json in the results share.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from hookserver.executor import CgroupResource, CgroupWrite, ResourcePlan, build_executor
from hookserver.executor.settings import CgroupSettings
from hookserver.store import StateStore
from hookserver.system import SystemRoots
from hookserver.systemd import SystemdClient, UnitPropertyKeeper, properties_for, systemd_quota_us
from hookserver.systemd.wire import Variant
from tests.vm.guest.kubelet_slices import CGROUP, KubeletSlices, start_slice, stop_unit
from tests.vm.guest.results import record, save

TIER = "/kubepods.slice/kubepods-besteffort.slice"

# file, the text the agent writes, and what the file reads after SetUnitProperties and after a reload
CASES = [
    ("cpu.weight", "79"),
    ("cpu.max", "300000 100000"),
    ("memory.max", "3221225472"),
    ("memory.high", "2147483648"),
    ("memory.low", "1048576"),
    ("memory.min", "1048576"),
    ("io.weight", "default 500"),
    ("cpuset.cpus", "1"),
    ("cpuset.mems", "0"),
]


def _read(path: Path, name: str) -> str:
    return (path / name).read_text().strip()


def test_each_property_the_keeper_sets_survives_a_daemon_reload_as_written() -> None:
    name = f"hsprobe{uuid.uuid4().hex}.slice"  # no dash: directly under the root slice
    path = start_slice(name, "-.slice", cpu_weight=1)
    seen: dict[str, dict[str, str]] = {}
    client = SystemdClient(timeout_s=10)  # right after a reload an emulated systemd can take seconds to answer
    try:
        for file, text in CASES:
            props = properties_for(file, text)
            assert props, file
            client.set_unit_properties(name, [(p.name, Variant(p.signature, p.value)) for p in props])
            seen[file] = {"wrote": text, "after_set": _read(path, file)}
        subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=60)
        for file, _ in CASES:
            seen[file]["after_reload"] = _read(path, file)
        # The quota systemd cannot keep: 12345 µs per 100 ms is 12.345 %, kept as 12.34 % (or rounded).
        for quota in (12345, systemd_quota_us(12345, 100_000)):
            props = properties_for("cpu.max", f"{quota} 100000")
            client.set_unit_properties(name, [(p.name, Variant(p.signature, p.value)) for p in props])
            after_set = _read(path, "cpu.max")
            subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=60)
            seen[f"cpu.max {quota}"] = {"wrote": f"{quota} 100000", "after_set": after_set,
                                        "after_reload": _read(path, "cpu.max")}
    finally:
        client.close()
        save("systemd-properties.json", json.dumps(seen, indent=1, sort_keys=True))
        stop_unit(name)
    for file, text in CASES:
        assert seen[file]["after_set"] == seen[file]["after_reload"], (file, seen[file])
    assert seen["io.weight"]["after_reload"] == "default 500"
    assert seen["cpu.max"]["after_reload"] == "300000 100000"
    representable = f"{systemd_quota_us(12345, 100_000)} 100000"
    assert seen["cpu.max 12345"]["after_reload"] != "12345 100000", seen  # what the keeper must avoid
    assert seen[f"cpu.max {systemd_quota_us(12345, 100_000)}"]["after_reload"] == representable, seen


def _be_tier_cpuset_rewrites(keep_in_units: bool) -> tuple[int, list[str], str]:
    """The BE tier's cpuset narrowed to CPU 1 through the executor, as CPU suppress writes it, then three new BE
    pods started as the kubelet starts them: the pod slice and its container's scope, then the kubelet's QoS
    update of the tiers (kubelet `UpdateQOSCgroups` on each new pod: libcontainer's systemd manager sets the
    tier's CPUWeight with SetUnitProperties), after which systemd writes all of the tier's cgroup files from its
    unit, AllowedCPUs (empty: every CPU) included. After each start the same plan is applied again, as CPU
    suppress does every round; a write that is not skipped put back a value systemd reset."""
    slices = KubeletSlices().start()
    keeper = UnitPropertyKeeper(SystemdClient(timeout_s=10)).start() if keep_in_units else None
    try:
        slices.pod("besteffort").start_container(uuid.uuid4().hex * 2)
        executor = build_executor(CgroupSettings(driver="systemd", version="v2"), store=StateStore(),
                                  roots=SystemRoots())
        executor.attach_mirror(keeper)
        plan = ResourcePlan.single([CgroupWrite(TIER, CgroupResource.CPUSET_CPUS, "1", owner="test",
                                                reason="as CPU suppress")], cacheable=False)
        assert executor.apply(plan).ok
        if keeper is not None:
            # Once (1 of 2 runs) this systemd left the keeper's first SetUnitProperties of the tier unanswered for
            # 10 s; the keeper then retries 5 s later, as it would on a node. What it saw goes to the results.
            flushed = keeper.flush(timeout_s=40)
            save(f"keeper-status-{uuid.uuid4().hex[:6]}.json", json.dumps(keeper.status()))
            assert flushed, keeper.status()
        rewrites, seen = 0, []
        for _ in range(3):
            slices.pod("besteffort").start_container(uuid.uuid4().hex * 2)
            subprocess.run(["systemctl", "set-property", "--runtime", "kubepods-besteffort.slice", "CPUWeight=1"],
                           check=True, timeout=60)
            seen.append((CGROUP / TIER.strip("/") / "cpuset.cpus").read_text().strip())
            rewrites += sum(1 for r in executor.apply(plan).results if r.ok and not r.skipped)
        shown = subprocess.run(["systemctl", "show", "-p", "AllowedCPUs", "kubepods-besteffort.slice"],
                               capture_output=True, text=True, timeout=60).stdout.strip()
        return rewrites, seen, shown
    finally:
        if keeper is not None:
            keeper.stop()
        slices.stop()


def test_new_pod_slices_do_not_reset_the_be_tiers_cpuset() -> None:
    """Issue 40: systemd wrote the BE tier's cpuset.cpus from the unit's (empty) AllowedCPUs when a pod started,
    and CPU suppress wrote its set back each time (churn). Both ways on the same systemd: the reactive path
    alone (today's agent, without the keeper) and with the keeper. (Starting a pod slice and a Delegate=yes
    scope alone does not do it: their controllers are in the tier's mask from the first scope on, so systemd does
    not realise the tier again; the kubelet's QoS update of the tier does.)"""
    before = _be_tier_cpuset_rewrites(keep_in_units=False)
    after = _be_tier_cpuset_rewrites(keep_in_units=True)
    record("be_tier_cpuset_rewrites_after_3_pod_starts", {"without_keeper": before[0], "with_keeper": after[0]})
    save("be-tier-cpuset.json", json.dumps({"without_keeper": before, "with_keeper": after}))
    # With the keeper the tier's own unit holds the agent's set: whatever makes systemd realise the tier's cpuset
    # again writes the agent's set. (Without it the unit says AllowedCPUs= empty. On this systemd 252 none of
    # the starts and QoS updates above made systemd write the tier's cpuset: the reset the issue saw was not
    # reproduced here, so the file-level half passes either way; the unit's property is what differs.)
    assert after == (0, ["1"] * 3, "AllowedCPUs=1"), after
    assert before[2] == "AllowedCPUs=", before
