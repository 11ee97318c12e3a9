"""A test NRI runtime: the containerd side of the protocol, written from reference/nri-protocol.md.

It deliberately shares no framing code with `hookserver.nri` (only the generated messages), so a
mistake in our mux or ttrpc code cannot cancel itself out. Like containerd it:

* serves the Runtime service on mux conn 2 and calls the Plugin service on conn 1;
* sends every message Go-style: one mux frame if it fits 4096 bytes, else [first 4096][rest];
* records every mux frame the plugin sends (the plugin must never send one over 4096 bytes);
* calls Configure *before* answering RegisterPlugin, rejects (closes on) a mask outside its valid
  set, then Synchronizes as nri >= v0.7 does (one message, re-cut into `more=true` chunks when it is
  over ttrpc's 4 MiB, all chunks under one request-timeout deadline), or in fixed `sync_chunk`
  chunks, and closes if the plugin answers an intermediate chunk with updates or without `more`;
* counts live registrations, so a test can prove there were never two at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from google.protobuf.message import Message

from hookserver.api import nri_pb2, ttrpc_pb2

MUX = struct.Struct(">II")
TTRPC = struct.Struct(">IIBB")
GO_BUFFER = 4096
MAX_MESSAGE = 4 << 20  # ttrpc's message limit
PLUGIN_SVC = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SVC = "nri.pkg.api.v1alpha1.Runtime"
REQUEST, RESPONSE = 1, 2

M = TypeVar("M", bound=Message)


class CallError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"status {code}: {message}")
        self.code = code
        self.message = message


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.002)


def go_split(conn_id: int, data: bytes) -> bytes:
    """What a Go writer behind a 4096-byte bufio buffer puts on the wire for one message."""
    if len(data) <= GO_BUFFER:
        return MUX.pack(conn_id, len(data)) + data
    first, rest = data[:GO_BUFFER], data[GO_BUFFER:]
    return MUX.pack(conn_id, len(first)) + first + MUX.pack(conn_id, len(rest)) + rest


class RuntimeConn:
    """One plugin connection, as the runtime sees it."""

    def __init__(self, runtime: FakeRuntime, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.runtime = runtime
        self.reader = reader
        self.writer = writer
        self.bufs = {1: bytearray(), 2: bytearray()}
        self.next_sid = 1
        self.pending: dict[int, asyncio.Future[tuple[int, str, bytes]]] = {}
        self.plugin_frames: list[tuple[int, int]] = []  # (conn id, payload length) of every frame received
        self.registered: tuple[str, str] | None = None
        self.register_payload = b""  # the RegisterPluginRequest bytes as the plugin sent them
        self.register_timeout_nano = 0
        self.configure_reply: nri_pb2.ConfigureResponse | None = None
        self.sync_replies: list[nri_pb2.SynchronizeResponse] = []
        self.sync_chunk_sizes: list[int] = []  # the encoded size of every Synchronize request sent
        self.sync_started = 0.0
        self.sync_started_epoch = 0.0
        self.sync_seconds = 0.0  # from the first Synchronize sent to the last reply
        self.oversized_syncs = 0  # messages refused locally as over MAX_MESSAGE, then re-cut
        self.updates_received: list[nri_pb2.UpdateContainersRequest] = []
        self.counted = False
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.close_reason = ""
        self.task: asyncio.Task[None] | None = None

    # -- wire ------------------------------------------------------------------------------------
    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def _send_message(self, conn_id: int, sid: int, mtype: int, data: bytes) -> None:
        self.writer.write(go_split(conn_id, TTRPC.pack(len(data), sid, mtype, 0) + data))

    async def call_raw(
        self, method: str, payload: bytes, *, service: str = PLUGIN_SVC, timeout: float = 5.0, timeout_nano: int = 0
    ) -> tuple[int, str, bytes]:
        sid = self.next_sid
        self.next_sid += 2
        fut: asyncio.Future[tuple[int, str, bytes]] = asyncio.get_running_loop().create_future()
        self.pending[sid] = fut
        request = ttrpc_pb2.Request(service=service, method=method, payload=payload, timeout_nano=timeout_nano)
        self._send_message(1, sid, REQUEST, request.SerializeToString())
        try:
            async with asyncio.timeout(timeout):
                return await fut
        finally:
            self.pending.pop(sid, None)

    async def call(self, method: str, request: Message, reply_type: type[M], *, timeout: float = 5.0) -> M:
        nano = self.runtime.request_timeout_ms * 1_000_000
        code, message, payload = await self.call_raw(
            method, request.SerializeToString(), timeout=timeout, timeout_nano=nano
        )
        if code:
            raise CallError(code, message)
        return reply_type.FromString(payload)

    async def run(self) -> None:
        try:
            while True:
                header = await self.reader.readexactly(MUX.size)
                conn_id, length = MUX.unpack(header)
                payload = await self.reader.readexactly(length)
                self.plugin_frames.append((conn_id, length))
                if conn_id not in self.bufs:
                    continue
                buf = self.bufs[conn_id]
                buf += payload
                while len(buf) >= TTRPC.size:
                    size, sid, mtype, _flags = TTRPC.unpack_from(buf)
                    if len(buf) < TTRPC.size + size:
                        break
                    data = bytes(buf[TTRPC.size:TTRPC.size + size])
                    del buf[:TTRPC.size + size]
                    self._on_frame(conn_id, sid, mtype, data)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.close_reason = self.close_reason or "plugin closed"
        finally:
            await self._closed()

    def _on_frame(self, conn_id: int, sid: int, mtype: int, data: bytes) -> None:
        if conn_id == 1 and mtype == RESPONSE:
            response = ttrpc_pb2.Response.FromString(data)
            fut = self.pending.get(sid)
            if fut is not None and not fut.done():
                fut.set_result((response.status.code, response.status.message, response.payload))
        elif conn_id == 2 and mtype == REQUEST:
            request = ttrpc_pb2.Request.FromString(data)
            if request.service == RUNTIME_SVC and request.method == "RegisterPlugin":
                self.register_timeout_nano = request.timeout_nano
                self.register_payload = request.payload
                asyncio.ensure_future(self._register(sid, nri_pb2.RegisterPluginRequest.FromString(request.payload)))
            elif request.service == RUNTIME_SVC and request.method == "UpdateContainers":
                self.updates_received.append(nri_pb2.UpdateContainersRequest.FromString(request.payload))
                self._reply(sid, nri_pb2.UpdateContainersResponse().SerializeToString())
            else:
                self._reply(sid, b"", code=12, message="not implemented")

    def _reply(self, sid: int, payload: bytes, *, code: int = 0, message: str = "") -> None:
        response = ttrpc_pb2.Response(payload=payload)
        if code:
            response.status.code = code
            response.status.message = message
        self._send_message(2, sid, RESPONSE, response.SerializeToString())

    # -- the runtime's side of registration --------------------------------------------------------
    async def _register(self, sid: int, req: nri_pb2.RegisterPluginRequest) -> None:
        rt = self.runtime
        if not req.plugin_name or not re.fullmatch(r"[0-9]{2}", req.plugin_idx):
            self._reply(sid, b"", code=2, message="invalid plugin name or index")
            await self.close("invalid registration")
            return
        self.registered = (req.plugin_name, req.plugin_idx)
        try:
            reply = await self.call(
                "Configure",
                nri_pb2.ConfigureRequest(
                    runtime_name=rt.runtime_name, runtime_version=rt.runtime_version, NRI_version=rt.nri_version,
                    registration_timeout=5000, request_timeout=rt.request_timeout_ms,
                ),
                nri_pb2.ConfigureResponse,
            )
        except (CallError, TimeoutError, ConnectionError) as exc:
            await self.close(f"configure failed: {exc}")
            return
        self.configure_reply = reply
        if reply.events & ~rt.valid_mask:
            rt.rejected_masks.append(reply.events)
            await self.close(f"invalid plugin events {reply.events:#x}")
            return
        self.counted = True
        rt.live += 1
        rt.registrations += 1
        rt.max_live = max(rt.max_live, rt.live)
        self._reply(sid, b"")  # the RegisterPlugin reply, only now
        try:
            await self._synchronize()
        except (CallError, TimeoutError, ConnectionError) as exc:
            await self.close(f"synchronize failed: {exc}")
            return
        self.ready.set()

    async def _synchronize(self) -> None:
        rt = self.runtime
        pods, containers = list(rt.pods), list(rt.containers)
        self.sync_started = time.perf_counter()
        if rt.sync_chunk <= 0:
            await self._synchronize_go(pods, containers)
        else:
            items: list[Any] = [("p", p) for p in pods] + [("c", c) for c in containers]
            chunks = []
            for i in range(0, len(items), rt.sync_chunk):
                part = items[i:i + rt.sync_chunk]
                chunks.append(
                    nri_pb2.SynchronizeRequest(
                        pods=[x for k, x in part if k == "p"], containers=[x for k, x in part if k == "c"], more=True
                    )
                )
            chunks[-1].more = False
            for sent, chunk in enumerate(chunks):
                if rt.drop_sync_after and sent == rt.drop_sync_after and self is rt.conns[0]:
                    raise ConnectionError(f"the runtime went away after {sent} sync chunk(s)")
                reply = await self.call("Synchronize", chunk, nri_pb2.SynchronizeResponse)
                self._check_sync_reply(chunk, chunk.ByteSize(), reply)
        self.sync_seconds = time.perf_counter() - self.sync_started

    async def _synchronize_go(self, pods: list[nri_pb2.PodSandbox], containers: list[nri_pb2.Container]) -> None:
        """containerd's way (nri >= v0.7 `plugin.synchronize`): everything in one message; when that
        message is over ttrpc's 4 MiB the sender refuses it locally and the counts per message are
        scaled by min(0.9, limit / rejected length) until each chunk fits. One deadline, the request
        timeout, covers every chunk: each call carries what is left of it.

        The chunks are cut and encoded before the first is sent (and before `sync_seconds` starts): Go's
        encoder is many times faster than Python's, and what a test or benchmark times is the plugin."""
        chunks: list[tuple[nri_pb2.SynchronizeRequest, bytes]] = []
        pods_per, ctrs_per = len(pods), len(containers)
        while True:
            chunk = nri_pb2.SynchronizeRequest(
                pods=pods[:pods_per], containers=containers[:ctrs_per],
                more=len(pods) > pods_per or len(containers) > ctrs_per,
            )
            payload = chunk.SerializeToString()
            size = len(ttrpc_pb2.Request(service=PLUGIN_SVC, method="Synchronize", payload=payload).SerializeToString())
            if size > MAX_MESSAGE:
                if pods_per + ctrs_per <= 8:
                    raise CallError(8, "failed to synchronize plugin with split messages")
                factor = min(0.9, MAX_MESSAGE / size)
                pods_per, ctrs_per = int(pods_per * factor), int(ctrs_per * factor)
                self.oversized_syncs += 1
                continue
            chunks.append((chunk, payload))
            if not chunk.more:
                break
            pods, containers = pods[pods_per:], containers[ctrs_per:]
            pods_per, ctrs_per = min(pods_per, len(pods)), min(ctrs_per, len(containers))
        self.sync_started = time.perf_counter()
        self.sync_started_epoch = time.time()
        deadline = time.monotonic() + self.runtime.request_timeout_ms / 1000
        for chunk, payload in chunks:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("context deadline exceeded")
            code, message, data = await self.call_raw(
                "Synchronize", payload, timeout=left, timeout_nano=int(left * 1e9)
            )
            if code:
                raise CallError(code, message)
            self._check_sync_reply(chunk, len(payload), nri_pb2.SynchronizeResponse.FromString(data))

    def _check_sync_reply(
        self, chunk: nri_pb2.SynchronizeRequest, size: int, reply: nri_pb2.SynchronizeResponse
    ) -> None:
        """`size`: the chunk's encoded length, known to the caller. Not `chunk.ByteSize()`, which encodes the
        chunk again: ~4 ms a 4 MiB chunk of the runtime's own bookkeeping inside the time the bench reports
        as the plugin's (42 chunks in the 64 KiB row)."""
        self.sync_replies.append(reply)
        self.sync_chunk_sizes.append(size)
        if chunk.more and (not reply.more or len(reply.update)):
            raise CallError(9, "plugin does not handle split sync requests")

    async def close(self, reason: str = "runtime closed") -> None:
        self.close_reason = self.close_reason or reason
        if not self.writer.is_closing():
            self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

    async def _closed(self) -> None:
        if self.counted:
            self.counted = False
            self.runtime.live -= 1
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection closed"))
        if not self.writer.is_closing():
            self.writer.close()
        self.closed.set()

    @property
    def max_plugin_frame(self) -> int:
        return max((length for _, length in self.plugin_frames), default=0)


class FakeRuntime:
    def __init__(
        self,
        *,
        valid_mask: int = 0x7FF,
        request_timeout_ms: int = 2000,
        runtime_name: str = "containerd",
        runtime_version: str = "v1.7.13",
        nri_version: str = "",
        pods: Sequence[nri_pb2.PodSandbox] = (),
        containers: Sequence[nri_pb2.Container] = (),
        sync_chunk: int = 0,
        drop_sync_after: int = 0,
    ) -> None:
        self.valid_mask = valid_mask
        self.request_timeout_ms = request_timeout_ms
        self.runtime_name = runtime_name
        self.runtime_version = runtime_version
        self.nri_version = nri_version
        self.pods = list(pods)
        self.containers = list(containers)
        self.sync_chunk = sync_chunk
        # > 0: the first connection is closed after that many chunks of its (fixed-chunk) sync, as a runtime that
        # restarts mid-sync; later connections sync whole.
        self.drop_sync_after = drop_sync_after
        self.conns: list[RuntimeConn] = []
        self.live = 0
        self.max_live = 0
        self.registrations = 0
        self.rejected_masks: list[int] = []
        self._server: asyncio.AbstractServer | None = None

    async def serve(self, path: str) -> None:
        self._server = await asyncio.start_unix_server(self.attach, path=path)

    async def attach(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = RuntimeConn(self, reader, writer)
        self.conns.append(conn)
        conn.task = asyncio.ensure_future(conn.run())

    async def ready_conn(self, index: int = -1, timeout: float = 5.0) -> RuntimeConn:
        """The index-th connection once synchronized (-1: the newest that is ready)."""
        def ok() -> bool:
            if index >= 0:
                return len(self.conns) > index and self.conns[index].ready.is_set()
            return any(c.ready.is_set() and not c.closed.is_set() for c in self.conns)

        await wait_for(ok, timeout, f"plugin connection {index} to be synchronized")
        if index >= 0:
            return self.conns[index]
        return [c for c in self.conns if c.ready.is_set() and not c.closed.is_set()][-1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in self.conns:
            await conn.close("runtime stopping")
            if conn.task is not None:
                await asyncio.gather(conn.task, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
