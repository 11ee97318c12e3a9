"""The VM tier, host side (`make vm-e2e`, marker vm): boot the cached guest once, then judge its results.

The guest (tests/vm/guest, run by tests/vm/guest/run.sh inside) leaves junit.xml, pytest.log and timings.json in
the results share; here every guest test the tier promises must have run and passed (a test skipped inside the
guest is a failure: the guest is exactly the machine those tests need), and the boot must fit its budget.
Without HOOKSERVER_VM_IMAGE (set by `make vm-e2e` after it built the image) every test is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.containerd.runtime import ContainerdUnavailable, host_tool

pytestmark = pytest.mark.vm

HERE = Path(__file__).resolve().parent
# Under 5 minutes a run on a 2-core machine (issue 40's budget); VM_BUDGET_S for slower machines. The boot itself
# is cut at boot.sh's VM_TIMEOUT_S (420 s): on a machine busy with other work the emulated guest runs slower.
BUDGET_S = float(os.environ.get("VM_BUDGET_S", "300"))
# What the tier promises to have run on the real kernel; a guest test renamed or lost fails here.
PROMISED = {
    "test_the_guest_is_systemd_on_unified_cgroup_v2_with_the_kubelets_controllers",
    "test_cpu_suppress_cfs_quota_on_the_be_slice",
    "test_cpu_suppress_cpuset_on_the_be_slice",
    "test_group_identity_sets_cpu_idle_on_the_be_pod_slice",
    "test_memory_qos_min_low_high_on_the_pod_slices_and_scopes",
    "test_cpu_burst_writes_cpu_max_burst_on_the_container_scope",
    "test_blkio_throttles_and_weight_on_the_virtio_disk",
    "test_the_agent_detects_v2_and_the_systemd_driver",
    "test_be_pod_slice_gets_batch_values_and_the_reconciler_restores_a_reset",
    "test_the_agent_keeps_its_values_in_systemds_unit_properties",
    "test_daemon_reload_keeps_the_agents_values",
    "test_set_property_by_someone_else_keeps_the_agents_values",
    "test_new_pod_slices_do_not_reset_the_be_tiers_cpuset",
    "test_each_property_the_keeper_sets_survives_a_daemon_reload_as_written",
    "test_collectors_and_psi_read_the_real_v2_files",
    "test_cpu_suppress_on_the_be_tier_then_cleanup_leaves_it_as_found",
    "test_nri_gives_a_be_pods_scopes_and_slice_koordlets_values_on_v2",
    "test_nri_agent_killed_never_blocks_pod_creation_and_synchronize_corrects_the_scope",
    "test_nri_containerd_restart_keeps_values_and_the_agent_reconnects",
}


@dataclass(frozen=True)
class Boot:
    results: Path
    rc: int
    wall_s: float

    def text(self, name: str) -> str:
        path = self.results / name
        return path.read_text(errors="replace") if path.exists() else f"({name} missing)"


@pytest.fixture(scope="module")
def boot() -> Iterator[Boot]:
    image = os.environ.get("HOOKSERVER_VM_IMAGE", "")
    if not image or not (Path(image) / "rootfs.ext4").exists():
        pytest.skip("no VM image (HOOKSERVER_VM_IMAGE): `make vm-e2e` builds it and runs this tier")
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is missing (`make vm-e2e` installs it with apt-get)")
    results = Path(os.environ.get("HOOKSERVER_VM_RESULTS", HERE.parents[1] / "build" / "vm" / "results"))
    try:  # the guest's containerd tests build their image from the host's static busybox (apt where missing)
        busybox = host_tool("/bin/busybox", "busybox-static")
    except ContainerdUnavailable as exc:
        pytest.fail(str(exc))
    start = time.monotonic()
    done = subprocess.run([str(HERE / "boot.sh"), image, str(results)], capture_output=True, text=True,
                          env=dict(os.environ, VM_BUSYBOX=busybox),
                          timeout=float(os.environ.get("VM_TIMEOUT_S", "420")) + 60)
    yield Boot(results, done.returncode, time.monotonic() - start)


def _cases(boot: Boot) -> dict[str, str]:
    """Each guest test case's outcome: passed, failed, error or skipped."""
    path = boot.results / "junit.xml"
    assert path.exists(), f"the guest left no report (boot rc {boot.rc}); console:\n{boot.text('console.log')[-3000:]}"
    out: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.get("name", "?")] = kinds[0] if kinds else "passed"
    return out


def test_every_promised_guest_test_ran_and_passed(boot: Boot) -> None:
    cases = _cases(boot)
    missing = sorted(PROMISED - set(cases))
    bad = {name: outcome for name, outcome in cases.items() if outcome != "passed"}
    assert not missing and not bad, (
        f"missing: {missing}; not passed: {bad}\n{boot.text('pytest.log')[-6000:]}"
    )


def test_the_run_fits_its_budget_and_reports_its_times(boot: Boot) -> None:
    assert boot.rc == 0, f"boot.sh rc {boot.rc}; console:\n{boot.text('console.log')[-3000:]}"
    timings = json.loads(boot.text("timings.json"))
    timings["tier_wall_s"] = round(boot.wall_s, 1)
    (boot.results / "summary.json").write_text(json.dumps(timings, indent=1, sort_keys=True))
    print("VM tier:", json.dumps(timings, sort_keys=True))
    assert {"boot_to_agent_ready_s", "daemon_reload_exposure_p50_s", "daemon_reload_exposure_max_s"} <= set(timings)
    assert boot.wall_s < BUDGET_S, f"the VM run took {boot.wall_s:.0f} s (budget {BUDGET_S} s)"
