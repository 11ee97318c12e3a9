"""Restarts: the NRI runtime restarted mid-traffic, and the agent killed with SIGKILL at random instants.

Why the shim's slow rename during the kill phase: checkpoint, NodeMetric, capacity and originals writes take
microseconds, so kills at truly random instants would almost never land inside one; a 20 ms pause before each
rename makes a good share of kills land between a temporary file and its rename, which is what must be safe.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.soak.agent import metric_sum
from tests.soak.campaign import Campaign
from tests.soak.report import Row

__all__ = ["kill9", "nri_restarts", "steady_churn", "writer_kills"]


def steady_churn(c: Campaign, seconds: float, *, warm_up: bool = False) -> Row:
    """Tens of pods a minute with nothing injected: the baseline, and the growth check. As the warm-up it goes
    on until `c.churn_keep` churned pods are alive, so what follows starts from the steady pod count."""
    row = Row("steady churn (no fault)")
    started = time.monotonic()
    c.churn_for(row, seconds, rate_per_s=1.0, until_full=warm_up)
    row.seconds = time.monotonic() - started
    row.notes.append(f"{len(row.answers) // 2} pods created and removed at ~60/min over {row.seconds:.0f} s")
    return row


def nri_restarts(c: Campaign, count: int, *, backoff_max_s: float = 1.0) -> Row:
    """Stop the runtime's socket and connections, bring it back with every synced pod, check the agent
    reconnects within its backoff, registers once, and answers a creation at once."""
    row = Row(f"NRI runtime restart ({c.synced_pods} pods synced)")
    started = time.monotonic()
    before = c.agent.metrics()
    slowest = 0.0
    registrations0 = c.nri.registrations + (c.nri.runtime.registrations if c.nri.runtime else 0)
    for _ in range(count):
        c.create(row)
        c.nri.stop()
        row.injected += 1
        time.sleep(c.rng.uniform(0.0, 0.3))
        c.nri.start()
        took = c.nri.wait_ready(30)
        slowest = max(slowest, took)
        # The agent sleeps at most backoff_max_s between dials; the sync of every pod comes on top.
        if took > backoff_max_s + 2.0:
            row.violations.append(f"reconnect took {took:.2f} s (backoff max {backoff_max_s} s)")
        c.sample(row)
    c.create(row)
    registrations = c.nri.registrations + (c.nri.runtime.registrations if c.nri.runtime else 0) - registrations0
    if registrations != count:
        row.violations.append(f"{registrations} registrations for {count} restarts")
    if c.nri.max_live > 1 or (c.nri.runtime is not None and c.nri.runtime.max_live > 1):
        row.violations.append("two live registrations at once")
    after = c.agent.metrics()
    delta = metric_sum(after, "hookserver_nri_reconnects_total") - metric_sum(before, "hookserver_nri_reconnects_total")
    row.metric = f"hookserver_nri_reconnects_total +{delta:.0f}"
    if delta < count:
        row.violations.append(f"{count} restarts but hookserver_nri_reconnects_total rose {delta:.0f}")
    row.notes.append(f"slowest reconnect and sync {slowest:.2f} s; {registrations} registrations")
    row.seconds = time.monotonic() - started
    return row


def kill9(c: Campaign, count: int) -> Row:
    """SIGKILL at a random instant (traffic, checkpoint rounds, NodeMetric and capacity writes and the
    reconciler's leveled batches all run every second); then, before the restart, one synced pod's cgroup is
    reset as a runtime would leave it. After each restart: checkpoints load or are set aside and reported,
    no `*.tmp` outlives the first round, no state file is corrupt, and the reset pod gets its values back."""
    row = Row("kill -9 of the agent")
    started = time.monotonic()
    c.faults({"slow_replace_s": 0.02})
    mid_write = 0
    worst_restore = 0.0
    lost_restore = 0
    rejected0 = _rejected(c)
    last_start = metric_sum(c.agent.metrics(), "koordlet_start_time")
    restarts_seen = 0
    known_originals = _originals(c)
    for i in range(count):
        for _ in range(c.rng.randint(0, 2)):
            c.create(row)
        time.sleep(c.rng.uniform(0.0, 1.5))
        c.up.clear()
        c.agent.kill()
        row.injected += 1
        if c.leftover_tmp(settle_s=0.0):  # the agent is dead: what is there now stays
            mid_write += 1
        victim = c.synced[c.rng.randrange(len(c.synced))]
        c.tree.write(victim, "cpu/cpu.shares", "1024")
        kept = _originals(c)
        if not kept >= known_originals:
            row.violations.append(f"kill {i}: recorded originals lost: {sorted(known_originals - kept)}")
        known_originals |= kept
        c.agent.start()
        c.up.set()
        t0 = time.monotonic()
        wrong = c.restored([victim], timeout=10.0)
        worst_restore = max(worst_restore, time.monotonic() - t0)
        if wrong:
            lost_restore += 1
            row.violations.append(f"kill {i}: not restored in 10 s: {wrong}")
        c.create(row)
        start = metric_sum(c.agent.metrics(), "koordlet_start_time")
        restarts_seen += start != last_start
        last_start = start
        if i % 10 == 0:
            c.sample(row)
    c.faults({})
    if restarts_seen != count:
        row.violations.append(f"{count} kills, koordlet_start_time changed {restarts_seen} times")
    time.sleep(2.0)  # one checkpoint round and one status write after the last restart
    stale = c.leftover_tmp()
    if stale:
        row.violations.append(f"*.tmp left after restarts: {stale[:5]} ({len(stale)})")
    corrupt = c.corrupt_state()
    if corrupt:
        row.violations.append(f"corrupt state files: {corrupt[:5]}")
    rejected = _rejected(c) - rejected0
    if rejected:
        row.lost.append(f"{rejected} checkpoints set aside")
    if lost_restore:
        row.lost.append(f"{lost_restore} pods not restored")
    row.metric = f"koordlet_start_time changed {restarts_seen}x"
    row.notes.append(f"{mid_write} of {count} kills left a temporary file (landed mid-write); slowest restore of a "
                     f"reset pod {worst_restore:.2f} s; {len(known_originals)} recorded originals kept across every "
                     f"kill: {sorted(known_originals)}")
    row.seconds = time.monotonic() - started
    return row


def _originals(c: Campaign) -> set[str]:
    """`section:key=value` of every original the agent recorded (node-originals.json), as a killed agent left
    them; no recorded original may be lost by a kill (only a restore forgets one, and nothing restores here)."""
    import json

    try:
        doc = json.loads((c.paths.state / "node-originals.json").read_bytes())
    except FileNotFoundError:
        return set()
    except ValueError:
        return {"<corrupt>"}
    return {f"{section}:{key}={value}" for section, values in doc.items() if isinstance(values, dict)
            for key, value in values.items()}


def _rejected(c: Campaign) -> int:
    path = c.paths.state / "predictor" / "rejected"
    return len(os.listdir(path)) if path.is_dir() else 0


def writer_kills(c: Campaign, per_kind: int) -> Row:
    """kill -9 of each state writer mid-write (tests/soak/writers.py), then the agent's own loader: nothing it
    loads may be corrupt, what it sets aside is reported, and temporary files must not pile up."""
    import subprocess
    import sys

    from tests.soak import writers

    row = Row("kill -9 mid state write")
    started = time.monotonic()
    for kind in writers.KINDS:
        directory = c.base / "writers" / kind
        directory.mkdir(parents=True, exist_ok=True)
        problems: list[str] = []
        for _ in range(per_kind):
            proc = subprocess.Popen([sys.executable, "-m", "tests.soak.writers", kind, str(directory)],
                                    stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
            assert proc.stdout is not None
            proc.stdout.readline()
            time.sleep(c.rng.uniform(0.0, 0.05))
            proc.kill()
            proc.wait()
            proc.stdout.close()
            row.injected += 1
            problems += writers.load(kind, str(directory))
        tmp = [p.name for p in directory.rglob("*") if ".tmp" in p.name]
        if problems:
            row.lost.append(f"{kind}: {len(problems)} set aside")
            if kind in ("nodemetric", "capacity", "registration"):
                row.violations.append(f"{kind}: a half-written file was loaded: {problems[:2]}")
        if len(tmp) > 1:
            row.violations.append(f"{kind}: {len(tmp)} temporary files left after {per_kind} kills: {tmp[:3]}")
        row.notes.append(f"{kind}: {per_kind} kills, {len(tmp)} temporary files left after the last load")
    row.metric = "n/a (no agent: the loaders' reports)"
    row.seconds = time.monotonic() - started
    return row
