"""hookserver's NRI plugin against a Go plugin, both driven by the real NRI runtime library.

The runtime side is containerd/nri's `pkg/adaptation` (the code containerd runs), in a small Go harness
(tests/bench/go_nri/harness); the Go plugin (tests/bench/go_nri/plugin) is built on nri's `pkg/stub` and
does what hookserver's batchresource hook does for a BE pod: cpu shares, quota (the period left alone) and
the memory limit from the koordinator batch spec, as a ContainerAdjustment in CreateContainer and as one
ContainerUpdate a running container in Synchronize. hookserver is `NriPlugin` with a real dispatcher,
store, metrics and the batchresource hook in its own process, handed a socket already connected to the
harness (the pre-launched path, as in bench_nri.py and bench_nri_sync.py).

A third plugin, the Go one with -noop, is the floor: the same stub receives and decodes the same requests
and answers with nothing, so `hookserver - floor` vs `Go - floor` is what each plugin's own work costs
(the runtime library, its marshalling and the sockets are in every row: at 2,500 pods most of a sync).

One harness process serves one plugin (the adaptation calls every registered plugin), so each round
starts a fresh harness and plugin, Go and hookserver alternating (order flipped every round) so machine
noise hits both alike. The pods and requests are the same bytes for both, written here from
tests/nri/scale.py (realistic BE pods: labels, koordinator annotations, ~2 KiB of pod annotations,
kubelet container annotations, env, mounts).

* CreateContainer: CREATE_ROUNDS rounds of CALLS // CREATE_ROUNDS serial calls each (after WARMUP untimed
  ones), a new container of a different pod every call, each after a RunPodSandbox for its pod as on a node
  (RUN_POD_FIRST; hookserver subscribes to it, the Go plugin does not, so for Go the adaptation skips it),
  POD_GAP_MS after it (a harness built before that flag runs them back to back, and the rows say so);
  the time is the harness's around `adaptation.CreateContainer` (the runtime's view: marshal, both sockets,
  the plugin, unmarshal, merge), RunPodSandbox timed apart, and "pod start" is the two together.
* Synchronize: the harness holds P pods x 2 running containers; `sync` is the Synchronize RPC (request
  marshalled, split by nri >= 0.7 under ttrpc's 4 MiB, sent, reply read), `connect->sync` is from the
  plugin's RegisterPlugin arriving to the sync reply (register + configure + synchronize). `updates`
  counts the returned updates that match what the hook computes (all of them is 2 x P).

Needs the Go build: `make bench-go` (tests/bench/go_nri/build.sh fetches Go and the NRI library as Debian
packages through apt, from the host's configured archive, into build/go-nri/). Without it the module prints one "skipped" row. `python -m tests.bench
nri_go` runs only this module.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hookserver.api import nri_pb2
from tests.bench.common import BenchRow, child_pythonpath, percentile, stop_process
from tests.nri.scale import expected_update, node_objects

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("GO_NRI_BIN", ROOT / "build" / "go-nri" / "bin"))
CALLS = 2000
CREATE_ROUNDS = 4
WARMUP = 200
SYNC_PODS = (100, 500, 1000, 2500)
SYNC_REPEATS = 5
# RunPodSandbox for the pod before its CreateContainer, as containerd does. False: the pod is new to the
# plugin at CreateContainer (hookserver then decodes and files it there: ~0.25 ms more a call, 2026-11-26).
RUN_POD_FIRST = True
# And its CreateContainer this long after (the kubelet creates a pod's first container once its sandbox is up,
# milliseconds later at the least): a plugin that keeps a pod's books after RunPodSandbox's answer does it there,
# as on a node, instead of in the next call's time. 0 sends them back to back.
POD_GAP_MS = 1.0
PLUGINS = ("go-noop", "go", "hookserver")
LABELS = {"go-noop": "Go no-op plugin (floor)", "go": "Go plugin (nri pkg/stub)", "hookserver": "hookserver"}


@dataclass(frozen=True)
class Round:
    sync_s: float
    connect_to_sync_s: float
    updates: int
    correct: int
    messages: int  # Synchronize requests the runtime sent
    error: str
    create_s: list[float]
    runpod_s: list[float]
    adjust: tuple[int, int, int, int] | None  # shares, quota, period, memory limit of the last reply


def _sock_dir() -> Path:
    """A short directory: unix socket paths must stay under 108 bytes."""
    return Path(tempfile.mkdtemp(prefix="nrigo-", dir="/tmp"))


def _start_plugin(kind: str, sock: Path) -> subprocess.Popen[bytes]:
    if kind.startswith("go"):
        return subprocess.Popen([str(BIN / "nri-plugin"), "-socket", str(sock)] + (["-noop"] if kind == "go-noop" else []))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(sock))
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.bench.bench_nri", "--plugin", str(conn.fileno())],
            pass_fds=[conn.fileno()], cwd=ROOT, env={**os.environ, "PYTHONPATH": child_pythonpath(ROOT)},
        )
    finally:
        conn.close()


@functools.lru_cache(maxsize=1)
def _pod_gap_ms() -> float:
    """POD_GAP_MS where the harness knows -pod-gap (one built before it does not: 0, back to back)."""
    if not RUN_POD_FIRST or POD_GAP_MS <= 0:
        return 0.0
    usage = subprocess.run([str(BIN / "nri-harness"), "-h"], capture_output=True, text=True, timeout=30)
    return POD_GAP_MS if "-pod-gap" in usage.stderr + usage.stdout else 0.0


def _correct(updates: list[nri_pb2.ContainerUpdate]) -> int:
    ok = 0
    for u in updates:
        _, index, name = u.container_id.split("-", 2)
        r = u.linux.resources
        ok += (r.cpu.shares.value, r.cpu.quota.value, r.memory.limit.value) == expected_update(int(index), name)
    return ok


def _round(kind: str, sync_file: Path, create_file: Path | None, calls: int) -> Round:
    """One fresh harness and one fresh plugin: the sync, then `calls` CreateContainer calls."""
    work = _sock_dir()
    sock = work / "nri.sock"
    cmd = [str(BIN / "nri-harness"), "-socket", str(sock), "-sync", str(sync_file), "-out", str(work),
           "-calls", str(calls), "-warmup", str(WARMUP), f"-expect-adjust={str(kind != 'go-noop').lower()}",
           f"-run-pod={str(RUN_POD_FIRST).lower()}"]
    if _pod_gap_ms():
        cmd += [f"-pod-gap={_pod_gap_ms()}ms"]
    if create_file is not None:
        cmd += ["-create", str(create_file)]
    harness = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    plugin: subprocess.Popen[bytes] | None = None
    try:
        assert harness.stdout is not None
        if harness.stdout.readline().strip() != "ready":
            raise RuntimeError(f"nri-harness did not start (exit {harness.wait()})")
        plugin = _start_plugin(kind, sock)
        line = harness.stdout.readline()
        if harness.wait(timeout=600) != 0 or not line:
            raise RuntimeError(f"nri-harness failed with {kind} (exit {harness.returncode})")
        res = json.loads(line)
        reply = nri_pb2.SynchronizeResponse.FromString((work / "sync-reply.pb").read_bytes())
        create_s: list[float] = []
        runpod_s: list[float] = []
        adjust = None
        if calls:
            create_s = [int(n) / 1e9 for n in (work / "create-ns.txt").read_text().split()]
            runpod_s = [int(n) / 1e9 for n in (work / "runpod-ns.txt").read_text().split()]
            r = nri_pb2.CreateContainerResponse.FromString((work / "create-reply.pb").read_bytes()).adjust.linux.resources
            adjust = (r.cpu.shares.value, r.cpu.quota.value, r.cpu.period.value, r.memory.limit.value)
        return Round(
            res["sync_ns"] / 1e9, res["register_to_sync_ns"] / 1e9, res["updates"], _correct(list(reply.update)), res["sync_messages"],
            res.get("sync_error", ""), create_s, runpod_s, adjust,
        )
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if plugin is not None:
            stop_process(plugin)
        shutil.rmtree(work, ignore_errors=True)


def _write_inputs(work: Path) -> tuple[Path, Path, tuple[int, int, int, int]]:
    """The create requests (a pod of its own each, uint32 BE length + bytes) and a small node to sync."""
    per_round = CALLS // CREATE_ROUNDS
    pods, ctrs = node_objects(WARMUP + per_round)
    blob = bytearray()
    for i in range(WARMUP + per_round):
        ctr = nri_pb2.Container()
        ctr.CopyFrom(ctrs[2 * i])
        ctr.id, ctr.state = f"new-{i}-main", nri_pb2.CONTAINER_CREATED
        data = nri_pb2.CreateContainerRequest(pod=pods[i], container=ctr).SerializeToString()
        blob += struct.pack(">I", len(data)) + data
    create_file = work / "create.bin"
    create_file.write_bytes(bytes(blob))
    sync_file = work / "sync-10.pb"
    small_pods, small_ctrs = node_objects(10)
    sync_file.write_bytes(nri_pb2.SynchronizeRequest(pods=small_pods, containers=small_ctrs).SerializeToString())
    # The harness goes through the requests in order, warm-up first: the last timed call is the last one.
    shares, quota, limit = expected_update(WARMUP + per_round - 1, "main")
    return create_file, sync_file, (shares, quota, 0, limit)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _create_rows(results: dict[str, list[Round]], want: tuple[int, int, int, int]) -> list[BenchRow]:
    rows: list[BenchRow] = []
    stats: dict[str, tuple[float, float, float, float]] = {}
    for kind in PLUGINS:
        samples = [s for r in results[kind] for s in r.create_s]
        p50, p99, p999 = (percentile(samples, p) for p in (50, 99, 99.9))
        throughput = len(samples) / sum(samples)
        stats[kind] = (p50, p99, p999, throughput)
        adjusts = {r.adjust for r in results[kind]}
        good = {(0, 0, 0, 0)} if kind == "go-noop" else {want}
        rows.append(BenchRow(
            "nri-go", f"CreateContainer x1 {LABELS[kind]}",
            f"p50 {_ms(p50)} ms  p99 {_ms(p99)} ms  p99.9 {_ms(p999)} ms  {throughput:.0f}/s",
            f"{len(samples)} serial calls in {len(results[kind])} rounds; last adjustment (shares, quota, period, "
            f"memory) {'ok' if adjusts == good else f'WRONG {sorted(adjusts, key=str)} want {good}'}",
        ))
    if RUN_POD_FIRST:
        for kind in PLUGINS:
            pod = [s for r in results[kind] for s in r.runpod_s]
            start = [p + c for r in results[kind] for p, c in zip(r.runpod_s, r.create_s)]
            rp, st = (tuple(percentile(x, q) for q in (50, 99, 99.9)) for x in (pod, start))
            rows.append(BenchRow(
                "nri-go", f"RunPodSandbox + CreateContainer {LABELS[kind]}",
                f"p50 {_ms(st[0])} ms  p99 {_ms(st[1])} ms  p99.9 {_ms(st[2])} ms",
                f"pod start, per pod; RunPodSandbox alone p50 {_ms(rp[0])} p99 {_ms(rp[1])} p99.9 {_ms(rp[2])} ms"
                + (" (not subscribed: the adaptation skips it)" if kind.startswith("go") else ""),
            ))
            stats[f"{kind}-start"] = (st[0], st[1], st[2], len(start) / sum(start))
    go, hs, floor = stats["go"], stats["hookserver"], stats["go-noop"]
    if RUN_POD_FIRST:
        gs, hss = stats["go-start"], stats["hookserver-start"]
        rows.append(BenchRow(
            "nri-go", "RunPodSandbox + CreateContainer ratio hookserver/Go",
            f"p50 {hss[0] / gs[0]:.2f}  p99 {hss[1] / gs[1]:.2f}  p99.9 {hss[2] / gs[2]:.2f}  throughput {hss[3] / gs[3]:.2f}",
            "pod start: what the runtime waits for on a new pod; "
            + (f"its CreateContainer {_pod_gap_ms():g} ms after its RunPodSandbox" if _pod_gap_ms()
               else "its CreateContainer right after its RunPodSandbox (back to back)"),
        ))
    rows.append(BenchRow(
        "nri-go", "CreateContainer x1 ratio hookserver/Go",
        f"p50 {hs[0] / go[0]:.2f}  p99 {hs[1] / go[1]:.2f}  p99.9 {hs[2] / go[2]:.2f}  throughput {hs[3] / go[3]:.2f}",
        f"through nri pkg/adaptation; above the floor p50 {(hs[0] - floor[0]) * 1e6:.0f} vs {(go[0] - floor[0]) * 1e6:.0f} us; "
        f"interleaved rounds; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
    ))
    return rows


def _sync_rows(pods: int, results: dict[str, list[Round]]) -> list[BenchRow]:
    rows: list[BenchRow] = []
    medians: dict[str, tuple[float, float]] = {}
    for kind in PLUGINS:
        runs = results[kind]
        ok = [r for r in runs if not r.error]
        sync = statistics.median(r.sync_s for r in ok) if ok else float("nan")
        connect = statistics.median(r.connect_to_sync_s for r in ok) if ok else float("nan")
        medians[kind] = (sync, connect)
        errors = sorted({r.error for r in runs if r.error})
        rows.append(BenchRow(
            "nri-go", f"Synchronize {pods} pods x2 {LABELS[kind]}",
            f"sync {sync * 1000:.1f} ms  connect->sync {connect * 1000:.1f} ms",
            f"median of {len(ok)}/{len(runs)} ({', '.join(f'{r.sync_s * 1000:.0f}' for r in runs)}); updates "
            f"{min(r.updates for r in runs)} returned, {min(r.correct for r in runs)}/{2 * pods} correct (fewest); "
            f"{max(r.messages for r in runs)} Synchronize request(s) incl. any ttrpc refused as over 4 MiB"
            + (f"; errors: {'; '.join(errors)}" if errors else ""),
        ))
    go, hs, floor = medians["go"], medians["hookserver"], medians["go-noop"]
    rows.append(BenchRow(
        "nri-go", f"Synchronize {pods} pods x2 ratio hookserver/Go",
        f"sync {hs[0] / go[0]:.2f}  connect->sync {hs[1] / go[1]:.2f}",
        f"above the floor {(hs[0] - floor[0]) * 1000:.1f} vs {(go[0] - floor[0]) * 1000:.1f} ms; "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
    ))
    return rows


def _versions() -> str:
    path = BIN / "versions.txt"
    return "; ".join(path.read_text().split("\n")).strip("; ") if path.exists() else "unknown"


def run() -> list[BenchRow]:
    missing = [name for name in ("nri-harness", "nri-plugin") if not (BIN / name).exists()]
    if missing:
        return [BenchRow("nri-go", "skipped", "-", f"no Go build in {BIN} (missing {', '.join(missing)}); "
                         "`make bench-go` builds it from Debian packages through apt (tests/bench/go_nri/build.sh)")]
    rows = [BenchRow("nri-go", "versions", "-", _versions())]
    work = _sock_dir()
    try:
        create_file, small_sync, want = _write_inputs(work)
        results: dict[str, list[Round]] = {kind: [] for kind in PLUGINS}
        for r in range(CREATE_ROUNDS):
            for kind in PLUGINS if r % 2 == 0 else tuple(reversed(PLUGINS)):
                results[kind].append(_round(kind, small_sync, create_file, CALLS // CREATE_ROUNDS))
        rows += _create_rows(results, want)
        for pods in SYNC_PODS:
            node_pods, node_ctrs = node_objects(pods)
            sync_file = work / f"sync-{pods}.pb"
            sync_file.write_bytes(nri_pb2.SynchronizeRequest(pods=node_pods, containers=node_ctrs).SerializeToString())
            results = {kind: [] for kind in PLUGINS}
            for r in range(SYNC_REPEATS):
                for kind in PLUGINS if r % 2 == 0 else tuple(reversed(PLUGINS)):
                    results[kind].append(_round(kind, sync_file, None, 0))
            rows += _sync_rows(pods, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows
