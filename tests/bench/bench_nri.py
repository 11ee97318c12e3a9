"""NRI CreateContainer round trip through mux + ttrpc + hook dispatch, against a bare ttrpc echo.

Both run over a real unix socketpair, the server side in its own process as in production: the fake
runtime (tests/nri/fake_runtime.py) is the client in this process, `NriPlugin` the server in a child
that inherits its socket end (the pre-launched path), with a real dispatcher, store and the
batchresource hook (no executor: CreateContainer writes no files). The echo baseline is a ttrpc server without mux or
protobuf decoding of the payload, so the difference is what NRI framing, translation, the worker
thread hop and the hook cost. Latencies are per call, for 1 and 8 requests in flight.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Awaitable, Callable

from hookserver.api import nri_pb2, ttrpc_pb2
from hookserver.config import NriSettings
from hookserver.dispatch import HookDispatcher
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.nri import NriPlugin
from hookserver.nri.ttrpc import Frame, FrameDecoder, MessageType, encode_frame, encode_response
from hookserver.store.state import StateStore
from tests.bench.common import BenchRow, summarize
from tests.nri.conftest import be_pod, container
from tests.nri.fake_runtime import FakeRuntime

CALLS_SERIAL = 2000
CALLS_PER_WORKER = 300
WORKERS = 8
WARMUP = 200
ROOT = Path(__file__).resolve().parents[2]


async def _measure(call: Callable[[], Awaitable[object]], concurrency: int, per_worker: int) -> list[float]:
    samples: list[float] = []

    async def worker() -> None:
        for _ in range(per_worker):
            t0 = time.perf_counter()
            await call()
            samples.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


def _spawn(role: str) -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """The server side in its own process (as containerd and the plugin are), on a socketpair end."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.bench_nri", role, str(theirs.fileno())],
        pass_fds=[theirs.fileno()], cwd=ROOT,
    )
    theirs.close()
    return ours, proc


def _reap(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _nri_rows() -> dict[int, list[float]]:
    runtime_end, proc = _spawn("--plugin")
    try:
        runtime = FakeRuntime()
        reader, writer = await asyncio.open_unix_connection(sock=runtime_end)
        await runtime.attach(reader, writer)
        conn = await runtime.ready_conn(0, timeout=30)
        pod = be_pod()
        request = nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, "a", "ctr-a"))

        async def call() -> object:
            reply = await conn.call("CreateContainer", request, nri_pb2.CreateContainerResponse)
            assert reply.adjust.linux.resources.cpu.shares.value == 512
            return reply

        await _measure(call, 1, WARMUP)
        out = {1: await _measure(call, 1, CALLS_SERIAL), WORKERS: await _measure(call, WORKERS, CALLS_PER_WORKER)}
        await runtime.aclose()
        return out
    finally:
        _reap(proc)


async def _echo_rows() -> dict[int, list[float]]:
    client_end, proc = _spawn("--echo")
    try:
        c_reader, c_writer = await asyncio.open_unix_connection(sock=client_end)
        pending: dict[int, asyncio.Future[bytes]] = {}

        async def receive() -> None:
            decoder = FrameDecoder()
            while data := await c_reader.read(65536):
                for frame in decoder.feed(data):
                    assert isinstance(frame, Frame)
                    pending.pop(frame.stream_id).set_result(ttrpc_pb2.Response.FromString(frame.data).payload)

        next_sid = [1]
        pod = be_pod()
        payload = nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, "a", "ctr-a")).SerializeToString()

        async def call() -> object:
            sid = next_sid[0]
            next_sid[0] += 2
            fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            pending[sid] = fut
            request = ttrpc_pb2.Request(service="echo", method="Echo", payload=payload)
            c_writer.write(encode_frame(sid, MessageType.REQUEST, request.SerializeToString()))
            return await fut

        receiver = asyncio.create_task(receive())
        await _measure(call, 1, WARMUP)
        out = {1: await _measure(call, 1, CALLS_SERIAL), WORKERS: await _measure(call, WORKERS, CALLS_PER_WORKER)}
        c_writer.close()
        receiver.cancel()
        await asyncio.gather(receiver, return_exceptions=True)
        return out
    finally:
        _reap(proc)


async def _serve_plugin(fd: int) -> None:
    """Child: NriPlugin on the inherited socket (the pre-launched path), real dispatcher and hook."""
    store = StateStore()
    registry = HookRegistry([BatchResourcePlugin()])
    dispatcher = HookDispatcher(registry=registry, store=store, executor=None)
    plugin = NriPlugin(
        NriSettings(socket="/nonexistent/nri.sock", backoff_initial_s=60, backoff_max_s=60), dispatcher=dispatcher, store=store,
        registry=registry, environ={"NRI_PLUGIN_SOCKET": str(fd)},
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await plugin.run(stop)


async def _serve_echo(fd: int) -> None:
    """Child: a bare ttrpc echo server, no mux, the payload returned as is."""
    reader, writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=fd))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def serve() -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                assert isinstance(frame, Frame)
                request = ttrpc_pb2.Request.FromString(frame.data)
                writer.write(encode_frame(frame.stream_id, MessageType.RESPONSE, encode_response(request.payload)))

    task = asyncio.create_task(serve())
    await asyncio.wait([task, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    task.cancel()


def run() -> list[BenchRow]:
    rows: list[BenchRow] = []
    for label, rows_of in (("ttrpc echo (baseline)", _echo_rows), ("nri CreateContainer", _nri_rows)):
        results = asyncio.run(rows_of())
        for concurrency, samples in results.items():
            s = summarize(samples)
            rows.append(
                BenchRow(
                    "nri", f"{label} x{concurrency}",
                    f"p50 {s['p50_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms",
                    f"{len(samples)} calls; target p99 <= 2 ms" if label.startswith("nri") else f"{len(samples)} calls",
                )
            )
    return rows


if __name__ == "__main__":
    role, fd_text = sys.argv[1], sys.argv[2]
    asyncio.run(_serve_plugin(int(fd_text)) if role == "--plugin" else _serve_echo(int(fd_text)))
