"""Faults on the files the agent writes, on the state dir's file system, on cgroups vanishing, and on the clock.

Why these are injected by the shim (tests/soak/shim) and not by the kernel: cgroupfs cannot be made to answer
EIO on demand, and the point is to see the agent's answer to each errno on each file it writes, counted. The
full file system is real (a 256 KiB tmpfs mounted for the phase and unmounted after), and so are vanishing
cgroups (rmdir of pod cgroups while the reconciler works on them).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.soak.agent import metric_sum
from tests.soak.campaign import Campaign
from tests.soak.report import Row

__all__ = ["clock_jumps", "errno_faults", "full_state_dir", "vanishing_cgroups"]

_ERROR_METRICS = ("hookserver_cgroup_writes_total", "hookserver_predictor_checkpoint_failures_total",
                  "hookserver_reconciler_errors_total", "hookserver_hook_plugin_errors_total",
                  "hookserver_state_write_failures_total")


def _errors(metrics: dict[str, float]) -> float:
    """Every error-counting series the agent exports for its writes."""
    total = 0.0
    for key, value in metrics.items():
        name = key.split("{", 1)[0]
        if name == "hookserver_cgroup_writes_total" and 'result="error"' not in key:
            continue
        if name in _ERROR_METRICS:
            total += value
    return total


def errno_faults(c: Campaign, name: str, seconds: float, *, rate: float = 0.3) -> Row:
    """`rate` of the agent's opens for writing under its cgroup subtree and state dir fail with `name`; after
    the fault is lifted, every synced pod must hold its values again and no state file may be corrupt."""
    row = Row(f"{name} on cgroup and state writes")
    started = time.monotonic()
    injected0 = c.injected()
    before = _errors(c.agent.metrics())
    prefixes = [str(d) + "/" for d in c.tree.dirs()] + [str(c.paths.state) + "/"]
    c.faults({"errno": name, "rate": rate, "prefixes": prefixes})
    # Reset a few synced pods so the reconciler has writes to fail.
    for rel in c.rng.sample(c.synced, min(10, len(c.synced))):
        c.tree.write(rel, "cpu/cpu.shares", "1024")
    c.churn_for(row, seconds)
    c.faults({})
    row.injected = c.injected() - injected0
    time.sleep(1.0)
    counted = _errors(c.agent.metrics()) - before
    row.metric = f"write errors +{counted:.0f}"
    if row.injected and counted == 0:
        row.violations.append(f"{row.injected} faults injected, no error metric moved")
    wrong = c.restored(c.synced, timeout=15.0)
    if wrong:
        row.lost.append(f"{len(wrong)} values not restored after the fault")
    corrupt = c.corrupt_state()
    if corrupt:
        row.violations.append(f"corrupt state files: {corrupt[:5]}")
    row.seconds = time.monotonic() - started
    return row


def vanishing_cgroups(c: Campaign, count: int) -> Row:
    """Pod cgroups removed between the agent's read and its write: a pod is created, its cgroup removed right
    after the sandbox call and before the container call; and churned pods are removed while the reconciler
    passes over them. The agent must answer every creation and carry on."""
    row = Row("cgroup removed between read and write")
    started = time.monotonic()
    assert c.proxy is not None
    for i in range(count):
        rel = c.tree.new_pod()
        answer = c.proxy.create(rel, f"v{i}")
        row.answers.append(answer)
        c.tree.drop_pod(rel)
        row.injected += 1
        # The NRI side: the container's pod cgroup is already gone.
        row.answers.append(c.nri.create(f"v{i}", rel))
        if i % 10 == 0:
            c.sample(row)
    wrong = c.restored(c.synced, timeout=10.0)
    if wrong:
        row.lost.append(f"{len(wrong)} synced values wrong")
    row.metric = "hookserver_cgroup_writes_total{result=error}"
    row.seconds = time.monotonic() - started
    return row


@contextlib.contextmanager
def _small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "soak-full", str(where)], check=True)
    try:
        yield where
    finally:
        for _ in range(20):
            if subprocess.run(["umount", str(where)], check=False).returncode == 0:
                break
            time.sleep(0.25)


def full_state_dir(c: Campaign, seconds: float) -> Row:
    """The agent restarted on a state dir whose file system is full (a 256 KiB tmpfs, filled up): it must
    start, answer every creation, report the failed checkpoint writes, leave no half-written temporary file
    holding the space, and load nothing corrupt once there is room again."""
    row = Row("state dir on a full file system")
    started = time.monotonic()
    mount = c.base / "fullfs"
    c.agent.stop()
    with _small_tmpfs(mount, "256k"):
        state = mount / "state"
        state.mkdir()
        filler = mount / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        row.injected = 1
        args = c.agent.extra_args
        c.agent.extra_args = (*args, "--state-dir", str(state))
        try:
            c.agent.start()
            c.nri.wait_ready(30)
            c.churn_for(row, seconds)
            m = c.agent.metrics()
            failures = metric_sum(m, "hookserver_predictor_checkpoint_failures_total")
            row.metric = f"hookserver_predictor_checkpoint_failures_total {failures:.0f}"
            if failures == 0:
                row.violations.append("checkpoint writes to a full file system were not counted")
            c.agent.stop()
            # A failed write must give its space back: a half-written *.tmp per model would hold a full disk.
            held = [p.name for p in state.rglob("*.tmp")]
            if held:
                row.violations.append(f"{len(held)} temporary files left on the full disk: {held[:3]}")
            filler.unlink()
            c.agent.start()
            c.nri.wait_ready(30)
            time.sleep(1.0)
            bad = [str(p) for p in state.rglob("*") if p.is_file() and (p.parent.name == "rejected" or
                                                                          p.name.endswith(".corrupt"))]
            if bad:
                row.lost.append(f"{len(bad)} state files set aside after the full disk: {bad[:3]}")
        finally:
            c.agent.stop()
            c.agent.extra_args = args
    c.agent.start()
    c.nri.wait_ready(30)
    row.seconds = time.monotonic() - started
    return row


def clock_jumps(c: Campaign, jumps: int, seconds_each: float) -> Row:
    """The wall clock jumps an hour forward, then back (alternating): creations stay answered, the synced pods
    keep their values, nothing corrupt is written. Monotonic time is left alone: it never jumps."""
    row = Row("wall clock jump +-1 h")
    started = time.monotonic()
    for i in range(jumps):
        c.faults({"clock_offset_s": 3600.0 if i % 2 == 0 else -3600.0})
        row.injected += 1
        for rel in c.rng.sample(c.synced, min(5, len(c.synced))):
            c.tree.write(rel, "cpu/cpu.shares", "1024")
        c.churn_for(row, seconds_each)
        wrong = c.restored(c.synced, timeout=10.0)
        if wrong:
            row.lost.append(f"jump {i}: {len(wrong)} values not restored")
    c.faults({})
    corrupt = c.corrupt_state()
    if corrupt:
        row.violations.append(f"corrupt state files: {corrupt[:5]}")
    row.metric = "none (a clock jump is not an error)"
    row.seconds = time.monotonic() - started
    return row
