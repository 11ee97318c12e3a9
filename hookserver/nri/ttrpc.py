"""ttrpc framing and envelope codec: the 10-byte frame header, status codes, the 4 MiB limit.

A ttrpc frame is `[data length u32][stream id u32][type u8][flags u8][data]`, big-endian
(reference/nri-protocol.md §1). One logical connection is a byte stream, so frames are cut out of
it by `FrameDecoder`, which never buffers more than one frame: a frame longer than the limit is
skipped byte by byte and reported as `OversizedFrame`, so the caller can answer that stream with
RESOURCE_EXHAUSTED and keep the connection.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import NamedTuple

from google.protobuf.message import DecodeError

from hookserver.api import ttrpc_pb2
from hookserver.errors import WireError

__all__ = [
    "GATHER_FROM_BYTES",
    "HEADER",
    "MAX_MESSAGE_BYTES",
    "Code",
    "Frame",
    "FrameDecoder",
    "MessageType",
    "OversizedFrame",
    "RequestView",
    "StatusError",
    "decode_request",
    "decode_response",
    "encode_frame",
    "encode_request",
    "encode_response",
    "request_view",
]

HEADER = struct.Struct(">IIBB")
MAX_MESSAGE_BYTES = 4 << 20
# Frames longer than this are gathered piece by piece (`FrameDecoder`); shorter ones, every hot-path call
# among them, stay on the one-buffer path.
GATHER_FROM_BYTES = 64 << 10


class MessageType(enum.IntEnum):
    REQUEST = 0x01
    RESPONSE = 0x02
    DATA = 0x03


class Code(enum.IntEnum):
    """gRPC status codes, which ttrpc reuses."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class StatusError(WireError):
    """A call that ended with a non-OK status: raised by a handler to answer with it, or by a client
    when the peer answered with it."""

    def __init__(self, code: int, message: str) -> None:
        self.code = Code(code) if code in Code._value2member_map_ else code
        self.status_message = message
        name = self.code.name if isinstance(self.code, Code) else str(code)
        super().__init__(f"{name}: {message}")


@dataclass(frozen=True, slots=True)
class Frame:
    stream_id: int
    type: int
    flags: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OversizedFrame:
    """The header of a frame whose data was longer than the limit; its data was discarded."""

    stream_id: int
    type: int
    length: int


def encode_frame(stream_id: int, message_type: int, data: bytes, flags: int = 0) -> bytes:
    """One frame. Refuses data over the limit, as a Go sender does (the receiver would reject it)."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise StatusError(
            Code.RESOURCE_EXHAUSTED,
            f"message length {len(data)} exceeds maximum message size {MAX_MESSAGE_BYTES}",
        )
    return HEADER.pack(len(data), stream_id, message_type, flags) + data


class FrameDecoder:
    """Cuts ttrpc frames out of one logical connection's byte stream, chunk by chunk.

    Short frames are cut out of one buffer. A frame whose data runs past the chunk in hand (a split
    Synchronize sends 4 MiB ones, which the mux hands on in ~20 pieces) keeps its pieces in a list and
    joins them once, when the last arrives: growing the buffer by each piece and then slicing the frame
    out of it copied the 4 MiB three times, and every fresh 4 MiB buffer is paid in page faults too.
    """

    __slots__ = ("_buf", "_gather_from", "_header", "_max", "_need", "_parts", "_skip")

    def __init__(self, *, max_data: int = MAX_MESSAGE_BYTES, gather_from: int = GATHER_FROM_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_data
        self._gather_from = gather_from
        self._skip = 0
        self._parts: list[bytes] = []  # the data so far of the frame being gathered
        self._need = 0  # how much of that frame's data is still to come (0: none is being gathered)
        self._header: tuple[int, int, int] = (0, 0, 0)  # its (stream id, type, flags)

    @property
    def buffered(self) -> int:
        return len(self._buf) + sum(len(part) for part in self._parts)

    def feed(self, chunk: bytes) -> list[Frame | OversizedFrame]:
        out: list[Frame | OversizedFrame] = []
        if self._skip:
            dropped = min(self._skip, len(chunk))
            self._skip -= dropped
            chunk = chunk[dropped:]
        need = self._need
        if need:
            if len(chunk) < need:
                self._parts.append(chunk)
                self._need = need - len(chunk)
                return out
            parts = self._parts
            parts.append(chunk[:need])
            stream_id, message_type, flags = self._header
            out.append(Frame(stream_id, message_type, flags, b"".join(parts)))
            self._parts, self._need = [], 0
            chunk = chunk[need:]
        self._buf += chunk
        buf = self._buf
        pos = 0
        while len(buf) - pos >= HEADER.size:
            length, stream_id, message_type, flags = HEADER.unpack_from(buf, pos)
            if length > self._max:
                pos += HEADER.size
                available = min(length, len(buf) - pos)
                pos += available
                self._skip = length - available
                out.append(OversizedFrame(stream_id, message_type, length))
                continue
            end = pos + HEADER.size + length
            if end > len(buf):
                if length > self._gather_from:  # the rest comes in later chunks: gather it, do not grow `buf`
                    self._parts = [bytes(buf[pos + HEADER.size:])]
                    self._need = end - len(buf)
                    self._header = (stream_id, message_type, flags)
                    pos = len(buf)
                break
            out.append(Frame(stream_id, message_type, flags, bytes(buf[pos + HEADER.size:end])))
            pos = end
        if pos:
            del buf[:pos]
        return out


def encode_request(service: str, method: str, payload: bytes, *, timeout_nano: int = 0) -> bytes:
    data: bytes = ttrpc_pb2.Request(
        service=service, method=method, payload=payload, timeout_nano=timeout_nano
    ).SerializeToString()
    return data


def decode_request(data: bytes) -> ttrpc_pb2.Request:
    request = ttrpc_pb2.Request()
    try:
        request.ParseFromString(data)
    except DecodeError as exc:
        raise StatusError(Code.INVALID_ARGUMENT, f"ttrpc.Request does not decode: {exc}") from exc
    return request


class RequestView(NamedTuple):
    """A ttrpc.Request's fields, its payload a view of the frame (no copy)."""

    service: str
    method: str
    payload: memoryview
    timeout_nano: int


def request_view(data: bytes) -> RequestView | None:
    """The fields of a long request frame, read in place; None where the protobuf decoder must decide.

    `decode_request` copies the payload twice (into the decoder's arena, then out as bytes): for a 4 MiB
    Synchronize chunk that was 2-4 ms of copies and fresh-page faults before the handler ran. Here the
    envelope's few fields are walked by hand and the payload is a slice of the frame. Anything unusual
    (a truncated field, a wire type that is not 0/1/2/5, a known field with the wrong wire type, a string
    that is not UTF-8, a varint over 64 bits) returns None, and the caller decodes the frame as before,
    so every answer, errors included, stays the protobuf decoder's. Later occurrences of a field win, as
    they do there.
    """
    view = memoryview(data)
    service = method = ""
    payload = view[0:0]
    timeout = 0
    pos, end = 0, len(data)
    try:
        while pos < end:
            key, pos = _varint_at(data, pos)
            number, wire = key >> 3, key & 7
            if number == 0 or number >= 1 << 29:
                return None
            if wire == 0:
                value, pos = _varint_at(data, pos)
                if value >> 64:
                    return None
                if number == 4:
                    timeout = value - (1 << 64) if value >> 63 else value
                elif number in (1, 2, 3):
                    return None
            elif wire == 2:
                size, pos = _varint_at(data, pos)
                stop = pos + size
                if stop > end or number == 4:
                    return None
                if number == 1:
                    service = data[pos:stop].decode()
                elif number == 2:
                    method = data[pos:stop].decode()
                elif number == 3:
                    payload = view[pos:stop]
                elif number == 5 and not _key_value_reads(data, pos, stop):
                    return None  # metadata the decoder parses (and may refuse), not skips
                pos = stop
            elif wire in (1, 5) and number not in (1, 2, 3, 4):
                pos += 8 if wire == 1 else 4
            else:
                return None
    except (IndexError, UnicodeDecodeError):
        return None
    if pos != end:
        return None
    return RequestView(service, method, payload, timeout)


def _key_value_reads(data: bytes, pos: int, end: int) -> bool:
    """A metadata entry (`KeyValue`: key 1, value 2, both strings) the protobuf decoder accepts, judged by the
    same rules as the envelope: anything else (tag 0, a truncated field, a string that is not UTF-8, a key or
    value with another wire type) is False, and the frame goes to the decoder. Raises IndexError past `end`."""
    while pos < end:
        key, pos = _varint_at(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0 or number >= 1 << 29:
            return False
        if wire == 0 and number not in (1, 2):
            _, pos = _varint_at(data, pos)
        elif wire == 2:
            size, pos = _varint_at(data, pos)
            stop = pos + size
            if stop > end:
                return False
            if number in (1, 2):
                data[pos:stop].decode()  # UnicodeDecodeError: the caller's None
            pos = stop
        elif wire in (1, 5) and number not in (1, 2):
            pos += 8 if wire == 1 else 4
        else:
            return False
    return pos == end


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it; IndexError when it runs past the data or 64 bits."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint over 64 bits")


def encode_response(payload: bytes = b"", *, code: int = Code.OK, message: str = "") -> bytes:
    """A Response. OK carries no status at all (what Go servers send); an error carries no payload.

    The OK case is every hot-path reply, and its encoding is one field: tag 0x12 (field 2, bytes), the
    length as a varint, the payload. Written directly; a test checks it against the protobuf encoder.
    """
    if code == Code.OK:
        return _payload_field(payload) if payload else b""
    response = ttrpc_pb2.Response()
    response.status.code = int(code)
    response.status.message = message
    data: bytes = response.SerializeToString()
    return data


def _payload_field(payload: bytes) -> bytes:
    size = len(payload)
    if size < 0x80:
        return b"\x12" + bytes((size,)) + payload
    varint = bytearray()
    while size >= 0x80:
        varint.append((size & 0x7F) | 0x80)
        size >>= 7
    varint.append(size)
    return b"\x12" + bytes(varint) + payload


def decode_response(data: bytes) -> bytes:
    """The reply payload; raises StatusError for a non-OK status or an undecodable Response."""
    response = ttrpc_pb2.Response()
    try:
        response.ParseFromString(data)
    except DecodeError as exc:
        raise StatusError(Code.INTERNAL, f"ttrpc.Response does not decode: {exc}") from exc
    if response.HasField("status") and response.status.code != Code.OK:
        raise StatusError(response.status.code, response.status.message)
    payload: bytes = response.payload
    return payload
