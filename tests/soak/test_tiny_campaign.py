"""`make soak` at a tiny scale inside `make test`, so the campaign cannot rot between releases (issue 40 item 7),
and the soak's own judgements, which must say the same at any scale.

The tiny run is the real campaign (agents, NRI runtime, cgroup v1 subtree, tmpfs, fake apiserver through the
fault proxy) with every count at its floor; the fuzz phase is left out because `make test` runs those parser
tests itself. It needs root and the cgroup v1 cpu and memory hierarchies, as `make soak` does.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from tests.soak.agent import Sample
from tests.soak.campaign import DISCARDING, Campaign, outside
from tests.soak.report import Row
from tests.soak.run import MIN_TREND_SAMPLES, judge_whole_run, phase_plan, run_campaign

TINY_SCALE = 0.025


def _unusable() -> str:
    if os.geteuid() != 0:
        return "needs root (cgroups, a tmpfs mount), as `make soak` does"
    for sub in ("cpu", "memory"):
        if not os.access(f"/sys/fs/cgroup/{sub}/cgroup.procs", os.W_OK):
            return f"no writable cgroup v1 {sub} hierarchy at /sys/fs/cgroup/{sub}"
    return ""


def _samples(pid: int, pods: list[int]) -> list[Sample]:
    return [Sample(at=float(i), pid=pid, rss_kib=100_000, fds=600, threads=20, series=1800, pods=p)
            for i, p in enumerate(pods)]


def test_dev_null_is_no_write_outside_but_a_file_is() -> None:
    """The tracker counted the /dev/null a child's stdio opens as a write outside the agent's dirs."""
    seen = ["/dev/null", "/run/soak/state/x.json", "/etc/hosts", "/dev/null", "/sys/fs/cgroup/cpu/s/pod1/cpu.shares"]
    allowed = [Path("/run/soak"), Path("/sys/fs/cgroup/cpu/s")]
    assert outside(seen, allowed) == ["/etc/hosts"]
    assert "/dev/null" in DISCARDING


def test_growth_is_judged_after_the_warm_up_in_the_last_process() -> None:
    warm = Row("steady churn (no fault)", samples=_samples(7, [100] * 5))
    flat = Row("NRI runtime restart", samples=_samples(7, [130, 131, 129, 130] * 8))
    grown = Row("steady churn (no fault)", samples=_samples(7, [130] * 16 + [160] * 16))
    other = Row("apiserver 500", samples=_samples(9, [1, 50]))
    assert judge_whole_run([warm, flat, other], 7, []).violations == []
    violations = judge_whole_run([warm, grown], 7, ["/etc/hosts"]).violations
    assert violations[0].startswith("pods grew") and "/etc/hosts" in violations[1]


def test_too_few_samples_are_no_trend() -> None:
    """A tiny run has about ten samples after the warm-up: a quarter of two judges noise, so it says so."""
    warm = Row("steady churn (no fault)", samples=_samples(7, [100] * 3))
    few = Row("steady churn (no fault)", samples=_samples(7, [130] * 5 + [200] * 5))
    overall = judge_whole_run([warm, few], 7, [])
    assert overall.violations == []
    assert overall.notes == [f"growth not judged: 10 samples after warm-up, {MIN_TREND_SAMPLES} needed for a trend"]


class _Churner:
    """What `Campaign.churn_for` uses of a campaign: create (one churned pod, the window capped), sample, rng."""

    def __init__(self, keep: int) -> None:
        self.churn: list[int] = []
        self.churn_keep = keep
        self.rng = random.Random(1)
        self.created = 0

    def create(self, row: Row) -> None:
        self.created += 1
        self.churn = [*self.churn, self.created][-self.churn_keep:]

    def sample(self, row: Row) -> None:
        pass


def test_the_warm_up_churns_until_the_churn_window_is_full() -> None:
    """At SOAK_SCALE=0.3 a 13 s warm-up left 13 of the 40 churned pods alive, and the store's pods then grew
    17 % "after warm-up" as the rest came: the warm-up now runs until the window is full, however short."""
    short = _Churner(keep=40)
    Campaign.churn_for(short, Row("x"), 0.0, rate_per_s=1e6)  # type: ignore[arg-type]
    assert short.created == 0  # no warm-up: the time alone decides
    warm = _Churner(keep=40)
    Campaign.churn_for(warm, Row("x"), 0.0, rate_per_s=1e6, until_full=True)  # type: ignore[arg-type]
    assert len(warm.churn) == 40 and warm.created == 40
    plan = dict(phase_plan(0.05))
    assert "churn" in plan and "churn-end" in plan


@pytest.mark.slow
@pytest.mark.cgroup
def test_the_campaign_at_a_tiny_scale_finds_nothing(tmp_path: Path) -> None:
    why = _unusable()
    if why:
        pytest.skip(why)
    lines: list[str] = []
    started = time.monotonic()
    outcome = run_campaign(tmp_path / "soak", TINY_SCALE, skip={"fuzz"}, log=lines.append)
    took = time.monotonic() - started
    print("\n".join(lines), f"\ntiny campaign: {took:.1f} s")
    faults = [r.fault for r in outcome.rows]
    assert any(f.startswith("apiserver 500") for f in faults) and faults[-1].startswith("whole run")
    assert outcome.violations == [], "\n".join(lines + outcome.violations)
    assert not outcome.failed, [(r.fault, sorted({a.error for a in r.answers if a.error})) for r in outcome.rows]
    assert took < 240, f"the tiny campaign took {took:.0f} s"
