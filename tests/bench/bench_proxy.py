"""PreCreateContainerHook round trip through the real proxy door, against a bare gRPC echo of the same shape,
for both gRPC server kinds side by side.

All servers run in one child process (as the hook server would, apart from koord-runtime-proxy), each on its
own unix socket:
* sync: the real `ProxyServer` (sync `grpc.server`, real `HookDispatcher`, batchresource, a store holding
  ~100 pods, a fake executor), and an echo server of the same type, options and pool size whose handler
  decodes the request and returns its echo (`translate.echo_container`), i.e. everything but the hook work;
* aio: the same `HookService` (the rpc bodies, server-agnostic) behind a `grpc.aio` server on its own event
  loop thread, hooks run on that loop, with its own dispatcher and store; and an aio echo of the same shape.
The client alternates batches among all four (order flipped every round), so machine noise hits them alike.

Measured: p50/p99/throughput at 1 and 8 concurrent clients, each kind's p50 ratio to its own echo, the aio/sync
hook ratio, and p99 at a paced 500 calls/s. Targets (issue 11): hook/echo p50 <= 1.15, paced p99 <= 2 ms.
The production server is the sync one (`ProxyServer`); the aio rows are what that choice is measured against.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc

from tests.bench.common import BenchRow, percentile

METHOD = "/runtime.v1alpha1.RuntimeHookService/PreCreateContainerHook"
SERVICE = "runtime.v1alpha1.RuntimeHookService"
PODS = 100  # pods already known to the store, as on a busy node
REQUESTS = 64  # distinct requests cycled through (distinct pods, 8 workload specs)
ROUNDS_SEQ, BATCH_SEQ = 10, 300
ROUNDS_CONC, BATCH_CONC, CLIENTS = 8, 480, 8
PACED_RATE, PACED_CHUNK, PACED_ROUNDS = 500.0, 250, 6

Call = Callable[[bytes], bytes]


def _spec(variant: int) -> str:
    cpu = 500 + 100 * variant
    return json.dumps({"containers": {"main": {
        "requests": {"kubernetes.io/batch-cpu": str(cpu), "kubernetes.io/batch-memory": "1Gi"},
        "limits": {"kubernetes.io/batch-cpu": str(2 * cpu), "kubernetes.io/batch-memory": "2Gi"},
    }}})


def _requests() -> list[bytes]:
    from hookserver.api import runtime_hook_pb2 as pb

    out = []
    for i in range(REQUESTS):
        req = pb.ContainerResourceHookRequest(
            pod_meta=pb.PodSandboxMetadata(name=f"batch-{i}", uid=f"0000-bench-{i:04d}", namespace="batch"),
            container_meta=pb.ContainerMetadata(name="main"),
            container_resources=pb.LinuxContainerResources(
                cpu_period=100000, cpu_shares=2, oom_score_adj=1000, cpuset_cpus="0-15", cpuset_mems="0"
            ),
            pod_cgroup_parent=f"/kubepods/besteffort/pod0000-bench-{i:04d}",
            container_annotations={"io.kubernetes.container.name": "main"},
            container_envs={"PATH": "/usr/bin", "HOME": "/root"},
            pod_labels={"koordinator.sh/qosClass": "BE", "app": f"batch-{i % 8}"},
            pod_annotations={"node.koordinator.sh/extended-resource-spec": _spec(i % 8)},
        )
        out.append(req.SerializeToString())
    return out


# -- the server process ----------------------------------------------------------------------------
def _serve_aio(base: str, dispatcher: Any, ready: threading.Event, stop: threading.Event) -> None:
    """grpc.aio hook + echo servers on a loop of their own (this thread): hooks run on that loop."""
    import asyncio

    from hookserver.api import runtime_hook_pb2 as pb
    from hookserver.proxy.server import DEFAULT_MAX_MESSAGE_BYTES
    from hookserver.proxy.service import RPCS, HookService, Refusal, decoder
    from hookserver.proxy.translate import echo_container

    service = HookService(dispatcher)
    spec = RPCS["PreCreateContainerHook"]
    options = [("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
               ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES)]

    async def hook(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[type-arg]
        out = service.container(spec, request)  # type: ignore[arg-type]
        if isinstance(out, Refusal):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, out.message)
        return out

    async def echo(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[type-arg]
        return echo_container(request)

    async def main() -> None:
        servers = []
        for name, body, deserialize in (("aio-hook", hook, decoder(spec.request_type)),
                                        ("aio-echo", echo, pb.ContainerResourceHookRequest.FromString)):
            handler = grpc.unary_unary_rpc_method_handler(
                body, request_deserializer=deserialize,
                response_serializer=pb.ContainerResourceHookResponse.SerializeToString,
            )
            server = grpc.aio.server(
                handlers=[grpc.method_handlers_generic_handler(SERVICE, {"PreCreateContainerHook": handler})],
                options=options,
            )
            server.add_insecure_port(f"unix://{base}/{name}.sock")
            await server.start()
            servers.append(server)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        for server in servers:
            await server.stop(0.5)

    asyncio.run(main())


def _serve(base: str, conn: Connection) -> None:
    from concurrent.futures import ThreadPoolExecutor as Pool

    from hookserver.api import runtime_hook_pb2 as pb
    from hookserver.hooks.settings import HookServerSettings
    from hookserver.dispatch import HookDispatcher
    from hookserver.executor.plan import ApplyReport, ResourcePlan
    from hookserver.hooks import HookRegistry
    from hookserver.hooks.plugins import BatchResourcePlugin
    from hookserver.proxy import ProxyServer
    from hookserver.proxy.server import DEFAULT_MAX_MESSAGE_BYTES
    from hookserver.proxy.translate import echo_container
    from hookserver.store import PodRecord, StateStore

    class NoWrites:
        def apply(self, plan: ResourcePlan) -> ApplyReport:
            return ApplyReport()

    settings = HookServerSettings(socket=f"{base}/hook.sock", registration_dir=f"{base}/hookserver.d")

    def world() -> tuple[StateStore, HookRegistry, HookDispatcher]:
        store = StateStore()
        for i in range(PODS):
            store.upsert_pod(PodRecord(uid=f"known-{i}", namespace="default", name=f"pod-{i}", cgroup_parent="/kubepods"))
        registry = HookRegistry([BatchResourcePlugin()])
        return store, registry, HookDispatcher(registry=registry, store=store, executor=NoWrites())

    store, registry, dispatcher = world()
    aio_store, _aio_registry, aio_dispatcher = world()
    aio_ready, aio_stop = threading.Event(), threading.Event()
    aio_thread = threading.Thread(target=_serve_aio, args=(base, aio_dispatcher, aio_ready, aio_stop), daemon=True)
    aio_thread.start()
    if not aio_ready.wait(30):
        raise RuntimeError("aio servers did not start")
    hook = ProxyServer(settings, dispatcher=dispatcher, registry=registry)

    def echo(request: Any, context: grpc.ServicerContext) -> Any:
        return echo_container(request)

    handler = grpc.unary_unary_rpc_method_handler(
        echo, request_deserializer=pb.ContainerResourceHookRequest.FromString,
        response_serializer=pb.ContainerResourceHookResponse.SerializeToString,
    )
    echo_server = grpc.server(
        Pool(max_workers=settings.max_workers),
        handlers=[grpc.method_handlers_generic_handler(SERVICE, {"PreCreateContainerHook": handler})],
        options=[("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES)],
    )
    echo_server.add_insecure_port(f"unix://{base}/echo.sock")
    echo_server.start()
    hook.start()
    conn.send({"hook": hook.address, "echo": f"unix://{base}/echo.sock",
               "aio-hook": f"unix://{base}/aio-hook.sock", "aio-echo": f"unix://{base}/aio-echo.sock"})
    conn.recv()  # until the client is done
    results: dict[str, int] = {}
    for event in list(store.audit.events()) + list(aio_store.audit.events()):
        results[event.result] = results.get(event.result, 0) + 1
    hook.stop(grace_s=0.5)
    echo_server.stop(0.5).wait(1.0)
    aio_stop.set()
    aio_thread.join(5)
    conn.send(results)


# -- the client ------------------------------------------------------------------------------------
def _sequential(call: Call, requests: list[bytes], n: int, offset: int) -> tuple[list[float], float]:
    lat = []
    perf = time.perf_counter
    t0 = perf()
    for i in range(n):
        t = perf()
        call(requests[(offset + i) % len(requests)])
        lat.append(perf() - t)
    return lat, perf() - t0


def _concurrent(pool: ThreadPoolExecutor, call: Call, requests: list[bytes], n: int) -> tuple[list[float], float]:
    per_client = n // CLIENTS
    start = threading.Barrier(CLIENTS + 1)

    def client(k: int) -> list[float]:
        start.wait()
        return _sequential(call, requests, per_client, k * per_client)[0]

    futures = [pool.submit(client, k) for k in range(CLIENTS)]
    start.wait()
    t0 = time.perf_counter()
    lat = [x for f in futures for x in f.result()]
    return lat, time.perf_counter() - t0


def _paced(call: Call, requests: list[bytes], n: int, offset: int) -> list[float]:
    interval = 1.0 / PACED_RATE
    perf = time.perf_counter
    lat = []
    due = perf()
    for i in range(n):
        due += interval
        wait = due - perf()
        if wait > 0:
            time.sleep(wait)
        t = perf()
        call(requests[(offset + i) % len(requests)])
        lat.append(perf() - t)
    return lat


def _measure(calls: dict[str, Call], requests: list[bytes]) -> dict[str, dict[str, Any]]:
    names = list(calls)
    out: dict[str, dict[str, Any]] = {n: {"seq": [], "seq_t": 0.0, "conc": [], "conc_t": 0.0, "paced": []} for n in names}
    for name in names:  # warm both: connections, caches, thread pools
        _sequential(calls[name], requests, 300, 0)
    for r in range(ROUNDS_SEQ):
        for name in names if r % 2 == 0 else reversed(names):
            lat, took = _sequential(calls[name], requests, BATCH_SEQ, r * BATCH_SEQ)
            out[name]["seq"] += lat
            out[name]["seq_t"] += took
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        for r in range(ROUNDS_CONC):
            for name in names if r % 2 == 0 else reversed(names):
                lat, took = _concurrent(pool, calls[name], requests, BATCH_CONC)
                out[name]["conc"] += lat
                out[name]["conc_t"] += took
    for r in range(PACED_ROUNDS):
        for name in names if r % 2 == 0 else reversed(names):
            out[name]["paced"] += _paced(calls[name], requests, PACED_CHUNK, r * PACED_CHUNK)
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def run() -> list[BenchRow]:
    from hookserver.api import runtime_hook_pb2 as pb

    requests = _requests()
    base = tempfile.mkdtemp(prefix="hs-bench-", dir="/tmp")
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(base, child), name="bench-proxy-server", daemon=True)
    proc.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("bench server did not start within 60 s")
        addresses = parent.recv()
        channels = {name: grpc.insecure_channel(address) for name, address in addresses.items()}
        calls: dict[str, Call] = {
            name: ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
            for name, ch in channels.items()
        }
        for name in ("hook", "aio-hook"):
            first = pb.ContainerResourceHookResponse.FromString(calls[name](requests[0]))
            if first.container_resources.cpu_shares != 512 or first.container_resources.cpuset_cpus != "0-15":
                raise RuntimeError(f"{name} server answered wrongly: {first}")
        started = time.perf_counter()
        data = _measure(calls, requests)
        elapsed = time.perf_counter() - started
        for ch in channels.values():
            ch.close()
        parent.send("done")
        results = parent.recv() if parent.poll(10) else {}
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.terminate()
        shutil.rmtree(base, ignore_errors=True)
    rows: list[BenchRow] = []
    for kind, hook_name, echo_name in (("sync", "hook", "echo"), ("aio", "aio-hook", "aio-echo")):
        hook, echo = data[hook_name], data[echo_name]
        for label, lat_key, time_key in (("1 client", "seq", "seq_t"), (f"{CLIENTS} clients", "conc", "conc_t")):
            for name, d in (("hook", hook), ("echo", echo)):
                rows.append(BenchRow(
                    "proxy", f"{kind} PreCreateContainer {name} ({label})",
                    f"p50 {_ms(percentile(d[lat_key], 50))}  p99 {_ms(percentile(d[lat_key], 99))}",
                    f"{len(d[lat_key]) / d[time_key]:.0f}/s; {len(d[lat_key])} calls",
                ))
            ratio = percentile(hook[lat_key], 50) / percentile(echo[lat_key], 50)
            rows.append(BenchRow("proxy", f"{kind} p50 ratio hook/echo ({label})", f"{ratio:.2f}", "target <= 1.15"))
        rows.append(BenchRow(
            "proxy", f"{kind} hook p99 at {PACED_RATE:.0f} calls/s", _ms(percentile(hook["paced"], 99)),
            f"target <= 2 ms; echo {_ms(percentile(echo['paced'], 99))}; p50 {_ms(percentile(hook['paced'], 50))}",
        ))
    for label, lat_key, time_key in (("1 client", "seq", "seq_t"), (f"{CLIENTS} clients", "conc", "conc_t")):
        aio, sync = data["aio-hook"], data["hook"]
        rows.append(BenchRow(
            "proxy", f"hook aio/sync ({label})",
            f"p50 {percentile(aio[lat_key], 50) / percentile(sync[lat_key], 50):.2f}",
            f"throughput {len(aio[lat_key]) / aio[time_key]:.0f}/s vs {len(sync[lat_key]) / sync[time_key]:.0f}/s",
        ))
    rows.append(BenchRow(
        "proxy", "hook call results", ", ".join(f"{k}={v}" for k, v in sorted(results.items())) or "unknown",
        f"measured in {elapsed:.1f} s; {PODS} pods in store; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
    ))
    return rows
