"""hami_vgpu_collect: one hami_vgpu collector cycle over 100 HAMi-core containers' shared cache files.

What the daemon runs each interval with `HamiCoreVGPUMonitor` on: list `<containers dir>`, and per entry map
the name to a known pod, open the directory and the file without following links, fstat, three `pread`s
(header, tail, the slots in use), decode, emit the container's and the pod's series, and the store append.
The node: 50 pods x 2 containers, each container with 2 HAMi-core processes on 1 GPU (HAMi-core's real
2 MB region, written sparse as its ftruncate'd file is). `python -m tests.bench hami_vgpu` runs only this.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tests.bench.common import BenchRow, summarize

PODS = 50
CONTAINERS_PER_POD = 2
ROUNDS = 300
WARMUP = 20


def run() -> list[BenchRow]:
    from hookserver.store.state import StateStore
    from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod, make_scheduler
    from tests.collectors.hami_region import GiB, Proc, pack_region, write_entry

    containers = PODS * CONTAINERS_PER_POD
    name = f"hami_vgpu_collect: one cycle, {containers} containers' cache files (2 procs each)"
    with tempfile.TemporaryDirectory(prefix="bench-hami-") as tmp:
        base = Path(tmp)
        host = FakeHost(base / "host", version=2)
        clock = FakeClock()
        store = StateStore(clock=clock.time)
        root = base / "containers"
        region = pack_region(
            ["GPU-00000000-0000-0000-0000-000000000000"], limits=[8 * GiB], sm_limits=[50],
            procs=[Proc(1, used={0: 2 * GiB}, sm={0: 20}), Proc(2, used={0: 1 * GiB}, sm={0: 10})],
        )
        for p in range(PODS):
            uid = f"00000000-0000-4000-8000-{p:012d}"
            rel = f"kubepods/burstable/pod{uid}"
            store.upsert_pod(make_pod(uid, cgroup_parent="/" + rel, qos_class="LS"))
            for c in range(CONTAINERS_PER_POD):
                store.upsert_container(make_container(f"c{p}-{c}", uid, name=f"w{c}", cgroup_parent="/" + rel))
                write_entry(root, uid, f"w{c}", region, sparse=True)
        sched = make_scheduler(host, clock, store, hami_vgpu={"enabled": True}, hami_vgpu_dir=str(root))
        sched.probe()
        times: list[float] = []
        for i in range(WARMUP + ROUNDS):
            clock.advance(1.0)
            start = time.perf_counter()
            sched.run_group(["hami_vgpu"], 1.0)
            if i >= WARMUP:
                times.append(time.perf_counter() - start)
        state = sched.states()["hami_vgpu"]
        sched.close()
    s = summarize(times)
    note = f"p99 {s['p99_ms']:.2f} ms, {state.last_samples} samples/cycle, {ROUNDS} rounds"
    if state.read_errors_total or state.last_samples != containers * 4 + PODS * 2:
        note += f" (but {state.read_errors_total} read errors, {state.last_samples} samples: the fixture is wrong)"
    return [BenchRow("collectors", name, f"{s['p50_ms']:.2f} ms", note)]


if __name__ == "__main__":
    from tests.bench.common import print_rows

    print_rows(run())
