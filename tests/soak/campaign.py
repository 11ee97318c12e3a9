"""The shared state of one soak campaign: the agent, its cgroup subtree, the NRI runtime with hundreds of synced
pods, the proxy client, pod churn, fault control and the checks every phase ends with.

Why one long-lived context: fds, threads and RSS only show a leak across phases, and the pods synced at the
first start are the ones whose values every restart must restore.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.soak.agent import Agent, AgentPaths
from tests.soak.report import Row
from tests.soak.traffic import POD_VALUES, Answer, CgroupTree, NriHost, ProxyClient, nri_pod

__all__ = ["CHURN_KEEP", "DISCARDING", "Campaign", "outside"]

# Pods churned at a time at SOAK_SCALE=1: older churn pods are removed as new ones come. Scaled with the run
# (`churn_keep`), and the warm-up churns until this many are alive, so the live pod count is flat after warm-up
# at any scale (at 0.3 a 13 s warm-up left 13 of 40, and the store's pods then "grew" 17 % as the rest came).
CHURN_KEEP = 40
# Paths a write to keeps nothing on the node: opening them for writing is no write outside the agent's dirs
# (subprocess's DEVNULL, a `print` redirected away).
DISCARDING = frozenset({"/dev/null"})


@dataclass
class Campaign:
    base: Path
    synced_pods: int
    churn_keep: int = CHURN_KEEP
    rng: random.Random = field(default_factory=lambda: random.Random(int(os.environ.get("SOAK_SEED", "22"))))
    tree: CgroupTree = field(default_factory=CgroupTree)
    churn: list[str] = field(default_factory=list)
    seq: int = 0
    row: Row | None = None
    up: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.paths = AgentPaths(self.base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.synced = [self.tree.new_pod() for _ in range(self.synced_pods)]
        self.nri = NriHost(self.paths.nri_socket, [nri_pod(rel, f"s{i}") for i, rel in enumerate(self.synced)])
        self.agent = Agent(self.paths, extra_args=(
            "--nri-socket", str(self.paths.nri_socket), "--slo-file", str(self.base / "slo.yaml")))
        self.proxy: ProxyClient | None = None
        self.faults({})

    # --- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> float:
        self.nri.start()
        took = self.agent.start()
        self.nri.wait_ready(30)
        self.proxy = ProxyClient(self.paths.hook_socket)
        self.up.set()
        return took

    def close(self) -> None:
        """Stop everything; the cgroup subtree goes whatever fails (or is interrupted) before it."""
        self._stop.set()
        self.up.clear()
        try:
            if self.proxy is not None:
                self.proxy.close()
            try:
                self.agent.stop()
            finally:
                self.agent.kill()
                self.nri.close()
        finally:
            self.tree.remove()

    def faults(self, spec: dict[str, Any]) -> None:
        """Write the shim's control file (atomically: the agent reads it)."""
        tmp = self.paths.control.with_suffix(".new")
        tmp.write_text(json.dumps(spec))
        tmp.replace(self.paths.control)
        # The shim re-reads at most every 0.2 s; an mtime within the same tick would be missed.
        os.utime(self.paths.control, ns=(time.time_ns(), time.time_ns()))
        time.sleep(0.3)

    def injected(self) -> int:
        try:
            return len(self.paths.injected.read_text().splitlines())
        except FileNotFoundError:
            return 0

    # --- traffic -----------------------------------------------------------------------------------------
    def create(self, row: Row) -> Answer:
        """One pod creation through the proxy and one container creation through NRI; the older churn pods
        are removed (their cgroups vanish as when a pod ends)."""
        with self._lock:
            self.seq += 1
            n = f"c{self.seq}"
            rel = self.tree.new_pod()
            self.churn.append(rel)
            old = self.churn[:-self.churn_keep]
            del self.churn[:-self.churn_keep]
        for gone in old:
            self.tree.drop_pod(gone)
        assert self.proxy is not None
        answer = self.proxy.create(rel, n)
        row.answers.append(answer)
        nri = self.nri.create(n, rel)
        row.answers.append(nri)
        return answer

    def churn_for(self, row: Row, seconds: float, *, rate_per_s: float = 1.0, until_full: bool = False) -> None:
        """Pod creations at `rate_per_s` for `seconds`, sampling the agent every 2 s; with `until_full`, also
        until `churn_keep` churned pods are alive (the warm-up: the live pod count is steady after it)."""
        end = time.monotonic() + seconds
        next_sample = 0.0
        while time.monotonic() < end or (until_full and len(self.churn) < self.churn_keep):
            self.create(row)
            if time.monotonic() >= next_sample:
                self.sample(row)
                next_sample = time.monotonic() + 2.0
            time.sleep(max(0.0, self.rng.expovariate(rate_per_s)))

    def sample(self, row: Row) -> None:
        sample = self.agent.sample()
        if sample is not None:
            row.samples.append(sample)

    # --- checks ------------------------------------------------------------------------------------------
    def leftover_tmp(self, *, settle_s: float = 1.0) -> list[str]:
        """`*.tmp` files that stay: seen twice, `settle_s` apart. A live agent's write (a checkpoint round, the
        status document) holds its tmp for the milliseconds of write, fsync and rename; one look can land
        inside it (the predictor's `__node-koord-batch__.json.tmp` was caught so in one `make soak` run)."""
        first = set(self._tmp_files())
        if not first or settle_s <= 0:
            return sorted(first)
        time.sleep(settle_s)
        return sorted(first & set(self._tmp_files()))

    def _tmp_files(self) -> list[str]:
        found: list[str] = []
        for dirpath, _, files in os.walk(self.paths.state):
            found += [os.path.join(dirpath, f) for f in files if ".tmp" in f]
        reg = self.paths.registration.parent
        if reg.is_dir():
            found += [str(p) for p in reg.iterdir() if ".tmp" in p.name]
        return found

    def corrupt_state(self) -> list[str]:
        """State files that do not decode: a kill must leave the old or the new file, never half of one."""
        bad: list[str] = []
        for dirpath, _, files in os.walk(self.paths.state):
            if os.path.basename(dirpath) == "rejected":
                bad += [os.path.join(dirpath, f) for f in files]
                continue
            for name in files:
                path = os.path.join(dirpath, name)
                if name.endswith(".corrupt"):
                    bad.append(path)
                elif name.endswith(".json"):
                    try:
                        json.loads(Path(path).read_bytes())
                    except (OSError, ValueError):
                        bad.append(path)
        return bad

    def restored(self, rels: list[str], *, timeout: float) -> list[str]:
        """The synced pods whose cgroup values are not (yet) what the hooks want, after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            wrong = [f"{rel}/{knob}={self.tree.read(rel, knob)}" for rel in rels for knob, want in POD_VALUES.items()
                     if self.tree.read(rel, knob) != want]
            if not wrong or time.monotonic() > deadline:
                return wrong
            time.sleep(0.1)

    def outside_writes(self) -> list[str]:
        """Every path the agent opened for writing that is neither in its cgroup subtree nor its own dirs (nor
        one that keeps nothing, `DISCARDING`)."""
        try:
            seen = self.paths.writes.read_text().splitlines()
        except FileNotFoundError:
            return []
        return outside(seen, [*self.tree.dirs(), self.base])


def outside(paths: list[str], allowed_dirs: list[Path]) -> list[str]:
    """The `paths` that are under none of `allowed_dirs` and keep something (not `DISCARDING`), sorted once each."""
    allowed = [str(d) + "/" for d in allowed_dirs]
    return sorted({p for p in paths if p not in DISCARDING and not any(p.startswith(a) for a in allowed)})
