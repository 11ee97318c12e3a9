"""The child side of tests/collectors/fake_nvml.py: run the GPU collector on real pynvml over the fake library.

    LD_LIBRARY_PATH=<fake dir> FAKE_NVML_FIXTURE=<json> python -m tests.collectors.fake_nvml_worker < spec.json

The spec (JSON on stdin) names a FakeHost tree the parent wrote (`host`: {"base", "version"}), the pods and
containers the store knows (`pods`), and `steps`, run in order:

    {"op": "fixture", "data": {...}}   rewrite the fixture (the library re-reads it)
    {"op": "cycle"}                    one GPU collector cycle (probe first, once), then what it stored
    {"op": "close"}                    close the scheduler (NVML shutdown)

It prints one JSON report: {"library": the path pynvml loaded, "observations": one per cycle or close}.
A cycle's observation holds the collector's status, the inventory static (`devices`, as dicts), the driver
version static and the samples stored at this cycle's timestamp. Assertions live in the tests, not here.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from collectors.gpu import GPU_DEVICES_KEY, GPU_DRIVER_VERSION_KEY
from collectors.nvml import PynvmlApi
from hookserver.store.state import StateStore
from tests.collectors.fake_nvml import FIXTURE_ENV, write_fixture
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod, make_scheduler


def _observe(sched: Any, store: StateStore, now: float) -> dict[str, Any]:
    devices = store.series.get_static(GPU_DEVICES_KEY) or ()
    return {
        "status": sched.status()["collectors"]["gpu"],
        "devices": [asdict(d) for d in devices],
        "driver_version": store.series.get_static(GPU_DRIVER_VERSION_KEY),
        "samples": sorted(
            ({"metric": key.metric, "labels": key.as_dict(), "value": value}
             for key, ts, value, _interval in store.series.latest() if ts == now),
            key=lambda s: (s["metric"], sorted(s["labels"].items())),
        ),
    }


def _loaded_nvml() -> str:
    """The file this process mapped as libnvidia-ml.so.1: proof of which library pynvml talked to."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith("libnvidia-ml.so.1"):
                return line.split()[-1]
    return ""


def main() -> int:
    import os

    spec = json.load(sys.stdin)
    fixture = Path(os.environ[FIXTURE_ENV])
    host = FakeHost(Path(spec["host"]["base"]), version=int(spec["host"].get("version", 2)))
    clock = FakeClock()
    store = StateStore(clock=clock.time)
    for pod in spec.get("pods", []):
        store.upsert_pod(make_pod(pod["uid"], cgroup_parent=pod["cgroup_parent"], qos_class=pod.get("qos", "LS")))
        for c in pod.get("containers", []):
            store.upsert_container(make_container(c["id"], pod["uid"], name=c["name"], cgroup_parent=pod["cgroup_parent"]))
    sched = make_scheduler(host, clock, store, nvml=PynvmlApi(host.roots))
    observations: list[dict[str, Any]] = []
    closed = False
    for step in spec["steps"]:
        if step["op"] == "fixture":
            write_fixture(fixture, step["data"])
        elif step["op"] == "cycle":
            clock.advance(1.0)
            sched.probe()
            if sched.states()["gpu"].enabled:
                sched.run_group(["gpu"], 1.0)
            observations.append(_observe(sched, store, clock.time()))
        elif step["op"] == "close":
            sched.close()
            closed = True
            observations.append({"closed": True})
        else:
            raise ValueError(f"unknown step {step!r}")
    if not closed:
        sched.close()
    json.dump({"library": _loaded_nvml(), "observations": observations}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
