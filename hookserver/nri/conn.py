"""Unary ttrpc server and client on one logical mux connection.

The server (conn 1, the Plugin service) runs each request in its own task, as Go's ttrpc server runs
each in a goroutine, so requests may be answered out of order; it replies on the request's stream
id. A method may also have an *inline* handler: it runs right where the request frame is read and its
reply is queued at once, with no task and no loop turn in between (the hot path: CreateContainer and
UpdateContainer); `after_inline` then runs what the handler left for after the reply (its bookkeeping).
An inline handler returns None to pass the request on to the task path.

The client (conn 2, the Runtime service) allocates odd, increasing stream ids (1, 3, 5, ...) and
sends in the same synchronous step, so ids reach the wire in order, as ttrpc >= 1.2 servers demand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from hookserver.api import ttrpc_pb2
from hookserver.errors import WireError
from hookserver.nri.mux import Multiplexer
from hookserver.nri.ttrpc import (
    GATHER_FROM_BYTES,
    MAX_MESSAGE_BYTES,
    Code,
    Frame,
    FrameDecoder,
    MessageType,
    OversizedFrame,
    RequestView,
    StatusError,
    decode_request,
    decode_response,
    encode_frame,
    encode_request,
    encode_response,
    request_view,
)

__all__ = ["Handler", "InlineHandler", "TtrpcClient", "TtrpcServer"]

log = logging.getLogger(__name__)

# A method handler: request payload and the caller's deadline in seconds (None: none) -> reply payload.
# Raise StatusError to answer with an error status. The payload of a long request is a view of its frame.
Handler = Callable[[bytes | memoryview, float | None], Awaitable[bytes]]
# The same, run synchronously where the frame is read; None means "not here: use the task path".
InlineHandler = Callable[[bytes, float | None], bytes | None]


class TtrpcServer:
    def __init__(
        self, mux: Multiplexer, conn_id: int, service: str, methods: Mapping[str, Handler],
        inline: Mapping[str, InlineHandler] | None = None, after_inline: Callable[[], None] | None = None,
    ) -> None:
        self._mux = mux
        self._conn = conn_id
        self._service = service
        self._methods = dict(methods)
        self._inline = dict(inline or {})
        # Run right after an inline reply is written: the handlers' bookkeeping, off the caller's wait.
        self._after_inline = after_inline
        self._decoder = FrameDecoder()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_stream = 0
        self.requests = 0

    def feed(self, chunk: bytes) -> None:
        """Mux sink. Raises WireError for what breaks the connection (the mux reader then ends)."""
        for frame in self._decoder.feed(chunk):
            if isinstance(frame, OversizedFrame):
                self._reply_later(
                    frame.stream_id, Code.RESOURCE_EXHAUSTED,
                    f"message length {frame.length} exceeds maximum message size {MAX_MESSAGE_BYTES}",
                )
                continue
            if frame.type == MessageType.REQUEST:
                self._on_request(frame)
            elif frame.type == MessageType.DATA:
                # NRI is unary only; a stray data frame is not worth dropping the runtime for.
                log.debug("nri ttrpc: ignoring a data frame on stream %d", frame.stream_id)
            else:
                raise WireError(
                    f"nri ttrpc: unexpected message type {frame.type:#04x} on the server connection "
                    f"(stream {frame.stream_id})"
                )

    def _on_request(self, frame: Frame) -> None:
        sid = frame.stream_id
        if sid % 2 == 0 or sid <= self._last_stream:
            self._reply_later(
                sid, Code.INVALID_ARGUMENT,
                f"stream id {sid} must be odd and larger than the last one ({self._last_stream})",
            )
            return
        self._last_stream = sid
        self.requests += 1
        # A long request (a Synchronize chunk) is read in place, its payload a view of the frame.
        request: ttrpc_pb2.Request | RequestView | None = (
            request_view(frame.data) if len(frame.data) > GATHER_FROM_BYTES else None
        )
        if request is None:
            try:
                request = decode_request(frame.data)
            except StatusError as exc:
                self._reply_later(sid, exc.code, exc.status_message)
                return
        method = request.method
        handler = self._methods.get(method) if request.service == self._service else None
        if handler is None:
            self._reply_later(
                sid, Code.UNIMPLEMENTED, f"{request.service}/{method} is not implemented"
            )
            return
        deadline = request.timeout_nano / 1e9 if request.timeout_nano > 0 else None
        payload = request.payload
        fast = self._inline.get(method)
        if fast is not None and self._serve_inline(sid, method, fast, bytes(payload), deadline):
            return
        self._spawn(self._serve(sid, method, handler, payload, deadline), f"nri-{method}-{sid}")

    async def _serve(
        self, sid: int, method: str, handler: Handler, payload: bytes | memoryview, deadline: float | None
    ) -> None:
        try:
            reply = await handler(payload, deadline)
        except StatusError as exc:
            await self._send(sid, encode_response(code=exc.code, message=exc.status_message))
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug answers INTERNAL; the connection lives on
            log.error("nri %s (stream %d) failed: %s", method, sid, exc, exc_info=True)
            await self._send(sid, encode_response(code=Code.INTERNAL, message=f"{method}: {exc}"))
            return
        await self._send(sid, encode_response(reply))

    def _serve_inline(
        self, sid: int, method: str, handler: InlineHandler, payload: bytes, deadline: float | None
    ) -> bool:
        """Run an inline handler and queue its reply; False when it passed the request on."""
        try:
            reply = handler(payload, deadline)
        except StatusError as exc:
            self._send_now(sid, encode_response(code=exc.code, message=exc.status_message))
            return True
        except Exception as exc:  # noqa: BLE001 - a handler bug answers INTERNAL; the connection lives on
            log.error("nri %s (stream %d) failed: %s", method, sid, exc, exc_info=True)
            self._send_now(sid, encode_response(code=Code.INTERNAL, message=f"{method}: {exc}"))
            return True
        if reply is None:
            return False
        self._send_now(sid, encode_response(reply))
        after = self._after_inline
        if after is not None:
            try:
                after()
            except Exception as exc:  # noqa: BLE001 - the reply is out; bookkeeping must not end the connection
                log.error("nri %s (stream %d): bookkeeping after the reply failed: %s", method, sid, exc, exc_info=True)
        return True

    def _send_now(self, sid: int, data: bytes) -> None:
        try:
            frame = encode_frame(sid, MessageType.RESPONSE, data)
        except StatusError as exc:
            frame = encode_frame(sid, MessageType.RESPONSE, encode_response(code=exc.code, message=exc.status_message))
        try:
            self._mux.send_nowait(self._conn, frame)
        except WireError as exc:
            log.debug("nri ttrpc: reply on stream %d not sent: %s", sid, exc)

    def _reply_later(self, sid: int, code: int, message: str) -> None:
        self._spawn(self._send(sid, encode_response(code=code, message=message)), f"nri-status-{sid}")

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, sid: int, data: bytes) -> None:
        try:
            frame = encode_frame(sid, MessageType.RESPONSE, data)
        except StatusError as exc:
            frame = encode_frame(sid, MessageType.RESPONSE, encode_response(code=exc.code, message=exc.status_message))
        try:
            await self._mux.send(self._conn, frame)
        except WireError as exc:
            log.debug("nri ttrpc: reply on stream %d not sent: %s", sid, exc)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel requests still running; their replies have nowhere to go."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class TtrpcClient:
    def __init__(self, mux: Multiplexer, conn_id: int) -> None:
        self._mux = mux
        self._conn = conn_id
        self._decoder = FrameDecoder()
        self._next = 1
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._closed: BaseException | None = None

    async def call(self, service: str, method: str, payload: bytes, *, timeout_s: float | None = None) -> bytes:
        """One unary call; raises StatusError for an error status, WireError if the connection ends."""
        if self._closed is not None:
            raise WireError(f"nri ttrpc: client is closed: {self._closed}")
        sid = self._next
        self._next += 2
        timeout_nano = int(timeout_s * 1e9) if timeout_s else 0
        frame = encode_frame(
            sid, MessageType.REQUEST, encode_request(service, method, payload, timeout_nano=timeout_nano)
        )
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[sid] = future
        try:
            await self._mux.send(self._conn, frame)
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise StatusError(Code.DEADLINE_EXCEEDED, f"{service}/{method}: no reply within {timeout_s}s") from None
        finally:
            self._pending.pop(sid, None)

    def feed(self, chunk: bytes) -> None:
        for frame in self._decoder.feed(chunk):
            future = self._pending.get(frame.stream_id)
            if isinstance(frame, OversizedFrame):
                if future is not None and not future.done():
                    future.set_exception(
                        StatusError(Code.RESOURCE_EXHAUSTED, f"reply of {frame.length} bytes is over the limit")
                    )
                continue
            if frame.type != MessageType.RESPONSE:
                raise WireError(
                    f"nri ttrpc: unexpected message type {frame.type:#04x} on the client connection "
                    f"(stream {frame.stream_id})"
                )
            if future is None or future.done():
                log.debug("nri ttrpc: dropping a reply for unknown stream %d", frame.stream_id)
                continue
            try:
                future.set_result(decode_response(frame.data))
            except StatusError as exc:
                future.set_exception(exc)

    def fail_all(self, reason: BaseException) -> None:
        """The connection ended: every pending call fails with `reason`."""
        self._closed = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(WireError(f"nri ttrpc: connection closed: {reason}"))
