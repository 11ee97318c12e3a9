"""The D-Bus wire format, the part systemd's Manager API needs: little-endian messages, a signature-driven
marshaller and unmarshaller for the basic types and containers, and the message header.

Facts from the freedesktop D-Bus specification ("Message Protocol"): a message is a 12-byte fixed header
(endianness 'l'/'B', type, flags, major version 1, body length u, serial u), an array of header fields
`a(yv)` padded to 8, then the body. Every value is aligned to its own size (strings and arrays to 4, 64-bit
values, structs and dict entries to 8, signatures and variants to 1); an array's length counts its elements'
bytes, not the padding before the first one. Written here rather than taken from a library because the project
adds no dependency for one method call, and because the tests then speak real wire bytes both ways.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HEADER_FIXED_BYTES",
    "MAX_MESSAGE_BYTES",
    "Message",
    "MessageType",
    "Variant",
    "WireFormatError",
    "decode",
    "encode",
    "message_length",
]

HEADER_FIXED_BYTES = 16  # the fixed 12 bytes plus the header fields array's length
MAX_MESSAGE_BYTES = 1 << 20  # the spec allows 128 MiB; systemd's replies to us are a few hundred bytes


class WireFormatError(ValueError):
    """Bytes that are not a D-Bus message (or a value that does not fit its signature)."""


class MessageType(enum.IntEnum):
    METHOD_CALL = 1
    METHOD_RETURN = 2
    ERROR = 3
    SIGNAL = 4


class _Field(enum.IntEnum):
    PATH = 1
    INTERFACE = 2
    MEMBER = 3
    ERROR_NAME = 4
    REPLY_SERIAL = 5
    DESTINATION = 6
    SENDER = 7
    SIGNATURE = 8


_FIELD_SIGNATURE = {_Field.PATH: "o", _Field.INTERFACE: "s", _Field.MEMBER: "s", _Field.ERROR_NAME: "s",
                    _Field.REPLY_SERIAL: "u", _Field.DESTINATION: "s", _Field.SENDER: "s", _Field.SIGNATURE: "g"}
_FIXED = {"y": ("B", 1), "b": ("I", 4), "n": ("h", 2), "q": ("H", 2), "i": ("i", 4), "u": ("I", 4),
          "x": ("q", 8), "t": ("Q", 8), "d": ("d", 8), "h": ("I", 4)}
_ALIGN = {**{k: size for k, (_, size) in _FIXED.items()}, "s": 4, "o": 4, "g": 1, "v": 1, "a": 4, "(": 8, "{": 8}


@dataclass(frozen=True, slots=True)
class Variant:
    """A `v` value: its signature and the value."""

    signature: str
    value: Any


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    serial: int
    path: str = ""
    interface: str = ""
    member: str = ""
    destination: str = ""
    error_name: str = ""
    reply_serial: int = 0
    signature: str = ""
    body: tuple[Any, ...] = field(default=())
    flags: int = 0


def split_signature(signature: str) -> list[str]:
    """The complete types of a signature, in order ("sba(sv)" -> ["s", "b", "a(sv)"])."""
    out: list[str] = []
    i = 0
    while i < len(signature):
        end = _type_end(signature, i)
        out.append(signature[i:end])
        i = end
    return out


def _type_end(sig: str, i: int) -> int:
    if i >= len(sig):
        raise WireFormatError(f"signature {sig!r} ends inside a type")
    c = sig[i]
    if c == "a":
        return _type_end(sig, i + 1)
    if c in "({":
        close = ")" if c == "(" else "}"
        j = i + 1
        while j < len(sig) and sig[j] != close:
            j = _type_end(sig, j)
        if j >= len(sig):
            raise WireFormatError(f"signature {sig!r}: unclosed {c!r}")
        return j + 1
    if c in _FIXED or c in "sogv":
        return i + 1
    raise WireFormatError(f"signature {sig!r}: unknown type code {c!r}")


# -- marshalling ---------------------------------------------------------------------------------
class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def pad(self, align: int) -> None:
        self.buf += b"\0" * (-len(self.buf) % align)

    def put(self, sig: str, value: Any) -> None:
        c = sig[0]
        self.pad(_ALIGN[c])
        if c in _FIXED:
            fmt = _FIXED[c][0]
            number = (1 if value else 0) if c == "b" else value
            try:
                self.buf += struct.pack("<" + fmt, number)
            except struct.error as exc:
                raise WireFormatError(f"{value!r} does not fit D-Bus type {c!r}") from exc
        elif c in "so":
            data = str(value).encode()
            self.buf += struct.pack("<I", len(data)) + data + b"\0"
        elif c == "g":
            data = str(value).encode()
            if len(data) > 255:
                raise WireFormatError("a signature is at most 255 bytes")
            self.buf += bytes([len(data)]) + data + b"\0"
        elif c == "v":
            if not isinstance(value, Variant):
                raise WireFormatError(f"a 'v' needs a Variant, got {value!r}")
            self.put("g", value.signature)
            self.put(value.signature, value.value)
        elif c == "a":
            self._array(sig[1:], value)
        else:  # struct or dict entry
            inner = split_signature(sig[1:-1])
            if len(inner) != len(value):
                raise WireFormatError(f"struct {sig} needs {len(inner)} fields, got {len(value)}")
            for s, v in zip(inner, value, strict=True):
                self.put(s, v)

    def _array(self, element: str, values: Any) -> None:
        if element == "y" and isinstance(values, (bytes, bytearray)):
            self.buf += struct.pack("<I", len(values)) + bytes(values)
            return
        at = len(self.buf)
        self.buf += b"\0\0\0\0"
        self.pad(_ALIGN[element[0]])
        start = len(self.buf)
        items = values.items() if element[0] == "{" and isinstance(values, dict) else values
        for item in items:
            self.put(element, item)
        struct.pack_into("<I", self.buf, at, len(self.buf) - start)


def encode(message: Message) -> bytes:
    """The message's bytes (little-endian)."""
    body = _Writer()
    for sig, value in zip(split_signature(message.signature), message.body, strict=True):
        body.put(sig, value)
    fields: list[tuple[int, Variant]] = []
    for code, value in ((_Field.PATH, message.path), (_Field.INTERFACE, message.interface),
                        (_Field.MEMBER, message.member), (_Field.ERROR_NAME, message.error_name),
                        (_Field.REPLY_SERIAL, message.reply_serial), (_Field.DESTINATION, message.destination),
                        (_Field.SIGNATURE, message.signature)):
        if value:
            fields.append((int(code), Variant(_FIELD_SIGNATURE[code], value)))
    head = _Writer()
    head.buf += struct.pack("<BBBBII", ord("l"), int(message.type), message.flags, 1, len(body.buf), message.serial)
    head.put("a(yv)", fields)
    head.pad(8)
    return bytes(head.buf + body.buf)


# -- unmarshalling -------------------------------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes, order: str) -> None:
        self.data = data
        self.order = order
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise WireFormatError("message ends inside a value")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def align(self, n: int) -> None:
        self.take(-self.pos % n)

    def get(self, sig: str) -> Any:
        c = sig[0]
        self.align(_ALIGN[c])
        if c in _FIXED:
            fmt, size = _FIXED[c]
            value = struct.unpack(self.order + fmt, self.take(size))[0]
            return bool(value) if c == "b" else value
        if c in "sog":
            length = self.take(1)[0] if c == "g" else struct.unpack(self.order + "I", self.take(4))[0]
            text = self.take(length)
            if self.take(1) != b"\0":
                raise WireFormatError("a string is not NUL-terminated")
            try:
                return text.decode()
            except UnicodeDecodeError as exc:
                raise WireFormatError("a string is not UTF-8") from exc
        if c == "v":
            inner = self.get("g")
            if len(split_signature(inner)) != 1:
                raise WireFormatError(f"a variant's signature {inner!r} is not one complete type")
            return Variant(inner, self.get(inner))
        if c == "a":
            length = struct.unpack(self.order + "I", self.take(4))[0]
            if length > MAX_MESSAGE_BYTES:
                raise WireFormatError(f"array of {length} bytes")
            self.align(_ALIGN[sig[1]])
            end = self.pos + length
            if sig[1] == "y":
                return self.take(length)
            items = []
            while self.pos < end:
                items.append(self.get(sig[1:]))
            if self.pos != end:
                raise WireFormatError("an array's elements overrun its length")
            return items
        return tuple(self.get(s) for s in split_signature(sig[1:-1]))


def message_length(fixed: bytes) -> int:
    """The whole message's length from its first HEADER_FIXED_BYTES bytes (to know how much to read)."""
    if len(fixed) < HEADER_FIXED_BYTES:
        raise WireFormatError("short header")
    order = {ord("l"): "<", ord("B"): ">"}.get(fixed[0])
    if order is None or fixed[3] != 1:
        raise WireFormatError(f"not a D-Bus message (endianness {fixed[0]!r}, version {fixed[3]!r})")
    body, fields = struct.unpack(order + "I4xI", fixed[4:16])
    header = HEADER_FIXED_BYTES + fields
    total = header + (-header % 8) + body
    if total > MAX_MESSAGE_BYTES:
        raise WireFormatError(f"a message of {total} bytes (over {MAX_MESSAGE_BYTES})")
    return int(total)


def decode(data: bytes) -> Message:
    """One whole message (as `message_length` measured it) back into a `Message`."""
    total = message_length(data[:HEADER_FIXED_BYTES])
    if len(data) != total:
        raise WireFormatError(f"message of {len(data)} bytes, its header says {total}")
    order = "<" if data[0] == ord("l") else ">"
    kind, flags, _, body_len, serial = struct.unpack(order + "BBBII", data[1:12])
    try:
        mtype = MessageType(kind)
    except ValueError as exc:
        raise WireFormatError(f"unknown message type {kind}") from exc
    reader = _Reader(data, order)
    reader.pos = 12
    values: dict[int, Any] = {}
    for code, variant in reader.get("a(yv)"):
        values[code] = variant.value
    reader.align(8)
    signature = str(values.get(_Field.SIGNATURE, ""))
    body: Sequence[Any] = ()
    if signature:
        body_reader = _Reader(data[reader.pos:], order)
        body = tuple(body_reader.get(s) for s in split_signature(signature))
        if body_reader.pos != body_len:
            raise WireFormatError(f"body of {body_len} bytes holds {body_reader.pos} bytes of values")
    return Message(
        type=mtype, serial=serial, flags=flags,
        path=str(values.get(_Field.PATH, "")), interface=str(values.get(_Field.INTERFACE, "")),
        member=str(values.get(_Field.MEMBER, "")), destination=str(values.get(_Field.DESTINATION, "")),
        error_name=str(values.get(_Field.ERROR_NAME, "")), reply_serial=int(values.get(_Field.REPLY_SERIAL, 0)),
        signature=signature, body=tuple(body),
    )
