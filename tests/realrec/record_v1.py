"""A real flight recording on cgroup v1, made by the real agent (issue 39: "record a recording of your own").

`python -m tests.realrec.record_v1 OUT_DIR [DURATION_S]` (root, a writable cgroup v1 hierarchy at
/sys/fs/cgroup/<subsystem>, no `kubepods` there yet) starts `hookserver serve --standalone --no-nri
--evict-standalone kill`, announces 3 LS and 5 BE pods through the runtime-proxy hooks over its real unix
socket, gives each pod and container real cgroups under kubepods/ and a real process, and lets the agent's
flight recorder run for DURATION_S (480 s):

* LS pods `web-*`: busy 15 % of the time, all three at 100 % for 60 s in the middle (the spike);
* BE pods `batch-*`: busy loops under CPU suppress (cfsQuota at 65 %);
* BE pods `grow-*`: grow their memory (16-20 MiB/s) until the agent evicts them for node memory
  (`memoryEvictThresholdPercent`, MEM_EVICT_PCT, default 12: about 2 GiB above a quiet 24 GiB machine).

BE pods carry koord-manager's extended-resource-spec annotation (batch-cpu 500m and 2000m) and, with
BE_EVICTION_ENABLED=1 (default), `koordinator.sh/eviction-enabled` so the CPUEvict usage mode may pick them.
The recording is exported with `hookctl record export` to OUT_DIR/<REC_NAME>.sqlite (REC_NAME, default
`real`), with the agent's log, its status every minute and an event log beside it. Every cgroup and process
made is removed at the end. `deploy/replay/real-v1-8min.sqlite` was made with it (`tests/recorder/
test_real_recording.py` replays it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from tests.sockets import accepts

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
HOOKCTL = [PY, "-m", "hookserver.cli.hookctl"]
CG = Path("/sys/fs/cgroup")
HIER = ["cpu", "cpuacct", "memory", "freezer", "cpuset", "blkio", "pids"]
SPEC_KEY = "node.koordinator.sh/extended-resource-spec"
MEM_EVICT_PCT = os.environ.get("MEM_EVICT_PCT", "12")  # checked by main()
REC_NAME = os.environ.get("REC_NAME", "real")  # the export: OUT_DIR/<REC_NAME>.sqlite
# koordinator.sh/eviction-enabled opts a BE pod in to the v1.7/v1.8 usage modes (CPUEvict), so that a proposal
# of them has candidates
BE_EVICTION_ENABLED = os.environ.get("BE_EVICTION_ENABLED", "1") == "1"
# Set by main() from its arguments: the output dir, the agent's dir (sockets, state dir, log), the event log.
BASE = Path(".")
RUN = Path(".")
DURATION = 480.0
EVENTS: Any = sys.stdout
T0 = time.monotonic()


def ev(msg: str) -> None:
    line = f"{time.strftime('%H:%M:%S', time.gmtime())} t={time.monotonic() - T0:6.1f}s {msg}"
    print(line, flush=True)
    EVENTS.write(line + "\n")


SLO = f"""apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeSLO
metadata:
  name: realrec-node
spec:
  resourceUsedThresholdWithBE:
    enable: true
    cpuSuppressPolicy: cfsQuota
    cpuSuppressThresholdPercent: 65
    memoryEvictThresholdPercent: {MEM_EVICT_PCT}
  cpuBurstStrategy:
    policy: auto
    cpuBurstPercent: 1000
    cfsQuotaBurstPercent: 300
    cfsQuotaBurstPeriodSeconds: -1
    sharePoolThresholdPercent: 90
  resourceQOSStrategy:
    lsClass:
      memoryQOS:
        enable: true
        minLimitPercent: 50
        lowLimitPercent: 80
        throttlingPercent: 0
    beClass:
      memoryQOS:
        enable: true
        minLimitPercent: 0
        lowLimitPercent: 50
        throttlingPercent: 0
"""

# Worker programs (run with `python -c`); a shell puts each in its container's cgroups first, then execs it.
LS_PROG = r"""
import sys, time
start = float(sys.argv[1]); spike_at = float(sys.argv[2]); spike_len = float(sys.argv[3]); duty = float(sys.argv[4])
while True:
    t = time.time() - start
    d = 1.0 if spike_at <= t < spike_at + spike_len else duty
    end = time.time() + 0.1 * d
    while time.time() < end:
        pass
    if d < 1.0:
        time.sleep(0.1 * (1 - d))
"""
BE_BUSY_PROG = r"""
while True:
    pass
"""
GROWER_PROG = r"""
import sys, time
start = float(sys.argv[1]); begin = float(sys.argv[2]); rate_mib = float(sys.argv[3])
keep = []
while time.time() - start < begin:
    time.sleep(0.5)
while True:
    keep.append(b'\x01' * int(rate_mib * 1024 * 1024 / 4))
    time.sleep(0.25)
"""

made_dirs: list[Path] = []
workers: dict[str, subprocess.Popen[bytes]] = {}


def mkcg(rel: str) -> None:
    for h in HIER:
        p = CG / h / rel
        if not p.exists():
            p.mkdir()
            made_dirs.append(p)
        if h == "cpuset":
            parent = p.parent
            for f in ("cpuset.cpus", "cpuset.mems"):
                if not (p / f).read_text().strip():
                    (p / f).write_text((parent / f).read_text().strip())


def write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        ev(f"write {path} {value}: {e}")


def hookctl(*argv: str) -> str:
    r = subprocess.run([*HOOKCTL, "--socket", str(RUN / "debug.sock"), *argv], capture_output=True, text=True,
                       timeout=60)
    return r.stdout + r.stderr


def cleanup(agent: subprocess.Popen[bytes] | None) -> None:
    ev("cleanup: killing workers")
    for name, p in workers.items():
        if p.poll() is None:
            p.kill()
    for name, p in workers.items():
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            ev(f"worker {name} pid {p.pid} did not exit")
    # thaw anything frozen
    for h in ("freezer",):
        for d in made_dirs:
            if d.parts[4] == h and (d / "freezer.state").exists():
                try:
                    (d / "freezer.state").write_text("THAWED")
                except OSError:
                    pass
    if agent is not None and agent.poll() is None:
        ev("cleanup: stopping agent (SIGTERM)")
        agent.send_signal(signal.SIGTERM)
        try:
            rc = agent.wait(timeout=30)
            ev(f"agent exited {rc}")
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
            ev("agent killed after 30 s")
    # remove every dir under kubepods (ours), deepest first, in every hierarchy (incl. any the agent made)
    left = []
    for h in HIER:
        top = CG / h / "kubepods"
        if not top.exists():
            continue
        dirs = sorted((Path(dp) for dp, _d, _f in os.walk(top)), key=lambda p: -len(p.parts))
        for d in dirs:
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                left.append(str(d))
    ev(f"cleanup: cgroups left: {left}")


def main(argv: list[str]) -> int:
    global BASE, RUN, DURATION, EVENTS
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        DURATION = float(argv[1]) if len(argv) > 1 else 480.0
    except ValueError:
        print(f"DURATION_S must be a number of seconds, not {argv[1]!r}", file=sys.stderr)
        return 2
    if not 10 <= DURATION <= 86400:
        print(f"DURATION_S {DURATION:g} is outside 10..86400 seconds", file=sys.stderr)
        return 2
    if not MEM_EVICT_PCT.isdigit() or not 1 <= int(MEM_EVICT_PCT) <= 99:
        print(f"MEM_EVICT_PCT must be a percent from 1 to 99, not {MEM_EVICT_PCT!r}", file=sys.stderr)
        return 2
    BASE = Path(argv[0]).resolve()
    BASE.mkdir(parents=True, exist_ok=True)
    RUN = BASE / f"agent-{REC_NAME}"
    EVENTS = open(BASE / f"events-{REC_NAME}.log", "a", buffering=1)  # noqa: SIM115
    for h in HIER:
        if (CG / h / "kubepods").exists():
            print(f"{CG / h / 'kubepods'} exists already: refusing to touch a tree not ours", file=sys.stderr)
            return 2
    RUN.mkdir(parents=True, exist_ok=True)
    (BASE / "nodeslo.yaml").write_text(SLO)
    ev(f"duration {DURATION:.0f}s, memoryEvictThresholdPercent {MEM_EVICT_PCT}")
    agent = None
    try:
        for rel in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            mkcg(rel)
        log = open(RUN / "agent.log", "ab")  # noqa: SIM115
        args = [PY, "-m", "hookserver.cli.serve", "serve", "--standalone", "--no-nri",
                "--hook-socket", str(RUN / "hook.sock"), "--debug-socket", str(RUN / "debug.sock"),
                "--registration-dir", str(RUN / "reg"), "--metrics-addr", "127.0.0.1:0",
                "--state-dir", str(RUN / "state"), "--node-name", "realrec-node",
                "--slo-file", str(BASE / "nodeslo.yaml"), "--cgroup-driver", "cgroupfs",
                "--evict-standalone", "kill", "--reconcile-interval", "1",
                "--feature-gates", "BEMemoryEvict=true,CgroupReconcile=true"]
        ev("agent: " + " ".join(args))
        agent = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not (accepts(RUN / "hook.sock") and accepts(RUN / "debug.sock")):
            if agent.poll() is not None or time.monotonic() > deadline:
                ev("agent did not start; see agent.log")
                return 1
            time.sleep(0.1)
        ev("agent up")
        channel = grpc.insecure_channel(f"unix://{RUN / 'hook.sock'}")
        stub = pb_grpc.RuntimeHookServiceStub(channel)  # type: ignore[no-untyped-call]
        start = time.time()
        mid = DURATION / 2
        pods = []
        for i in range(3):
            pods.append(("LS", f"web-{i}", "burstable"))
        for i in range(3):
            pods.append(("BE", f"batch-{i}", "besteffort"))
        pods.append(("BE", "grow-0", "besteffort"))
        pods.append(("BE", "grow-1", "besteffort"))
        for qos, name, tier in pods:
            uid = f"{name}-{uuid.uuid4().hex[:8]}"
            cid = uuid.uuid4().hex + uuid.uuid4().hex  # 64 hex, like a containerd id
            pod_rel = f"kubepods/{tier}/pod{uid}"
            c_rel = f"{pod_rel}/{cid}"
            mkcg(pod_rel)
            mkcg(c_rel)
            labels = {"koordinator.sh/qosClass": qos}
            if qos == "BE" and BE_EVICTION_ENABLED:
                labels["koordinator.sh/eviction-enabled"] = "true"
            annotations: dict[str, str] = {}
            if qos == "BE":
                mem_lim = "4Gi" if name.startswith("grow") else "1Gi"
                cpu_req = "2000" if name.startswith("grow") else "500"  # growers: more shares inside the BE tier
                annotations[SPEC_KEY] = json.dumps({"containers": {"main": {
                    "requests": {"kubernetes.io/batch-cpu": cpu_req, "kubernetes.io/batch-memory": "256Mi"},
                    "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": mem_lim}}}})
                cres = pb.LinuxContainerResources(cpu_shares=2, oom_score_adj=1000)
            else:
                # 0.5 CPU limit, 0.25 CPU request, 512 MiB limit (as the kubelet would pass them)
                cres = pb.LinuxContainerResources(cpu_period=100000, cpu_quota=50000, cpu_shares=256,
                                                  memory_limit_in_bytes=512 << 20, oom_score_adj=-997)
            meta = pb.PodSandboxMetadata(name=name, namespace="realrec", uid=uid)
            r1 = stub.PreRunPodSandboxHook(pb.PodSandboxHookRequest(
                pod_meta=meta, labels=labels, annotations=annotations, cgroup_parent=f"/{pod_rel}"), timeout=10)
            r2 = stub.PreCreateContainerHook(pb.ContainerResourceHookRequest(
                pod_meta=meta, container_meta=pb.ContainerMetadata(name="main", id=cid),
                container_resources=cres, pod_labels=labels, pod_annotations=annotations,
                pod_cgroup_parent=f"/{pod_rel}"), timeout=10)
            res = r2.container_resources
            # act as the runtime: apply the container's resources as returned by the hook
            cpu_c = CG / "cpu" / c_rel
            quota = res.cpu_quota or cres.cpu_quota
            shares = res.cpu_shares or cres.cpu_shares
            mem = res.memory_limit_in_bytes or cres.memory_limit_in_bytes
            if res.cpu_period or cres.cpu_period:
                write(cpu_c / "cpu.cfs_period_us", str(res.cpu_period or cres.cpu_period))
            if quota:
                write(cpu_c / "cpu.cfs_quota_us", str(quota))
            if shares:
                write(cpu_c / "cpu.shares", str(shares))
            if mem:
                write(CG / "memory" / c_rel / "memory.limit_in_bytes", str(mem))
            if qos == "LS":  # the kubelet's pod-level limits for a limited burstable pod
                write(CG / "cpu" / pod_rel / "cpu.cfs_quota_us", str(quota))
                write(CG / "cpu" / pod_rel / "cpu.shares", str(shares))
                write(CG / "memory" / pod_rel / "memory.limit_in_bytes", str(mem))
            ev(f"pod {qos} {name} uid={uid} cid={cid[:12]} sandbox->{r1.resources.cpuset_cpus!r} "
               f"container quota={res.cpu_quota} shares={res.cpu_shares} mem={res.memory_limit_in_bytes}")
            if qos == "LS":
                argv = [PY, "-c", LS_PROG, str(start), str(mid - 30), "60", "0.15"]
            elif name.startswith("grow"):
                begin, rate = (20, 16) if name == "grow-0" else (mid - 40, 20)
                argv = [PY, "-c", GROWER_PROG, str(start), str(begin), str(rate)]
            else:
                argv = [PY, "-c", BE_BUSY_PROG]
            # no preexec_fn (a fork of this gRPC process aborts): a shell joins the cgroups, then execs the worker
            joins = "; ".join(f"echo $$ > {CG / h / c_rel / 'cgroup.procs'}" for h in HIER)
            workers[name] = subprocess.Popen(["sh", "-c", joins + '; exec "$@"', "sh", *argv])
            ev(f"worker {name} pid {workers[name].pid} in {c_rel}")
        ev("all pods announced; recording")
        end = time.monotonic() + DURATION
        seen_dead: set[str] = set()
        next_status = 0.0
        while time.monotonic() < end:
            for name, p in workers.items():
                if name not in seen_dead and p.poll() is not None:
                    seen_dead.add(name)
                    ev(f"worker {name} exited rc={p.returncode}")
            if time.monotonic() >= next_status:
                next_status = time.monotonic() + 60
                out = hookctl("status")
                line = [ln for ln in out.splitlines() if "recorder" in ln.lower()]
                ev(f"status recorder: {line[:2]}")
                with open(BASE / f"status-{REC_NAME}.log", "a") as f:
                    f.write(f"--- t={time.monotonic() - T0:.0f}\n{out}\n")
            if agent.poll() is not None:
                ev(f"agent exited early rc={agent.returncode}")
                break
            time.sleep(1)
        (BASE / f"final-status-{REC_NAME}.txt").write_text(hookctl("status"))
        (BASE / f"final-qos-pods-{REC_NAME}.txt").write_text(hookctl("qos") + "\n" + hookctl("pods"))
        export = subprocess.run([*HOOKCTL, "record", "export", str(BASE / f"{REC_NAME}.sqlite"), "--state-dir",
                                 str(RUN / "state")], capture_output=True, text=True, timeout=120)
        ev(f"export rc={export.returncode}: {export.stdout.strip()} {export.stderr.strip()}")
        return 0
    finally:
        cleanup(agent)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
