"""Run one GPU collection against the real NVML and print the inventory and samples as JSON.

    python -m tests.collectors.gpu_probe [--proc /proc] [--cgroup /sys/fs/cgroup] [--samples 2]

For a machine with an NVIDIA GPU: it exercises the real `PynvmlApi` (init, inventory, utilisation, memory,
processes, per-process SM use) and the same mapping code the daemon uses. Exits 0 with `"enabled": true` when
NVML works, 2 with the reason when the collector disabled itself, 1 on an unexpected failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from collectors.gpu import GpuCollector
from collectors.nvml import PynvmlApi
from collectors.scheduler import CollectorScheduler
from collectors.settings import CollectorSettings, CollectorToggle
from collectors.targets import TargetResolver
from hookserver.system.cgroupnames import CgroupDriver, ContainerRuntime
from hookserver.store.state import StateStore
from hookserver.system.procfs import read_pid_cgroup
from hookserver.system.roots import SystemRoots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--proc", default="/proc")
    parser.add_argument("--cgroup", default="/sys/fs/cgroup")
    parser.add_argument("--samples", type=int, default=2, help="collections to run, 1 s apart")
    args = parser.parse_args(argv)
    roots = SystemRoots(proc=args.proc, cgroup=args.cgroup)
    store = StateStore()
    collector = GpuCollector(roots, PynvmlApi(roots))
    settings = CollectorSettings(gpu=CollectorToggle(enabled=True))
    resolver = TargetResolver(driver=CgroupDriver.SYSTEMD, runtime=ContainerRuntime.CONTAINERD, exists=lambda _rel: False)
    sched = CollectorScheduler([collector], settings=settings, store=store, resolver=resolver, node_name="probe")
    try:
        sched.probe()
        state = sched.states()["gpu"]
        report: dict[str, object] = {"enabled": state.enabled, "disabled_reason": state.disabled_reason}
        if not state.enabled:
            print(json.dumps(report, indent=2))
            return 2
        report["driver_version"] = collector.driver_version
        report["devices"] = [asdict(d) for d in collector.devices]
        processes: dict[str, list[dict[str, object]]] = {}
        for dev in collector.devices:
            # The cgroup paths are what the collector matches against pod and container directories.
            processes[dev.uuid] = [
                asdict(p) | {"cgroups": [path for _c, path in read_pid_cgroup(roots, p.pid)]}
                for p in collector.nvml.processes(dev.index)
            ]
        report["processes"] = processes
        for i in range(max(args.samples, 1)):
            if i:
                time.sleep(1.0)
            sched.run_group(["gpu"], 1.0)
        report["samples"] = [
            {"metric": k.metric, "labels": k.as_dict(), "value": v, "ts": ts}
            for k, ts, v, _interval in sorted(store.series.latest(), key=lambda row: row[0])
        ]
        report["status"] = asdict(sched.states()["gpu"])
        print(json.dumps(report, indent=2, default=str))
        return 0 if state.failures == 0 else 1
    finally:
        sched.close()


if __name__ == "__main__":
    sys.exit(main())
