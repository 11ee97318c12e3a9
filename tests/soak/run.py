"""One campaign at a given scale: the phase plan, the run, and the whole-run judgement, shared by `make soak`
(`python -m tests.soak`) and the tiny run in `make test` (tests/soak/test_tiny_campaign.py).

Why the judgement is here and scale-free: the same agent must pass or fail the same way at SOAK_SCALE=0.05 and
at 25. Counts and durations scale; what is judged (growth after a warm-up that reached the steady pod count,
writes outside the agent's dirs, a metric for every fault that met a request) does not depend on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from tests.soak import phases_api, phases_faults, phases_fuzz, phases_restart
from tests.soak.campaign import CHURN_KEEP, Campaign
from tests.soak.report import Row, growth_after_warmup

__all__ = ["GROWTH_LIMIT", "MIN_TREND_SAMPLES", "Outcome", "judge_whole_run", "phase_plan", "run_campaign"]

# "Flat within 10 % after warm-up" (docs/operations.md).
GROWTH_LIMIT = 0.10
# Samples of the last process after the warm-up needed to judge a trend: growth is the mean of the last quarter
# over the first (after a fifth more is dropped), and a quarter of two samples judges noise (a tiny run has ~10).
MIN_TREND_SAMPLES = 24
Phase = Callable[[Campaign], Row | list[Row]]


def phase_plan(scale: float) -> list[tuple[str, Phase]]:
    def n(base: int) -> int:
        return max(1, round(base * scale))

    def s(base: float, floor: float = 1.0) -> float:
        """A duration; an apiserver fault window is never under 2 s (past the soak's 2 s connect timeout, so a
        black hole is met by a timed-out request at any scale)."""
        return max(floor, base * scale)

    # Restarting phases first; then one agent process runs every other phase, so its RSS, fd and thread trend
    # over the rest of the run is the growth check ("whole run, one process").
    return [
        ("writers", lambda c: phases_restart.writer_kills(c, n(16))),
        # 1,000 kills of the agent take well over an hour here (a start is 1.3-2.5 s on 2 CPUs shared with other
        # work, then a restore check): the default runs 40 and SOAK_SCALE=25 the full thousand; the writers
        # phase adds 80 kills that land mid-write.
        ("kill9", lambda c: phases_restart.kill9(c, n(40))),
        ("fullfs", lambda c: phases_faults.full_state_dir(c, s(15))),
        # The warm-up: until the churned pods are alive in their steady number, however short `s(45)` is.
        ("churn", lambda c: phases_restart.steady_churn(c, s(45), warm_up=True)),
        ("nri", lambda c: phases_restart.nri_restarts(c, n(100))),
        *[(f"errno-{e}", (lambda e: lambda c: phases_faults.errno_faults(c, e, s(15)))(e))
          for e in ("EIO", "ENOSPC", "EACCES", "EBUSY")],
        ("vanish", lambda c: phases_faults.vanishing_cgroups(c, n(100))),
        ("clock", lambda c: phases_faults.clock_jumps(c, max(2, min(4, n(4))), s(8))),
        ("churn-end", lambda c: phases_restart.steady_churn(c, s(30))),
        # A second agent, in apiserver mode; the first keeps running beside it (its samples end the trend).
        ("apiserver", lambda c: phases_api.apiserver_faults(c, s(10, floor=2.0))),
        ("fuzz", lambda c: phases_fuzz.fuzz(c, n(300))),
    ]


def judge_whole_run(rows: list[Row], last_pid: int, outside: list[str]) -> Row:
    """The whole-run row: growth after the warm-up (the first steady churn) in the one process that ran the
    rest, and the writes outside the agent's dirs."""
    overall = Row("whole run (trend: last agent process)")
    for r in rows:
        overall.answers += r.answers
        overall.samples += r.samples
        overall.injected += r.injected
    warm_rows = [r for r in rows if r.fault.startswith("steady churn")]
    warm = {id(x) for x in warm_rows[0].samples} if warm_rows else set()
    overall.samples = [x for x in overall.samples if x.pid == last_pid and id(x) not in warm]
    if len(overall.samples) < MIN_TREND_SAMPLES:
        overall.notes.append(f"growth not judged: {len(overall.samples)} samples after warm-up, "
                             f"{MIN_TREND_SAMPLES} needed for a trend")
    else:
        for attr in ("rss_kib", "fds", "threads", "series", "pods"):
            growth = growth_after_warmup(overall.samples, attr)
            if growth > GROWTH_LIMIT:
                overall.violations.append(f"{attr} grew {growth:.0%} after warm-up in one agent process")
    if outside:
        overall.violations.append(f"writes outside the cgroup subtree and state dir: {outside[:10]}")
    return overall


@dataclass
class Outcome:
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    synced_pods: int = 0

    @property
    def violations(self) -> list[str]:
        return [f"{r.fault}: {v}" for r in self.rows for v in r.violations]

    @property
    def failed(self) -> bool:
        return any(r.violations or r.failed for r in self.rows)


def run_campaign(base: Path, scale: float, *, only: Collection[str] = (), skip: Collection[str] = (),
                 log: Callable[[str], None] = print) -> Outcome:
    """Run the phases of `phase_plan(scale)` (all, or `only`, less `skip`) on one campaign under `base`; the
    cgroup subtree, mounts and agents are gone when it returns or raises."""
    synced = max(20, min(500, round(300 * scale)))
    keep = max(4, round(CHURN_KEEP * scale))
    campaign = Campaign(base, synced_pods=synced, churn_keep=keep)
    outcome = Outcome(synced_pods=synced)
    started = time.monotonic()
    try:
        took = campaign.start()
        log(f"soak: agent up in {took:.1f} s with {synced} pods synced over NRI, {keep} churned; scale {scale}; {base}")
        for name, phase in phase_plan(scale):
            if (only and name not in only) or name in skip:
                continue
            t0 = time.monotonic()
            got = phase(campaign)
            for row in got if isinstance(got, list) else [got]:
                outcome.rows.append(row)
                log(f"soak: {name}: {row.fault}: {row.injected} injected, {row.in_time}/{len(row.answers)} in "
                    f"time, {len(row.violations)} violations ({time.monotonic() - t0:.0f} s)")
        last = campaign.agent.proc.pid if campaign.agent.proc is not None else 0
        outcome.rows.append(judge_whole_run(outcome.rows, last, campaign.outside_writes()))
    finally:
        campaign.close()
        outcome.seconds = time.monotonic() - started
    return outcome
