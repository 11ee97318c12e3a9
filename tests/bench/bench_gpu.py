"""gpu_collect: one GPU collector cycle for 8 GPUs, in-process, on real pynvml over the fake libnvidia-ml.so.1.
Target from issue 36: <= 5 ms per round. `python -m tests.bench gpu` runs only this module.

The fake (tests/fixtures/fake_nvml) is compiled into a temporary directory and the rounds run in a child
process with it on LD_LIBRARY_PATH (the loader reads that variable at start; see tests/collectors/fake_nvml.py).
A round is what the daemon runs each interval: `run_group(["gpu"])`, i.e. the inventory re-read (XID poll,
count, handle, UUID and memory per device), per-device utilisation, memory and processes, per-process SM
samples, the process -> pod mapping through /proc/<pid>/cgroup, and the store append. Each GPU has 4
processes in 4 pods. The driver hands out new per-process samples every interval; the fake's are fixed, so
the "last seen" timestamps are reset between rounds (outside the timed part) to keep the sampled path.
The fake's own work (a ctypes call crossing into C) is inside the time, as the real driver's would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.common import BenchRow, summarize
from tests.collectors.fake_nvml import GiB, build_fake_nvml, compiler, fake_gpu, worker_env, write_fixture

GPUS = 8
PROCS_PER_GPU = 4
ROUNDS = 300
WARMUP = 20
TARGET_MS = 5.0


def _child(base: Path) -> None:
    """Runs with the fake loaded: time ROUNDS cycles and print the seconds of each."""
    from collectors.nvml import PynvmlApi
    from hookserver.store.state import StateStore
    from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod, make_scheduler

    host = FakeHost(base / "host", version=2)
    clock = FakeClock()
    store = StateStore(clock=clock.time)
    for g in range(GPUS):
        for p in range(PROCS_PER_GPU):
            uid, rel = f"uid-{g}-{p}", f"kubepods/burstable/poduid-{g}-{p}"
            store.upsert_pod(make_pod(uid, cgroup_parent="/" + rel, qos_class="LS"))
            store.upsert_container(make_container(f"c{g}{p}", uid, name="worker", cgroup_parent="/" + rel))
            host.set_pid_cgroup(10_000 + 100 * g + p, f"/{rel}/c{g}{p}")
    api = PynvmlApi(host.roots)
    sched = make_scheduler(host, clock, store, nvml=api)
    sched.probe()
    assert sched.states()["gpu"].enabled, sched.states()["gpu"].disabled_reason
    times: list[float] = []
    for i in range(WARMUP + ROUNDS):
        api._last_seen_us.clear()  # new samples each round, as the driver gives them
        clock.advance(1.0)
        start = time.perf_counter()
        sched.run_group(["gpu"], 1.0)
        if i >= WARMUP:
            times.append(time.perf_counter() - start)
    state = sched.states()["gpu"]
    sched.close()
    print(json.dumps({"times": times, "samples": state.last_samples, "errors": state.read_errors_total}))


def _fixture() -> dict[str, Any]:
    gpus = []
    for g in range(GPUS):
        pids = [10_000 + 100 * g + p for p in range(PROCS_PER_GPU)]
        gpus.append(fake_gpu(
            g, memory_used=20 * GiB, utilization_gpu=60, processes=[(pid, 4 * GiB) for pid in pids],
            samples=[(pid, 1_000, 15) for pid in pids],
        ))
    return {"driver_version": "550.54.15", "devices": gpus, "events": []}


def run() -> list[BenchRow]:
    name = f"gpu_collect: one cycle, {GPUS} GPUs x {PROCS_PER_GPU} pods, fake NVML"
    if compiler() is None:
        return [BenchRow("collectors", name, "skipped", "no C compiler to build the fake libnvidia-ml.so.1")]
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        base = Path(tmp)
        lib = build_fake_nvml(base / "lib")
        fixture = base / "nvml.json"
        write_fixture(fixture, _fixture())
        done = subprocess.run(
            [sys.executable, "-m", "tests.bench.bench_gpu", "--child", str(base)],
            capture_output=True, text=True, env=worker_env(lib, fixture), timeout=120, check=False,
        )
    if done.returncode != 0:
        return [BenchRow("collectors", name, "failed", done.stderr.strip().splitlines()[-1] if done.stderr else "")]
    out = json.loads(done.stdout)
    s = summarize(out["times"])
    verdict = "meets" if s["p50_ms"] <= TARGET_MS else "MISSES"
    if out["errors"]:
        verdict += f" (but {out['errors']} read errors: the fixture is wrong)"
    return [BenchRow(
        "collectors", name, f"{s['p50_ms']:.2f} ms",
        f"p99 {s['p99_ms']:.2f} ms, {out['samples']} samples/cycle, {ROUNDS} rounds; {verdict} the {TARGET_MS:.0f} ms target",
    )]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(Path(sys.argv[2]))
    else:
        from tests.bench.common import print_rows

        print_rows(run())
