"""Flight recorder and replay costs (issue 23): a day of a 200-pod node recorded at 10 s by the real runner and
recorder (target <= 100 MiB on disk, <= 1 % of a core to write), and replayed through the real planners,
predictor and capacity formula (target: a day in under a minute, per configuration).

`python -m tests.bench recorder` runs only this module. Ratios are measured / target.
"""

from __future__ import annotations

import os
import tempfile
import time

from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, replay, replay_many
from hookserver.recorder.scenarios.synthetic import generate
from hookserver.recorder.proposal import Proposal
from tests.bench.common import BenchRow

PODS = 200
HOURS = 24.0
STEP_S = 10.0


def run() -> list[BenchRow]:
    with tempfile.TemporaryDirectory(prefix="hs-bench-") as tmp:
        path = os.path.join(tmp, "day.sqlite")
        rec = generate(path, pods=PODS, hours=HOURS, step_s=STEP_S)
        size = os.path.getsize(path)
        per_frame_ms = rec.write_s / max(rec.frames, 1) * 1000
        cpu_per_frame_ms = rec.write_cpu_s / max(rec.frames, 1) * 1000
        core_share = rec.write_cpu_s / (HOURS * 3600)  # CPU seconds of writing per second of the day
        recording = Recording(path)
        t0, c0 = time.perf_counter(), time.process_time()
        recorded = replay(recording, ReplayConfig("recorded"))
        as_recorded_s, as_recorded_cpu = time.perf_counter() - t0, time.process_time() - c0
        proposal = Proposal(slo={"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 75,
                                                                 "memoryEvictThresholdPercent": 75}})
        t0, c0 = time.perf_counter(), time.process_time()
        replay(recording, ReplayConfig("proposed", proposal, as_recorded=False))
        proposed_s, proposed_cpu = time.perf_counter() - t0, time.process_time() - c0
        recording.close()
        # What `hookctl replay` does with a proposal: both runs at once, each in its own process (replay_many).
        t0 = time.perf_counter()
        replay_many(path, [ReplayConfig("recorded"), ReplayConfig("proposed", proposal, as_recorded=False)])
        together_s = time.perf_counter() - t0
    mib = size / 2**20
    return [
        BenchRow("recorder", f"a day on disk, {PODS} pods, a frame every {STEP_S:g} s", f"{mib:.1f} MiB",
                 f"{rec.frames} frames, {size / rec.frames / 1024:.1f} KiB a frame; target 100 MiB -> ratio {mib / 100:.2f}"),
        BenchRow("recorder", "write cost per frame (CPU)", f"{cpu_per_frame_ms:.2f} ms",
                 f"{core_share * 100:.3f} % of a core at one frame per {STEP_S:g} s; target 1 % -> ratio "
                 f"{core_share * 100:.3f}; wall {per_frame_ms:.2f} ms"),
        BenchRow("recorder", "replay a day as recorded", f"{as_recorded_s:.1f} s",
                 f"CPU {as_recorded_cpu:.1f} s; {recorded.matched} decisions reproduced, {len(recorded.mismatches)} "
                 f"not; target 60 s -> ratio {as_recorded_s / 60:.2f}"),
        BenchRow("recorder", "replay a day under another NodeSLO", f"{proposed_s:.1f} s",
                 f"CPU {proposed_cpu:.1f} s; target 60 s -> ratio {proposed_s / 60:.2f}"),
        BenchRow("recorder", "hookctl replay: recorded and proposed together", f"{together_s:.1f} s",
                 f"{os.cpu_count()} CPUs, one process per run (sequential sum {as_recorded_s + proposed_s:.1f} s); "
                 f"target 60 s -> ratio {together_s / 60:.2f}"),
    ]
