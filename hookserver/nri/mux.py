"""The NRI connection multiplexer: two logical byte streams over one unix socket.

Mux frame = `[conn id u32][payload length u32][payload]`, big-endian (reference §2). Conn 1 carries
the Plugin service (the runtime calls us), conn 2 the Runtime service (we call the runtime).

Receiving is an asyncio protocol: each chunk the socket delivers is cut into mux frames in the loop
callback that read it, and each payload goes to its connection's sink there (a frame longer than one
read goes on piece by piece as the reads bring it, never gathered here). Sending: a Go peer reads each logical connection through a 4096-byte buffer and fails with ENOMEM
(dropping us, and creating the container without our adjustments) if one queued frame is larger,
so every outgoing message is cut into pieces of at most 4096 bytes and written in one go, which
keeps one message's pieces together. Receiving: payloads are appended to the logical connection's
byte stream; a mux frame is never assumed to be one ttrpc message.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Callable

from hookserver.aio.hotgate import GATE
from hookserver.errors import WireError

__all__ = [
    "MAX_RECV_FRAME_BYTES",
    "MAX_SEND_CHUNK_BYTES",
    "MUX_HEADER",
    "PLUGIN_SERVICE_CONN",
    "RUNTIME_SERVICE_CONN",
    "Multiplexer",
    "encode_mux",
]

log = logging.getLogger(__name__)

MUX_HEADER = struct.Struct(">II")
PLUGIN_SERVICE_CONN = 1
RUNTIME_SERVICE_CONN = 2
MAX_SEND_CHUNK_BYTES = 4096
# Go writers send at most one ttrpc frame (10 + 4 MiB) per mux frame, and nri <= v0.6 refuses writes
# over 16 MiB. Anything longer is not a frame a runtime sends: the stream is broken.
MAX_RECV_FRAME_BYTES = 16 << 20

Sink = Callable[[bytes], None]


def encode_mux(conn_id: int, data: bytes, *, chunk: int = MAX_SEND_CHUNK_BYTES) -> bytes:
    """`data` as consecutive mux frames of at most `chunk` payload bytes each."""
    if len(data) <= chunk:
        return MUX_HEADER.pack(conn_id, len(data)) + data
    view = memoryview(data)
    parts: list[bytes] = []
    for start in range(0, len(data), chunk):
        piece = view[start:start + chunk]
        parts.append(MUX_HEADER.pack(conn_id, len(piece)))
        parts.append(bytes(piece))
    return b"".join(parts)


class Multiplexer(asyncio.Protocol):
    """Owns the socket: an asyncio protocol that cuts mux frames out of what arrives and hands each payload
    to its connection's sink right there, and whole-message writes.

    A protocol, not a StreamReader loop: the bytes of a request reach the ttrpc server (and an inline
    handler's reply reaches the socket) in the same loop callback that read them, with no reader task to
    wake, no future to resolve and no extra loop turn per chunk (measured: an echo plugin on this
    transport answers in about the time of a bare asyncio-streams echo; see tests/bench/bench_nri.py).

    `run()` waits until the connection ends: it returns on a clean EOF and raises WireError for a broken
    stream (a frame over the limit, EOF inside a frame, a read error) or a sink's WireError, which also
    closes the socket. Writes need no lock: `send` hands one message's frames to the transport in a single
    `write` call, which cannot interleave with another task's inside one event loop.
    """

    def __init__(self, *, max_frame: int = MAX_RECV_FRAME_BYTES) -> None:
        self._transport: asyncio.Transport | None = None
        self._max_frame = max_frame
        self._sinks: dict[int, Sink] = {}
        self._head = bytearray()  # a frame header cut by a read (under 8 bytes)
        self._current: Sink | None = None  # the sink of the frame being read (None: dropped)
        self._length = 0  # that frame's payload length
        self._left = 0  # and how much of it is still to come
        self._closed = False
        # The hot gate (`hookserver.aio.hotgate`): background threads step aside while a frame is handled here.
        self._door = GATE.door("nri", threadsafe=False)
        self._ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._paused = False
        self._drain: list[asyncio.Future[None]] = []
        self.frames_in = 0
        self.frames_out = 0

    @classmethod
    async def over(cls, sock: socket.socket, *, max_frame: int = MAX_RECV_FRAME_BYTES) -> Multiplexer:
        """Take a connected unix stream socket (a dialed one, or the runtime's inherited socketpair end)."""
        _transport, mux = await asyncio.get_running_loop().create_unix_connection(
            lambda: cls(max_frame=max_frame), sock=sock
        )
        return mux

    @classmethod
    async def dial(cls, path: str, *, max_frame: int = MAX_RECV_FRAME_BYTES) -> Multiplexer:
        _transport, mux = await asyncio.get_running_loop().create_unix_connection(
            lambda: cls(max_frame=max_frame), path
        )
        return mux

    def open(self, conn_id: int, sink: Sink) -> None:
        """Route conn `conn_id`'s payloads to `sink`. Opening sends nothing on the wire."""
        if conn_id == 0:
            raise ValueError("mux connection id 0 is reserved")
        self._sinks[conn_id] = sink

    @property
    def closed(self) -> bool:
        transport = self._transport
        return self._closed or transport is None or transport.is_closing()

    async def send(self, conn_id: int, data: bytes) -> None:
        self.send_nowait(conn_id, data)
        if self._paused:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain.append(waiter)
            await waiter

    def send_nowait(self, conn_id: int, data: bytes) -> None:
        """Queue one whole message now, without waiting for the transport to drain (replies sent inline,
        from a sink: they are small, and the transport buffers what the socket does not take at once)."""
        transport = self._transport
        if self._closed or transport is None or transport.is_closing():
            raise WireError("nri mux: connection is closed")
        frames = encode_mux(conn_id, data)
        self.frames_out += (len(data) + MAX_SEND_CHUNK_BYTES - 1) // MAX_SEND_CHUNK_BYTES or 1
        try:
            transport.write(frames)
        except (ConnectionError, OSError) as exc:
            raise WireError(f"nri mux: write failed: {exc}") from exc

    async def run(self) -> None:
        """Wait until the connection ends: returns on EOF, raises WireError for a broken stream."""
        await asyncio.shield(self._ended)

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream transport (unix socket)

    def data_received(self, data: bytes) -> None:
        door = self._door
        door.enter()
        try:
            self._receive(data)
        finally:
            door.leave()

    def _receive(self, data: bytes) -> None:
        if self._ended.done():
            return  # broken already: the rest is not read
        try:
            self._cut(data)
        except WireError as exc:
            self._end(exc)
        except Exception as exc:  # noqa: BLE001 - a sink bug ends this connection (the plugin redials), not the loop
            self._end(WireError(f"nri mux: receiver failed: {exc!r}"))

    def _cut(self, data: bytes) -> None:
        """Hand each payload byte of `data` to its connection's sink, as it arrives.

        A payload is a piece of its connection's byte stream, not a message, so it is not gathered first:
        the part of a frame that this read holds goes to the sink now, and the rest as later reads bring
        it (`_left` bytes to `_current`). Only a header cut by a read is kept (`_head`, under 8 bytes). A
        4 MiB Synchronize chunk arrives in ~20 reads; gathering it here, then copying it out, copied every
        byte three times more before the ttrpc decoder gathered it again (~8 ms a chunk, measured).
        """
        pos, size = 0, len(data)
        head = self._head
        while pos < size:
            left = self._left
            if left:
                end = pos + left if left < size - pos else size
                sink = self._current
                if sink is not None:
                    sink(data[pos:end])  # the whole read when it is all payload: bytes slicing returns it, no copy
                self._left = left - (end - pos)
                pos = end
                continue
            if head or size - pos < 8:  # a header cut by the read
                take = min(8 - len(head), size - pos)
                head += data[pos:pos + take]
                pos += take
                if len(head) < 8:
                    return
                conn_id, length = MUX_HEADER.unpack(head)
                head.clear()
            else:
                conn_id, length = MUX_HEADER.unpack_from(data, pos)
                pos += 8
            if length > self._max_frame:
                raise WireError(
                    f"nri mux: frame for conn {conn_id} declares {length} bytes, over the {self._max_frame} limit"
                )
            self.frames_in += 1
            sink = self._sinks.get(conn_id)
            if sink is None:
                log.debug("nri mux: dropping %d bytes for unopened conn %d", length, conn_id)
            end = pos + length
            if end <= size:  # the common case: the whole frame is in this read
                if sink is not None:
                    sink(data[pos:end])
                pos = end
            else:
                if sink is not None:
                    sink(data[pos:])
                self._current, self._length, self._left = sink, length, end - size
                return

    def eof_received(self) -> bool:
        head, left = self._head, self._left
        if head:
            self._end(WireError(f"nri mux: connection closed inside a frame header ({len(head)} of 8 bytes)"))
        elif left:
            self._end(WireError(
                f"nri mux: connection closed inside a frame ({self._length - left} of {self._length} bytes)"
            ))
        else:
            self._end(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if exc is None:
            self._end(None)
        else:
            self._end(WireError(f"nri mux: read failed: {exc}"))
        self._wake_writers(WireError(f"nri mux: connection closed: {exc}" if exc else "nri mux: connection closed"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writers(None)

    # -- internals ---------------------------------------------------------------------------------
    def _end(self, error: WireError | None) -> None:
        """The connection is over (cleanly when `error` is None); a broken stream also closes the socket."""
        if self._ended.done():
            return
        if error is None:
            self._ended.set_result(None)
            return
        self._ended.set_exception(error)
        self._ended.exception()  # mark it retrieved: `run` may not be awaited by then, and that is no bug
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def _wake_writers(self, error: WireError | None) -> None:
        waiters, self._drain = self._drain, []
        for waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)

    async def close(self) -> None:
        """Close the socket and wait until it is gone, so nothing of this connection outlives us."""
        self._closed = True
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()
        if not self._ended.done() and transport is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._ended), timeout=5.0)
            except (WireError, TimeoutError, ConnectionError, OSError) as exc:
                log.debug("nri mux: close: %s", exc)
