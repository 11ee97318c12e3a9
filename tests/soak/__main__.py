"""`python -m tests.soak` (`make soak`): run the campaign, print the table, write build/soak/report.json.

`SOAK_SCALE` (default 1: about ten minutes on a 2-CPU machine) multiplies every count and duration;
`SOAK_SEED` fixes the random instants. Phase names on the command line run only those phases. The exit status is
1 when a target was missed (a violation), so the campaign can gate a release.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from pathlib import Path

from tests.soak.report import render, write_json
from tests.soak.run import run_campaign

ROOT = Path(__file__).resolve().parents[2]


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM (a CI timeout) runs the same clean-up as Ctrl-C: no agent, cgroup or mount is left behind."""
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    scale = float(os.environ.get("SOAK_SCALE", "1"))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = ROOT / "build" / "soak" / f"run-{stamp}"
    outcome = run_campaign(base, scale, only=set(sys.argv[1:]), log=functools.partial(print, flush=True))
    meta = {"scale": scale, "seed": os.environ.get("SOAK_SEED", "22"), "synced_pods": outcome.synced_pods,
            "seconds": round(outcome.seconds, 1), "run_dir": str(base)}
    report = ROOT / "build" / "soak" / "report.json"
    write_json(report, outcome.rows, meta)
    print(render(outcome.rows))
    print(f"soak: {meta['seconds']} s; report {report}")
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
