"""The hot path with the agent idle vs busy: NRI CreateContainer and the proxy's PreCreateContainerHook.

Two real daemons (`hookserver.daemon.Daemon`, everything the DaemonSet runs) in child processes, each
with 500 BE pods on real cgroups (a private `/sys/fs/cgroup/<cpu,cpuacct,memory>/hookserver-bench-*`
subtree on v1, or `hookserver-bench-*` in the unified tree where v1 is not writable or
HOOKSERVER_BENCH_CGROUP=v2; one container a pod, removed afterwards), learnt through NRI Synchronize from the test runtime
(tests/nri/fake_runtime.py) on a socketpair end:

* idle: NRI and the proxy only (collectors, QoS, predictor, capacity and the reconciler off);
* busy: as a 500-pod node makes it: every 1 s collector on the 500 pods and 500 containers, the QoS
  runner (dry run: it plans and audits, and writes nothing outside the subtree), predictor training and a
  checkpoint round of every model every 3 s (fsyncs), capacity, the reconciler, and a thread making
  garbage (cycles, as parsers and snapshots leave).

The idle and busy daemons run side by side and their calls are interleaved in ROUNDS rounds, the order
flipped every round, so machine noise hits both alike; while one daemon is called the other is stopped
(SIGSTOP, then RESUME_S to settle after SIGCONT), so the busy daemon's background work runs only in its own
turn and what differs is what shares the busy daemon's interpreter (HOOKSERVER_BENCH_ALONE=0: both run). With HOOKSERVER_BENCH_BEFORE the two checkouts'
pairs take turns, the other pair stopped (SIGSTOP) meanwhile and given RESUME_S to catch up.
Per call: one CreateContainer of a new container of a synced pod (serial, one in flight), then the same
count of PreCreateContainerHook on the proxy socket. Throughput is calls / wall time of the serial run.

Where the time goes, measured without perturbing the daemons: each thread's time on a CPU while its daemon is
called, read between rounds from /proc/<pid>/task/*/schedstat (no GIL needed, so a thread that holds the GIL
is seen as surely as one that waits; per round in cpu-rounds.txt), the loop's time runnable but waiting for a
CPU, every garbage collection and the thread that ran it (a callback; those the loop ran inside a call are
counted), and where in its round each slow call fell. Opt-in, because each
perturbs the busy daemon more than the idle one: a sampler (HOOKSERVER_BENCH_SAMPLE_S, e.g. 0.002) that
notes which areas' code the other threads are in (collectors, qos, predictor, capacity, reconciler), matched
against the slowest 1 % of busy calls, and the stretch meter (HOOKSERVER_BENCH_STRETCHES=1, stretches.txt).
HOOKSERVER_BENCH_KEEP=<dir> keeps every file (calls.txt, slow-calls.txt, cpu-rounds.txt, status.json, logs);
HOOKSERVER_BENCH_PROFILE_LOOP=1 adds a cProfile of each daemon's event loop thread (loop.prof).
The runtime side (this process) runs on the first CPU it may use and the daemons on the others
(HOOKSERVER_BENCH_PIN: "auto", the default; "<cpus>:<cpus>" such as 0:1; "off"), so that every daemon's calls
cross the same CPUs whatever the scheduler would have placed where. Unpinned on the 2-CPU VM, two identical
daemons measured p50 0.86 and throughput 1.11 of each other in one run of 16 rounds (1.00 / 0.99 in the next), and
the busy/idle p50 ratio ranged 1.02-1.17 over three runs of the same code, where background work costs the busy
daemon's calls ~3 us each; pinned, 0.97-0.99 / 1.03-1.04 and 0.95-1.03 over eight runs. On two CPUs pinning also
puts the busy daemon's background threads on its loop's CPU (harsher than a node, where they have CPUs of their
own), and a call costs ~50 % more (a wake-up across CPUs in a VM): compare ratios, not times, across settings.

Targets (issue 24): busy vs idle CreateContainer p99 <= 1.2x, p99.9 <= 2 ms, throughput >= 0.95x.
HOOKSERVER_BENCH_BEFORE=<checkout> runs that checkout's daemons in the same rounds (before vs after).
`python -m tests.bench nri_busy` runs only this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from hookserver.api import nri_pb2, runtime_hook_pb2, ttrpc_pb2
from hookserver.nri.handlers import PLUGIN_SERVICE
from tests.bench.common import BenchRow, percentile, stop_process
from tests.nri.fake_runtime import FakeRuntime
from tests.reference_example import SPEC_KEY, WORKED_SPEC_JSON

PODS = 500
# 16 rounds of 400 calls a daemon: a p99.9 of 3,200 calls (8 rounds) is its 4th slowest call, and on the 2-CPU VM
# the same tree's 8-round runs gave busy p99.9 0.8-2.6 ms and busy/idle p99 1.11-1.91.
ROUNDS = int(os.environ.get("HOOKSERVER_BENCH_ROUNDS", "16"))
CALLS_PER_ROUND = 400
EARLY_CALLS = 20  # a round's first calls, counted apart in the slow calls' attribution
WARMUP_S = 4.0
# The in-daemon instruments, off unless asked for: each perturbs the busy daemon more than the idle one (py-spy
# --gil showed a sampler tick holding the GIL for ~2-3 ms among the busy daemon's ~20 threads, and the stretch
# meter's stack walk at every pause point), so the measured rounds run without them.
SAMPLE_S = float(os.environ.get("HOOKSERVER_BENCH_SAMPLE_S", "0"))  # the where-did-time-go sampler; 0: off
STRETCHES = os.environ.get("HOOKSERVER_BENCH_STRETCHES", "0") != "0"  # the stretch meter (stretches.txt)
# After a checkout's pair is resumed: its timers fire what came due while it was stopped; let that pass.
RESUME_S = 1.0
# Each daemon called alone, the other of its pair stopped (SIGSTOP) meanwhile; HOOKSERVER_BENCH_ALONE=0 calls
# them side by side with both running, as before the hot gate (whose deferred background work then lands in
# the idle daemon's turn and flatters the ratio).
ALONE = os.environ.get("HOOKSERVER_BENCH_ALONE", "1") != "0"
ROOT = Path(__file__).resolve().parents[2]
CGROUP = "/sys/fs/cgroup"
CONTROLLERS = ("cpu", "cpuacct", "memory")
# Which hierarchy the 500 pods live on: v1 (cpu, cpuacct and memory under CGROUP), v2 (the unified tree:
# CGROUP itself on a v2-only host, CGROUP/unified on a hybrid one), or auto (v1 where it is writable, else v2).
CGROUP_MODE = os.environ.get("HOOKSERVER_BENCH_CGROUP", "auto")
V2_CONTROLLERS = ("cpu", "memory")
PROXY_METHOD = "/runtime.v1alpha1.RuntimeHookService/PreCreateContainerHook"


def _pin(spec: str, allowed: set[int]) -> tuple[set[int], set[int]] | None:
    """HOOKSERVER_BENCH_PIN: "auto" (the first of the `allowed` CPUs for the runtime side, the rest for the
    daemons; nothing on a single CPU), "0:1" or "0:1,2,3" (the runtime side's CPUs, then the daemons'), or "off"."""
    if spec == "off":
        return None
    if spec == "auto":
        ordered = sorted(allowed)
        return ({ordered[0]}, set(ordered[1:])) if len(ordered) >= 2 else None
    try:
        harness, daemons = ({int(cpu) for cpu in part.split(",")} for part in spec.split(":"))
    except ValueError:
        raise SystemExit(f"HOOKSERVER_BENCH_PIN: want auto, off or <cpus>:<cpus> such as 0:1, got {spec!r}") from None
    if not harness | daemons <= allowed:
        raise SystemExit(f"HOOKSERVER_BENCH_PIN: {spec!r} names CPUs outside those this process may use "
                         f"({','.join(map(str, sorted(allowed)))})")
    return harness, daemons


AREAS = ("collectors", "qos", "hookserver/predictor", "hookserver/capacity", "hookserver/reconciler")


# -- the node: cgroups and pods ----------------------------------------------------------------------
def _v1_usable() -> str:
    for c in CONTROLLERS:
        if not os.access(f"{CGROUP}/{c}", os.W_OK) or os.path.exists(f"{CGROUP}/{c}/cgroup.controllers"):
            return f"{CGROUP}/{c} is not a writable cgroup v1 hierarchy"
    return ""


def _v2_root() -> str:
    """The writable unified hierarchy with the cpu and memory controllers, or ""."""
    for root in (CGROUP, f"{CGROUP}/unified"):
        try:
            with open(f"{root}/cgroup.controllers") as f:
                available = f.read().split()
        except OSError:
            continue
        if os.access(root, os.W_OK) and all(c in available for c in V2_CONTROLLERS):
            return root
    return ""


def _layout() -> tuple[str, str]:
    """(version, root) of the hierarchy the bench's pods live on, or ("", why not)."""
    if CGROUP_MODE not in ("v1", "v2", "auto"):
        return "", f"HOOKSERVER_BENCH_CGROUP must be v1, v2 or auto, got {CGROUP_MODE!r}"
    if os.geteuid() != 0:
        return "", "not root"
    v1_problem = _v1_usable()
    if CGROUP_MODE in ("v1", "auto") and not v1_problem:
        return "v1", CGROUP
    if CGROUP_MODE in ("v2", "auto"):
        root = _v2_root()
        if root:
            return "v2", root
    if CGROUP_MODE == "v1":
        return "", v1_problem
    return "", f"no writable cgroup v1 ({v1_problem}) or v2 hierarchy with {', '.join(V2_CONTROLLERS)}"


def _pod_dirs(version: str, root: str, top: str, rel: str, cid: str) -> list[str]:
    """The directories one pod's cgroups need, parents first: each controller's on v1, the one tree on v2."""
    if version == "v2":
        return [f"{root}/{top}", f"{root}/{rel}", f"{root}/{rel}/{cid}"]
    return [path for c in CONTROLLERS for path in (f"{root}/{c}/{top}", f"{root}/{c}/{rel}", f"{root}/{c}/{rel}/{cid}")]


def _delegate(path: str) -> None:
    """v2: give `path`'s children the cpu and memory controllers (their cpu.max, memory.max and stat files). Only
    what is missing is written: the root of a host's tree usually delegates them already, and is left alone."""
    control = f"{path}/cgroup.subtree_control"
    try:
        with open(control) as f:
            enabled = f.read().split()
    except FileNotFoundError:
        enabled = []
    missing = [c for c in V2_CONTROLLERS if c not in enabled]
    if missing:
        with open(control, "w") as f:
            f.write(" ".join(f"+{c}" for c in missing))


def _make_tree(version: str, root: str, top: str) -> tuple[list[str], list[nri_pb2.PodSandbox], list[nri_pb2.Container]]:
    made: list[str] = []
    pods: list[nri_pb2.PodSandbox] = []
    ctrs: list[nri_pb2.Container] = []
    if version == "v2":
        _delegate(root)
    for i in range(PODS):
        uid = f"0000{i:04d}-beef-4c8a-9d2b-{i:012d}"
        cid = f"{i:08d}" + "c" * 56
        rel = f"{top}/pod{uid}"
        for path in _pod_dirs(version, root, top, rel, cid):
            if not os.path.isdir(path):
                os.mkdir(path)
                made.append(path)
                if version == "v2" and not path.endswith(cid):
                    _delegate(path)
        pod = nri_pb2.PodSandbox(id=f"sb-{i}", name=f"be-{i}", uid=uid, namespace="batch")
        pod.labels["koordinator.sh/qosClass"] = "BE"
        pod.annotations[SPEC_KEY] = WORKED_SPEC_JSON
        pod.linux.cgroup_parent = "/" + rel
        pods.append(pod)
        ctr = nri_pb2.Container(id=cid, pod_sandbox_id=pod.id, name="a", state=3)
        ctr.linux.resources.cpu.shares.value = 2
        ctrs.append(ctr)
    return made, pods, ctrs


def _remove_tree(made: list[str]) -> None:
    for path in reversed(made):
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def _merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    out = dict(low)
    for key, value in high.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _settings(base: Path, busy: bool, cgroup: dict[str, str], before: bool = False) -> dict[str, Any]:
    """The daemon's config; HOOKSERVER_BENCH_OVERRIDES (JSON) is merged over it, and for the "before" pair
    HOOKSERVER_BENCH_BEFORE_OVERRIDES (HOOKSERVER_BENCH_BEFORE=. and this compare settings of one checkout)."""
    name = "HOOKSERVER_BENCH_BEFORE_OVERRIDES" if before else "HOOKSERVER_BENCH_OVERRIDES"
    return _merge(_base_settings(base, busy, cgroup), json.loads(os.environ.get(name, "{}")))


def _base_settings(base: Path, busy: bool, cgroup: dict[str, str]) -> dict[str, Any]:
    off = {"enabled": False}
    collectors: dict[str, Any] = {"gpu": off}
    if not busy:
        collectors = {name: off for name in (
            "node_resource", "pod_resource", "pod_throttled", "host_application", "system_resource", "be_resource",
            "numa_resource", "psi", "node_info", "gpu",
        )}
    return {
        "standalone": True, "node_name": "bench", "state_dir": str(base / "state"),
        "hook": {"socket": str(base / "hook.sock"), "registration_dir": str(base / "reg")},
        "debug": {"socket": str(base / "debug.sock")}, "metrics": {"addr": "127.0.0.1:0"},
        "cgroup": cgroup,
        "nri": {"socket": "/nonexistent/nri.sock", "backoff_initial_s": 60, "backoff_max_s": 60},
        "collectors": collectors,
        "qos": {"enabled": busy, "dry_run": True},
        "predictor": {"enabled": busy, "training_interval_s": 3, "checkpoint_round_s": 3, "checkpoint_interval_s": 0,
                      "checkpoint_max_per_step": 2 * PODS, "koordlet_checkpoint_dir": ""},
        "capacity": {"enabled": busy},
        "reconciler": {"enabled": busy},
    }


# -- the daemon child --------------------------------------------------------------------------------
class _Sampler:
    """In a daemon: every garbage collection and whether the event loop's thread ran it (always: a callback, no
    thread), and with SAMPLE_S > 0 which areas the other threads are in every SAMPLE_S."""

    def __init__(self, out: Path) -> None:
        self._out = out.open("w")
        self._stop = threading.Event()
        self._gc_start = 0.0
        # kept in memory (a GC callback must not write a file): start, end, generation, run by the loop's thread
        self._gcs: list[tuple[float, float, int, bool]] = []
        self._loop_ident = threading.main_thread().ident
        gc.callbacks.append(self._on_gc)
        self._thread: threading.Thread | None = None
        if SAMPLE_S > 0:
            self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop sampling and write out what is buffered: a file left to a daemon thread at exit is never flushed
        (this lost every line of a run sampled at 0.5 s, and the last 8 KiB of one sampled at 2 ms)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        for start, end, generation, on_loop in self._gcs:
            self._out.write(json.dumps({"gc": [start, end, generation, on_loop]}) + "\n")
        self._out.close()

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.time()
        else:
            self._gcs.append((self._gc_start, time.time(), info.get("generation", -1),
                              threading.get_ident() == self._loop_ident))

    def _run(self) -> None:
        me = threading.get_ident()
        main = threading.main_thread().ident
        while not self._stop.wait(SAMPLE_S):
            areas: set[str] = set()
            wheres: list[str] = []
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                if ident == main:
                    on_loop = _loop_work(frame)
                    if on_loop:
                        areas.add(on_loop)
                    continue
                if not _waiting(frame):
                    areas.add("thread " + _thread_kind(names.get(ident, "?")))
                    where = _innermost_own(frame)
                    if where:
                        wheres.append(where)
                f: Any = frame
                while f is not None:
                    path = f.f_code.co_filename
                    hit = next((a for a in AREAS if f"/{a}/" in path), None)
                    if hit is not None:
                        if not _waiting(frame):
                            areas.add(hit.split("/")[-1])
                        break
                    f = f.f_back
            running = _running_tasks()
            if running > (os.cpu_count() or 1):
                areas.add("CPUs all taken")
            if areas:
                self._out.write(json.dumps({"t": time.time(), "a": sorted(areas), "w": wheres}) + "\n")


def _innermost_own(frame: Any) -> str:
    """The innermost frame of the project's own code on a thread's stack, as 'path:line function'."""
    f: Any = frame
    while f is not None:
        path = f.f_code.co_filename
        for root in ("/hookserver/", "/collectors/", "/qos/"):
            if root in path and "/tests/" not in path:
                return f"{root.strip('/')}/{path.split(root, 1)[1]}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back
    return ""


def _running_tasks() -> int:
    """Tasks the kernel has runnable on the whole machine now (/proc/loadavg's fourth field, less this one)."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        return 0


def _thread_kind(name: str) -> str:
    """A thread's name without its serial number (asyncio_3 -> asyncio)."""
    return re.sub(r"[-_]?\d+(_\d+)?$", "", name) or name


def _loop_work(frame: Any) -> str | None:
    """What the event loop thread is running when it is neither waiting nor answering a hook: the loop
    callback's hookserver code (its outermost hookserver frame), as 'loop <module>'; None otherwise."""
    outer: str | None = None
    f: Any = frame
    while f is not None:
        path = f.f_code.co_filename
        if "/hookserver/" in path:
            rel = path.split("/hookserver/", 1)[1]
            if rel.startswith(("nri/", "hooks/", "proxy/")):
                return None  # the hot path itself
            outer = rel.rsplit(".", 1)[0]
        f = f.f_back
    if outer is None or _waiting(frame):
        return None
    return "loop " + outer


class _StretchMeter:
    """In a daemon: the CPU time (`time.thread_time`) each background thread spends between two hot-gate
    pause points, by where it paused before and where it paused next: the work a call that arrives in it
    may wait for (up to one switch interval per GIL hand-off)."""

    def __init__(self) -> None:
        from hookserver.aio.hotgate import GATE

        self._last: dict[int, tuple[float, str]] = {}
        self.worst: dict[tuple[str, str], list[float]] = {}  # (from, to) -> [max ms, count, total ms]
        original = GATE.pause

        def pause() -> None:
            now = time.thread_time()
            here = _caller_outside(("hotgate.py", "bench_nri_busy.py"))
            ident = threading.get_ident()
            last = self._last.get(ident)
            if last is not None:
                ms = (now - last[0]) * 1000
                row = self.worst.setdefault((last[1], here), [0.0, 0, 0.0])
                row[0], row[1], row[2] = max(row[0], ms), row[1] + 1, row[2] + ms
            original()
            self._last[ident] = (time.thread_time(), here)

        GATE.pause = pause  # type: ignore[method-assign]

    def dump(self, path: Path) -> None:
        rows = sorted(self.worst.items(), key=lambda kv: -kv[1][0])
        path.write_text("".join(f"{v[0]:8.2f} ms max {v[1]:6d}x {v[2] / max(1, v[1]):6.3f} ms mean  {a}  ->  {b}\n"
                                for (a, b), v in rows[:40]))


def _caller_outside(skip: tuple[str, ...]) -> str:
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_filename.endswith(skip):
        f = f.f_back
    if f is None:
        return "?"
    path = f.f_code.co_filename
    for root in ("/hookserver/", "/collectors/", "/qos/"):
        if root in path:
            path = root.strip("/") + "/" + path.split(root, 1)[1]
            break
    return f"{path}:{f.f_lineno} {f.f_code.co_name}"


def _waiting(frame: Any) -> bool:
    """A thread parked in a wait (its innermost frame in threading/queue/selectors, or stepping aside at the
    hot gate) is not working."""
    name = frame.f_code.co_filename
    if name.endswith("hotgate.py") and frame.f_code.co_name == "pause":
        return True
    if name.endswith("grpc/_server.py") and frame.f_code.co_name == "_serve":
        return True  # gRPC's polling thread, in its completion queue's poll (C, GIL released)
    return name.endswith(("threading.py", "queue.py", "selectors.py", "thread.py")) and frame.f_code.co_name in (
        "wait", "get", "select", "_worker", "acquire",
    )


def _garbage(stop: threading.Event) -> None:
    """Cyclic garbage, as parsers, snapshots and closures leave: ~20k objects a second."""
    while not stop.wait(0.01):
        for _ in range(100):
            a: dict[str, Any] = {"x": list(range(10))}
            b: dict[str, Any] = {"a": a}
            a["b"] = b


async def _child(fd: int, config: str, busy: bool, samples: str) -> None:
    from hookserver.config import load_settings
    from hookserver.daemon import Daemon

    os.environ["NRI_PLUGIN_SOCKET"] = str(fd)
    settings = load_settings(overrides=json.loads(config), environ={})
    daemon = Daemon(settings)
    sampler = _Sampler(Path(samples))
    stretches = _StretchMeter() if STRETCHES else None
    stop = asyncio.Event()
    names_path = Path(samples).parent / "threads.json"

    def on_term() -> None:
        _dump_thread_names(names_path)  # before the daemon stops its threads: a thread that has ended has no name
        stop.set()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_term)
    profile = None
    if os.environ.get("HOOKSERVER_BENCH_PROFILE_LOOP"):  # cProfile of the event loop thread, to loop.prof
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    garbage_stop = threading.Event()
    if busy:
        threading.Thread(target=_garbage, args=(garbage_stop,), name="bench-garbage", daemon=True).start()
    try:
        await daemon.run(stop)
    finally:
        garbage_stop.set()
        if profile is not None:
            profile.disable()
            profile.dump_stats(str(Path(samples).parent / "loop.prof"))
        sampler.close()
        if stretches is not None:
            stretches.dump(Path(samples).parent / "stretches.txt")
        _dump_thread_names(names_path)


def _dump_thread_names(path: Path) -> None:
    """The daemon's Python threads by native id, for the bench's per-thread CPU account (`_ThreadCpu`), added to
    those an earlier call wrote (at SIGTERM, and again once the daemon has stopped)."""
    names: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        names = json.loads(path.read_text())
    names.update({str(t.native_id): _thread_kind(t.name) for t in threading.enumerate() if t.native_id is not None})
    names[str(threading.main_thread().native_id)] = "event loop"
    path.write_text(json.dumps(names))


# -- the runtime side ---------------------------------------------------------------------------------
class _Agent:
    def __init__(self, name: str, busy: bool, tree: Path | None, base: Path,
                 pods: list[nri_pb2.PodSandbox], ctrs: list[nri_pb2.Container], cgroup: dict[str, str],
                 daemon_cpus: set[int] | None = None) -> None:
        self.name, self.busy, self.base = name, busy, base
        base.mkdir(parents=True)
        # Here, not at the top: the child runs this file against an older tree's tests.bench.common (BEFORE).
        from tests.bench.common import child_pythonpath

        ours, theirs = socket.socketpair()
        self.samples = base / "samples.jsonl"
        self.proc = subprocess.Popen(
            # This file as a script, so a `tree` without it (the code before) still runs its daemon here.
            [sys.executable, str(Path(__file__).resolve()), "--child", str(theirs.fileno()),
             json.dumps(_settings(base, busy, cgroup, name.startswith("before"))), "busy" if busy else "idle",
             str(self.samples)],
            pass_fds=[theirs.fileno()], cwd=tree or ROOT,
            env={**os.environ, "PYTHONPATH": child_pythonpath(tree or ROOT)}, stdout=subprocess.DEVNULL,
            stderr=(base / "stderr.log").open("w"),
        )
        theirs.close()
        if daemon_cpus:  # before the child starts a thread: every thread it makes inherits the set
            os.sched_setaffinity(self.proc.pid, daemon_cpus)
        self.sock = ours
        self.cpu = _ThreadCpu(self.proc.pid)
        self.runtime = FakeRuntime(runtime_version="v2.3.0", nri_version="v0.12.0", pods=pods, containers=ctrs)
        self.pods = pods
        self.conn: Any = None
        self.grpc: Any = None

    async def start(self) -> None:
        import grpc

        reader, writer = await asyncio.open_unix_connection(sock=self.sock)
        await self.runtime.attach(reader, writer)
        self.conn = await self.runtime.ready_conn(0, timeout=60)
        path = self.base / "hook.sock"
        for _ in range(300):
            if path.exists():
                break
            await asyncio.sleep(0.05)
        channel = grpc.insecure_channel(f"unix://{path}")
        self.grpc = channel.unary_unary(PROXY_METHOD)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def save_status(self) -> None:
        """`hookctl status` and `nri` of the daemon, next to its log (what it was doing)."""
        from hookserver.debug.client import DebugClient

        try:
            with DebugClient(str(self.base / "debug.sock")) as client:
                (self.base / "status.json").write_text(client.status() + "\n" + client.nri() + "\n" + client.qos())
        except Exception as exc:  # noqa: BLE001 - a diagnostic only
            (self.base / "status.json").write_text(f"no status: {exc}")

    async def stop(self) -> None:
        self.resume()
        await asyncio.to_thread(self.save_status)
        await self.runtime.aclose()
        stop_process(self.proc, grace_s=15)


def _nri_requests(pods: list[nri_pb2.PodSandbox], tag: str) -> itertools.cycle[bytes]:
    out = []
    for i in range(2000):
        pod = pods[i % len(pods)]
        ctr = nri_pb2.Container(id=f"new-{tag}-{i:06d}", pod_sandbox_id=pod.id, name="a", state=1)
        ctr.linux.resources.cpu.shares.value = 2
        payload = nri_pb2.CreateContainerRequest(pod=pod, container=ctr).SerializeToString()
        out.append(ttrpc_pb2.Request(service=PLUGIN_SERVICE, method="CreateContainer", payload=payload,
                                     timeout_nano=2_000_000_000).SerializeToString())
    return itertools.cycle(out)


def _proxy_requests(pods: list[nri_pb2.PodSandbox]) -> itertools.cycle[bytes]:
    pb = runtime_hook_pb2
    out = []
    for i, pod in enumerate(pods):
        req = pb.ContainerResourceHookRequest(
            pod_meta=pb.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace),
            container_meta=pb.ContainerMetadata(name="a"),
            container_resources=pb.LinuxContainerResources(cpu_period=100000, cpu_shares=2),
            pod_cgroup_parent=pod.linux.cgroup_parent,
            pod_labels=dict(pod.labels), pod_annotations=dict(pod.annotations),
        )
        out.append(req.SerializeToString())
    return itertools.cycle(out)


async def _nri_calls(agent: _Agent, requests: itertools.cycle[bytes], n: int) -> tuple[list[tuple[float, float]], float]:
    """(epoch start, seconds) per call, and the wall time of the run."""
    conn = agent.conn
    loop = asyncio.get_running_loop()
    out: list[tuple[float, float]] = []
    began = time.perf_counter()
    for _ in range(n):
        sid = conn.next_sid
        conn.next_sid += 2
        fut: asyncio.Future[Any] = loop.create_future()
        conn.pending[sid] = fut
        t_epoch, t0 = time.time(), time.perf_counter()
        conn._send_message(1, sid, 1, next(requests))
        code, _message, _reply = await fut
        out.append((t_epoch, time.perf_counter() - t0))
        del conn.pending[sid]
        if code:
            raise RuntimeError(f"{agent.name}: CreateContainer failed with {code}")
    return out, time.perf_counter() - began


def _proxy_calls(agent: _Agent, requests: itertools.cycle[bytes], n: int) -> tuple[list[tuple[float, float]], float]:
    out: list[tuple[float, float]] = []
    call = agent.grpc
    began = time.perf_counter()
    for _ in range(n):
        t_epoch, t0 = time.time(), time.perf_counter()
        call(next(requests), timeout=2.0)
        out.append((t_epoch, time.perf_counter() - t0))
    return out, time.perf_counter() - began


class _ThreadCpu:
    """Each thread's time on a CPU (/proc/<pid>/task/<tid>/schedstat, ns) in a daemon while it is being called,
    read from outside the daemon: unlike a sampler inside it, this needs no GIL, so a thread that holds the GIL
    is counted as surely as one that waits for it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ns: dict[int, int] = {}  # tid -> ns on a CPU during the calls
        # the loop thread's ns runnable but not on a CPU, its time slices and its minor page faults
        self.loop_waits = [0, 0, 0]
        self.rounds: list[dict[int, tuple[int, ...]]] = []  # each round's deltas, for cpu-rounds.txt
        # The kernel's name of each thread seen (read while it runs: a thread that is gone by the summary, or a
        # thread Python does not know, such as gRPC's core threads, is still named).
        self.comms: dict[int, str] = {}
        self.run_cpu_s = 0.0  # the whole process (every thread) over the measured rounds, stopped turns included

    def process_cpu_s(self) -> float:
        """The process's user + system CPU so far (/proc/<pid>/stat), every thread and the time outside calls."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def read(self) -> dict[int, tuple[int, ...]]:
        """tid -> (ns on a CPU, ns waiting for one while runnable, time slices): schedstat's three fields; and
        for the loop thread a fourth, its minor page faults (stat's tenth field)."""
        out: dict[int, tuple[int, ...]] = {}
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                        fields = f.read().split()
                    row = (int(fields[0]), int(fields[1]), int(fields[2]))
                    if int(tid) == self.pid:
                        with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                            row += (int(f.read().rsplit(")", 1)[1].split()[7]),)
                    out[int(tid)] = row
        return out

    def add(self, before: dict[int, tuple[int, ...]]) -> None:
        this_round: dict[int, tuple[int, ...]] = {}
        self.rounds.append(this_round)
        for tid, now in self.read().items():
            was = before.get(tid, (0,) * len(now))
            delta = tuple(n - w for n, w in zip(now, was))
            this_round[tid] = delta
            if tid not in self.comms and delta[0] > 0:
                self.comms[tid] = _task_comm(self.pid, tid)
            self.ns[tid] = self.ns.get(tid, 0) + delta[0]
            if tid == self.pid and len(delta) == 4:  # the main thread: the event loop
                for i in range(3):
                    self.loop_waits[i] += delta[i + 1]

    @staticmethod
    def names(names_path: Path) -> dict[str, str]:
        """The Python names the daemon left (`_dump_thread_names`), or none if it left none."""
        try:
            names: dict[str, str] = json.loads(names_path.read_text())
        except (OSError, ValueError):
            return {}
        return names

    def name(self, tid: int, names: dict[str, str]) -> str:
        """A thread's Python name, else the kernel's (a thread Python does not know, or one gone by the dump)."""
        known = names.get(str(tid))
        if known is not None:
            return known
        return f"{self.comms.get(tid) or _task_comm(self.pid, tid)} (tid {tid}, not a live Python thread)"

    def write_rounds(self, path: Path, names: dict[str, str]) -> None:
        """cpu-rounds.txt: each round's loop CPU, wait and page faults, and its five busiest other threads."""
        with path.open("w") as out:
            for index, deltas in enumerate(self.rounds):
                loop_d = deltas.get(self.pid, (0, 0, 0, 0))
                others = sorted(((d[0], self.name(tid, names)) for tid, d in deltas.items()
                                 if tid != self.pid and d[0] > 0), reverse=True)[:5]
                out.write(f"round {index}: loop {loop_d[0] / 1e6:.2f} ms on a CPU, {loop_d[1] / 1e6:.2f} ms waiting, "
                          f"{loop_d[3] if len(loop_d) > 3 else 0} page faults; "
                          + ", ".join(f"{name} {ns / 1e6:.2f}" for ns, name in others) + "\n")

    def summary(self, calls: int, names: dict[str, str]) -> str:
        """'loop X µs a call, other threads Y µs (by kind)'."""
        by_kind: dict[str, int] = {}
        for tid, ns in self.ns.items():
            kind = self.name(tid, names)
            by_kind[kind] = by_kind.get(kind, 0) + ns
        loop = by_kind.pop("event loop", 0)
        other = sum(by_kind.values())
        top = sorted(by_kind.items(), key=lambda kv: -kv[1])[:6]
        per = max(1, calls) * 1000  # ns -> µs a call
        return (f"loop {loop / per:.1f} µs a call (and {self.loop_waits[0] / per:.1f} µs runnable waiting for a CPU, "
                f"{self.loop_waits[1] / max(1, calls):.2f} time slices and {self.loop_waits[2] / max(1, calls):.2f} "
                f"minor page faults a call), other threads {other / per:.1f} µs a call ("
                + ", ".join(f"{k} {v / per:.1f}" for k, v in top if v > 0) + ")"
                + f"; the whole daemon {self.run_cpu_s:.2f} s of CPU over the rounds")


def _task_comm(pid: int, tid: int) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return f"tid {tid}"


async def _measure(pairs: list[list[_Agent]]) -> dict[str, dict[str, Any]]:
    """Rounds of calls; in each, every pair (idle, busy of one checkout) in turn, the other pairs stopped."""
    agents = [a for pair in pairs for a in pair]
    results: dict[str, dict[str, Any]] = {
        a.name: {"nri": [], "nri_wall": 0.0, "proxy": [], "proxy_wall": 0.0} for a in agents
    }
    nri_req = {a.name: _nri_requests(a.pods, a.name) for a in agents}
    proxy_req = {a.name: _proxy_requests(a.pods) for a in agents}
    for a in agents:  # warm both paths
        await _nri_calls(a, nri_req[a.name], 200)
        await asyncio.to_thread(_proxy_calls, a, proxy_req[a.name], 200)
    await asyncio.sleep(WARMUP_S)  # the busy daemons' loops are all running by now
    cpu_at_start = {a.name: a.cpu.process_cpu_s() for a in agents}
    for r in range(ROUNDS):
        for pair in pairs if r % 2 == 0 else list(reversed(pairs)):
            for other in agents:
                if other not in pair:
                    other.pause()
            for a in pair:
                a.resume()
            await asyncio.sleep(RESUME_S if len(pairs) > 1 else 0)
            for a in pair if r % 2 == 0 else list(reversed(pair)):
                if ALONE:
                    # Only the daemon being called runs: the busy daemon's background work (which steps aside
                    # while it is called) must not pile into the idle daemon's turn and make idle look slow.
                    for other in pair:
                        if other is not a:
                            other.pause()
                    a.resume()
                    await asyncio.sleep(RESUME_S)
                cpu_before = a.cpu.read()
                calls, wall = await _nri_calls(a, nri_req[a.name], CALLS_PER_ROUND)
                a.cpu.add(cpu_before)
                results[a.name]["nri"] += calls
                results[a.name]["nri_wall"] += wall
                pcalls, pwall = await asyncio.to_thread(_proxy_calls, a, proxy_req[a.name], CALLS_PER_ROUND)
                results[a.name]["proxy"] += pcalls
                results[a.name]["proxy_wall"] += pwall
    for a in agents:
        a.resume()
        a.cpu.run_cpu_s = a.cpu.process_cpu_s() - cpu_at_start[a.name]
    return results


def _write_calls(calls: list[tuple[float, float]], path: Path) -> None:
    """Every call of a daemon: epoch start, ms, round, index in its round (idle and busy alike, so a slow call
    at the same place in both is told apart from one only the busy daemon has)."""
    with path.open("w") as out:
        for index, (start, seconds) in enumerate(calls):
            out.write(f"{start:.4f} {seconds * 1000:.3f} {index // CALLS_PER_ROUND} {index % CALLS_PER_ROUND}\n")


def _attribution(calls: list[tuple[float, float]], samples_path: Path) -> str:
    """What was going on in the daemon during its slowest 1 % of calls vs during all of them."""
    gcs: list[tuple[float, float]] = []
    by_gen = [0, 0, 0]
    marks: list[tuple[float, list[str]]] = []
    wheres_at: dict[float, list[str]] = {}
    for line in samples_path.read_text(errors="replace").splitlines():  # the last line may be cut short
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "gc" in item:
            if item["gc"][1] - item["gc"][0] > 0.001:
                gcs.append((item["gc"][0], item["gc"][1]))
                by_gen[item["gc"][2]] += 1
        else:
            marks.append((item["t"], item["a"]))
            wheres_at[item["t"]] = item.get("w", [])
    marks.sort()
    times = [m[0] for m in marks]
    import bisect

    def during(start: float, seconds: float) -> set[str]:
        end = start + seconds
        found = {"gc" for g0, g1 in gcs if g0 < end and g1 > start}
        lo, hi = bisect.bisect_left(times, start - SAMPLE_S), bisect.bisect_right(times, end)
        for _, areas in marks[lo:hi]:
            found.update(areas)
        return found

    threshold = percentile([c[1] for c in calls], 99)
    slow = [c for c in calls if c[1] >= threshold]
    # Where in its round each slow call fell (calls are kept in order, CALLS_PER_ROUND a round): a wave's first
    # calls find the background mid-stretch, later ones find it paused at the gate.
    early = sum(1 for index, c in enumerate(calls) if c[1] >= threshold and index % CALLS_PER_ROUND < EARLY_CALLS)

    def shares(group: list[tuple[float, float]]) -> dict[str, float]:
        counts: dict[str, int] = {}
        for start, seconds in group:
            for area in during(start, seconds):
                counts[area] = counts.get(area, 0) + 1
        return {k: v / max(1, len(group)) for k, v in sorted(counts.items())}

    with (samples_path.parent / "slow-calls.txt").open("w") as out:  # each slow call, for HOOKSERVER_BENCH_KEEP
        for start, seconds in sorted(slow, key=lambda c: -c[1]):
            out.write(f"{start:.4f} {seconds * 1000:.3f} ms: {', '.join(sorted(during(start, seconds))) or '-'}\n")
            lo, hi = bisect.bisect_left(times, start - SAMPLE_S), bisect.bisect_right(times, start + seconds)
            for t in times[lo:hi]:
                for where in wheres_at.get(t, []):
                    out.write(f"    {t - start:+.4f} {where}\n")
    s_slow, s_all = shares(slow), shares(calls)
    parts = [f"{k} {s_slow.get(k, 0) * 100:.0f}% vs {s_all.get(k, 0) * 100:.0f}%"
             for k in sorted(set(s_slow) | set(s_all))]
    gc_ms = sum(g1 - g0 for g0, g1 in gcs) * 1000
    return (f"slowest 1% (>= {threshold * 1000:.2f} ms, {len(slow)} calls; {early} of them among the first "
            f"{EARLY_CALLS} of a round) overlapped vs all calls: "
            + (", ".join(parts) or ("nothing" if SAMPLE_S > 0 else "(sampler off)")) + f"; GC pauses > 1 ms: {len(gcs)} ({gc_ms:.0f} ms; by generation {by_gen})")


def _gc_on_loop(calls: list[tuple[float, float]], samples_path: Path) -> str:
    """The collections the event loop's own thread ran inside a call (CPython collects in whichever thread's
    allocation crosses a threshold, so the loop pays for garbage others made): count, time and generations."""
    import bisect

    starts = [c[0] for c in calls]
    count, seconds, by_gen = 0, 0.0, [0, 0, 0]
    with contextlib.suppress(OSError):
        for line in samples_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, KeyError, IndexError):
                g0, g1, generation, on_loop = json.loads(line)["gc"]
                index = bisect.bisect_right(starts, g0) - 1
                if on_loop and index >= 0 and g0 < calls[index][0] + calls[index][1]:
                    count, seconds = count + 1, seconds + g1 - g0
                    by_gen[generation] += 1
    return f"collections on the loop inside a call: {count} ({seconds * 1000:.1f} ms; by generation {by_gen})"


def _row(path: str, label: str, idle: dict[str, Any], busy: dict[str, Any]) -> list[BenchRow]:
    def stats(run: dict[str, Any]) -> tuple[float, float, float, float]:
        lat = [c[1] for c in run[path]]
        return (percentile(lat, 50) * 1000, percentile(lat, 99) * 1000, percentile(lat, 99.9) * 1000,
                len(lat) / run[f"{path}_wall"])

    i, b = stats(idle), stats(busy)
    fmt = "p50 {:.3f} p99 {:.3f} p99.9 {:.3f} ms, {:.0f}/s"
    return [
        BenchRow(f"{path}-busy", f"{label} idle", fmt.format(*i), f"{len(idle[path])} calls"),
        BenchRow(f"{path}-busy", f"{label} busy", fmt.format(*b), f"{len(busy[path])} calls"),
        BenchRow(
            f"{path}-busy", f"{label} busy/idle",
            f"p50 {b[0] / i[0]:.2f} p99 {b[1] / i[1]:.2f} p99.9 {b[2] / i[2]:.2f} tput {b[3] / i[3]:.2f}",
            "targets (NRI): p99 <= 1.2, p99.9 <= 2 ms, throughput >= 0.95"
            f"; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
        ),
        BenchRow(f"{path}-busy", f"{label} a wave's start vs its rest", *_wave_parts(path, idle, busy)),
    ]


def _wave_parts(path: str, idle: dict[str, Any], busy: dict[str, Any]) -> tuple[str, str]:
    """A round's first call (after a second of the daemon left alone: a pod wave's first) apart from the calls
    after its first EARLY_CALLS: the two parts of the busy/idle gap, which have different causes."""
    def first(run: dict[str, Any]) -> float:
        return statistics.median(c[1] for c in run[path][::CALLS_PER_ROUND]) * 1000

    def rest_p99(run: dict[str, Any]) -> float:
        return percentile([c[1] for i, c in enumerate(run[path]) if i % CALLS_PER_ROUND >= EARLY_CALLS], 99) * 1000

    i_rest, b_rest = rest_p99(idle), rest_p99(busy)
    return (f"first call {first(idle):.3f} / {first(busy):.3f} ms; rest p99 {b_rest / i_rest:.2f}",
            f"first: median over rounds, idle / busy; rest: calls after a round's first {EARLY_CALLS}, busy/idle p99 "
            f"({i_rest:.3f} / {b_rest:.3f} ms)")


def run() -> list[BenchRow]:
    saved = os.sched_getaffinity(0)
    pin = _pin(os.environ.get("HOOKSERVER_BENCH_PIN", "auto"), saved)  # read here: importing the module never fails
    if pin is None:
        return _run(None)
    os.sched_setaffinity(0, pin[0])
    try:
        return _run(pin[1])
    finally:
        _restore_affinity(saved)


def _restore_affinity(cpus: set[int]) -> None:
    """Every thread of this process back on `cpus`: threads started while the runtime side was pinned (gRPC's
    own, for one) inherited its CPU, and the benchmarks run after this one in the same process must not."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that has ended since
            os.sched_setaffinity(int(tid), cpus)


def _run(daemon_cpus: set[int] | None) -> list[BenchRow]:
    version, root = _layout()
    if not version:
        return [BenchRow("nri-busy", "idle vs busy", "skipped", root)]
    cgroup = {"root": root, "driver": "cgroupfs", "version": version}
    before = os.environ.get("HOOKSERVER_BENCH_BEFORE")
    trees: dict[str, Path | None] = {"": None}
    if before:
        trees = {"before ": Path(before), "": None}
    top = f"hookserver-bench-{uuid.uuid4().hex[:10]}"
    made, pods, ctrs = _make_tree(version, root, top)
    rows: list[BenchRow] = []
    try:
        keep = os.environ.get("HOOKSERVER_BENCH_KEEP")  # a directory to leave the daemons' logs and status in
        if keep:
            os.makedirs(keep, exist_ok=True)
        with contextlib.nullcontext(tempfile.mkdtemp(prefix="hs-busy-", dir=keep)) if keep else \
                tempfile.TemporaryDirectory(prefix="hs-busy-", dir="/tmp") as tmp:
            pairs = []
            for label, tree in trees.items():
                tag = label.strip() or "after"
                pairs.append([_Agent(f"{tag}-idle", False, tree, Path(tmp) / f"{tag}-idle", pods, ctrs, cgroup,
                                     daemon_cpus),
                              _Agent(f"{tag}-busy", True, tree, Path(tmp) / f"{tag}-busy", pods, ctrs, cgroup,
                                     daemon_cpus)])
            agents = [a for pair in pairs for a in pair]

            async def main() -> dict[str, dict[str, Any]]:
                try:
                    for a in agents:
                        await a.start()
                    return await _measure(pairs)
                finally:
                    for a in agents:
                        await a.stop()

            results = asyncio.run(main())
            for label in trees:
                tag = label.strip() or "after"
                idle, busy = results[f"{tag}-idle"], results[f"{tag}-busy"]
                rows += _row("nri", f"{label}CreateContainer", idle, busy)
                rows += _row("proxy", f"{label}PreCreateContainerHook", idle, busy)
                busy_agent = next(a for a in agents if a.name == f"{tag}-busy")
                rows.append(BenchRow("nri-busy", f"{label}where the slow busy calls' time went",
                                     "", _attribution(busy["nri"], busy_agent.samples)))
                for agent in (a for a in agents if a.name in (f"{tag}-idle", f"{tag}-busy")):
                    _write_calls(results[agent.name]["nri"], agent.base / "calls.txt")
                    names = _ThreadCpu.names(agent.base / "threads.json")
                    agent.cpu.write_rounds(agent.base / "cpu-rounds.txt", names)
                    rows.append(BenchRow("nri-busy", f"{label}CPU during the NRI calls, {agent.name.split('-')[-1]}",
                                         "", agent.cpu.summary(len(results[agent.name]["nri"]), names)
                                         + "; " + _gc_on_loop(results[agent.name]["nri"], agent.samples)))
    finally:
        _remove_tree(made)
    return rows


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        asyncio.run(_child(int(sys.argv[2]), sys.argv[3], sys.argv[4] == "busy", sys.argv[5]))
