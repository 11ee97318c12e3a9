"""`python -m tests.soak` (`make soak`): run the campaign, print the table, write build/soak/report.json.

`SOAK_SCALE` (default 1: about ten minutes on a 2-CPU machine) multiplies every count and duration;
`SOAK_SEED` fixes the random instants. The exit status is 1 when a target was missed (a violation), so the
campaign can gate a release.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.soak import phases_api, phases_faults, phases_fuzz, phases_restart
from tests.soak.campaign import Campaign
from tests.soak.report import Row, growth_after_warmup, render, write_json

ROOT = Path(__file__).resolve().parents[2]


def _plan(scale: float) -> list[tuple[str, Callable[[Campaign], Row | list[Row]]]]:
    def n(base: int) -> int:
        return max(1, round(base * scale))

    def s(base: float) -> float:
        return max(2.0, base * scale)

    # Restarting phases first; then one agent process runs every other phase, so its RSS, fd and thread trend
    # over the rest of the run is the growth check ("whole run, one process").
    return [
        ("writers", lambda c: phases_restart.writer_kills(c, n(16))),
        # 1,000 kills of the agent take well over an hour here (a start is 1.3-2.5 s on 2 CPUs shared with other
        # work, then a restore check): the default runs 40 and SOAK_SCALE=25 the full thousand; the writers
        # phase adds 80 kills that land mid-write.
        ("kill9", lambda c: phases_restart.kill9(c, n(40))),
        ("fullfs", lambda c: phases_faults.full_state_dir(c, s(15))),
        ("churn", lambda c: phases_restart.steady_churn(c, s(45))),
        ("nri", lambda c: phases_restart.nri_restarts(c, n(100))),
        *[(f"errno-{e}", (lambda e: lambda c: phases_faults.errno_faults(c, e, s(15)))(e))
          for e in ("EIO", "ENOSPC", "EACCES", "EBUSY")],
        ("vanish", lambda c: phases_faults.vanishing_cgroups(c, n(100))),
        ("clock", lambda c: phases_faults.clock_jumps(c, 4, s(8))),
        ("churn-end", lambda c: phases_restart.steady_churn(c, s(30))),
        # A second agent, in apiserver mode; the first keeps running beside it (its samples end the trend).
        ("apiserver", lambda c: phases_api.apiserver_faults(c, s(10))),
        ("fuzz", lambda c: phases_fuzz.fuzz(c, n(300))),
    ]


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM (a CI timeout) runs the same clean-up as Ctrl-C: no agent, cgroup or mount is left behind."""
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    scale = float(os.environ.get("SOAK_SCALE", "1"))
    only = set(sys.argv[1:])
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = ROOT / "build" / "soak" / f"run-{stamp}"
    synced = max(20, min(500, round(300 * scale)))
    campaign = Campaign(base, synced_pods=synced)
    rows: list[Row] = []
    started = time.monotonic()
    try:
        took = campaign.start()
        print(f"soak: agent up in {took:.1f} s with {synced} pods synced over NRI; scale {scale}; {base}", flush=True)
        for name, phase in _plan(scale):
            if only and name not in only:
                continue
            t0 = time.monotonic()
            got = phase(campaign)
            for row in got if isinstance(got, list) else [got]:
                rows.append(row)
                print(f"soak: {name}: {row.fault}: {row.injected} injected, {row.in_time}/{len(row.answers)} in "
                      f"time, {len(row.violations)} violations ({time.monotonic() - t0:.0f} s)", flush=True)
        overall = Row("whole run (trend: last agent process)")
        for r in rows:
            overall.answers += r.answers
            overall.samples += r.samples
            overall.injected += r.injected
        main_pid = campaign.agent.proc.pid if campaign.agent.proc is not None else 0
        last = main_pid
        # Warm-up: until the churned pods reach their steady number (the first churn phase), whose fds the
        # collectors keep open per pod; growth is judged after it, on the one process that ran the rest.
        warm_rows = [r for r in rows if r.fault.startswith("steady churn")]
        warm = {id(x) for x in warm_rows[0].samples} if warm_rows else set()
        overall.samples = [x for x in overall.samples if x.pid == last and id(x) not in warm]
        for attr in ("rss_kib", "fds", "threads", "series", "pods"):
            growth = growth_after_warmup(overall.samples, attr)
            if growth > 0.10:
                overall.violations.append(f"{attr} grew {growth:.0%} after warm-up in one agent process")
        outside = campaign.outside_writes()
        if outside:
            overall.violations.append(f"writes outside the cgroup subtree and state dir: {outside[:10]}")
        rows.append(overall)
    finally:
        campaign.close()
    meta = {"scale": scale, "seed": os.environ.get("SOAK_SEED", "22"), "synced_pods": synced,
            "seconds": round(time.monotonic() - started, 1), "run_dir": str(base)}
    report = ROOT / "build" / "soak" / "report.json"
    write_json(report, rows, meta)
    print(render(rows))
    print(f"soak: {meta['seconds']} s; report {report}")
    return 1 if any(r.violations or r.failed for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
