"""The D-Bus marshalling against bytes written out by hand from the specification, and round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.systemd.wire import Message, MessageType, Variant, WireFormatError, decode, encode, message_length


def _spec_bytes() -> bytes:
    """METHOD_CALL serial 1, PATH "/a", MEMBER "M", SIGNATURE "t", body uint64 5, laid out field by field."""
    fields = (
        b"\x01" + b"\x01o\x00" + struct.pack("<I", 2) + b"/a\x00"  # (y=1, v=o "/a"): offsets 16..27
        + b"\x00" * 5  # the next struct starts at 32
        + b"\x03" + b"\x01s\x00" + struct.pack("<I", 1) + b"M\x00"  # 32..42
        + b"\x00" * 6  # 48
        + b"\x08" + b"\x01g\x00" + b"\x01t\x00"  # 48..54
    )
    head = b"l\x01\x00\x01" + struct.pack("<II", 8, 1) + struct.pack("<I", len(fields)) + fields
    return head + b"\x00" * (-len(head) % 8) + struct.pack("<Q", 5)


def test_a_method_call_is_laid_out_as_the_specification_says() -> None:
    message = Message(MessageType.METHOD_CALL, 1, path="/a", member="M", signature="t", body=(5,))
    assert encode(message) == _spec_bytes()
    assert decode(_spec_bytes()) == message


def test_set_unit_properties_round_trips_with_variants_and_byte_arrays() -> None:
    props = [("CPUWeight", Variant("t", 79)), ("AllowedCPUs", Variant("ay", b"\x0f")),
             ("MemoryMax", Variant("t", (1 << 64) - 1))]
    message = Message(MessageType.METHOD_CALL, 7, path="/org/freedesktop/systemd1",
                      interface="org.freedesktop.systemd1.Manager", member="SetUnitProperties",
                      signature="sba(sv)", body=("kubepods-besteffort.slice", True, props))
    data = encode(message)
    assert len(data) % 8 == 0 and message_length(data[:16]) == len(data)
    back = decode(data)
    assert back.body == ("kubepods-besteffort.slice", True, [(n, v) for n, v in props])
    # The array of structs is 8-aligned and its length excludes the padding before the first struct.
    assert b"CPUWeight\x00" in data and b"\x01\x00\x00\x00" in data  # the boolean true is a uint32


@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.integers(0, (1 << 64) - 1)), max_size=8),
       st.booleans())
def test_any_property_list_round_trips(props: list[tuple[str, int]], runtime: bool) -> None:
    body = ("u.slice", runtime, [(n, Variant("t", v)) for n, v in props])
    message = Message(MessageType.METHOD_CALL, 3, path="/p", member="SetUnitProperties", signature="sba(sv)",
                      body=body)
    assert decode(encode(message)).body == (body[0], runtime, body[2])


@pytest.mark.parametrize("data", [
    b"",
    b"GET / HTTP/1.1\r\n\r\n",
    b"l\x01\x00\x02" + b"\x00" * 12,  # protocol version 2
    b"l\x01\x00\x01" + struct.pack("<III", 0, 1, 1 << 30),  # a header array of 1 GiB
])
def test_garbage_is_a_wire_format_error(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        decode(data)


def test_a_truncated_message_is_a_wire_format_error() -> None:
    data = _spec_bytes()
    with pytest.raises(WireFormatError):
        decode(data[:-3])


def test_a_value_that_does_not_fit_its_type_is_refused() -> None:
    with pytest.raises(WireFormatError):
        encode(Message(MessageType.METHOD_CALL, 1, path="/", member="M", signature="t", body=(-1,)))
