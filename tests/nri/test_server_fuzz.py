"""Arbitrary bytes on the plugin's server connection: every outcome is a status reply or a WireError
(which closes the connection and makes the plugin reconnect), never another exception."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

import hookserver.nri as nri_package
from hookserver.api import ttrpc_pb2
from hookserver.errors import WireError
from hookserver.nri.conn import TtrpcServer
from hookserver.nri.ttrpc import HEADER, FrameDecoder, MessageType, encode_frame, encode_request


class RecordingMux:
    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes]] = []

    async def send(self, conn_id: int, data: bytes) -> None:
        self.sent.append((conn_id, data))


async def _echo(payload: bytes, deadline: float | None) -> bytes:
    return payload


def _feed_all(chunks: list[bytes]) -> tuple[list[tuple[int, bytes]], WireError | None]:
    async def body() -> tuple[list[tuple[int, bytes]], WireError | None]:
        mux = RecordingMux()
        server = TtrpcServer(mux, 1, "svc", {"Echo": _echo})  # type: ignore[arg-type]
        error: WireError | None = None
        try:
            for chunk in chunks:
                server.feed(chunk)
        except WireError as exc:
            error = exc
        for _ in range(20):
            await asyncio.sleep(0)
        await server.close()
        return mux.sent, error

    return asyncio.run(body())


frame_like = st.builds(
    lambda sid, mtype, data: HEADER.pack(len(data), sid, mtype, 0) + data,
    st.integers(0, 2**32 - 1), st.integers(0, 255), st.binary(max_size=64),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40), frame_like), max_size=8))
def test_garbage_gives_replies_or_a_wire_error(chunks: list[bytes]) -> None:
    sent, _error = _feed_all(chunks)
    decoder = FrameDecoder()
    for conn_id, data in sent:
        assert conn_id == 1
        for frame in decoder.feed(data):
            assert frame.type == MessageType.RESPONSE  # type: ignore[union-attr]
            ttrpc_pb2.Response.FromString(frame.data)  # type: ignore[union-attr]


def test_valid_request_is_echoed_and_status_codes_are_right() -> None:
    good = encode_frame(1, MessageType.REQUEST, encode_request("svc", "Echo", b"hi"))
    unknown = encode_frame(3, MessageType.REQUEST, encode_request("svc", "Nope", b""))
    garbage = encode_frame(5, MessageType.REQUEST, b"\xff\xff\xff")
    sent, error = _feed_all([good + unknown[:7], unknown[7:] + garbage])
    assert error is None
    replies = {}
    decoder = FrameDecoder()
    for _, data in sent:
        for frame in decoder.feed(data):
            replies[frame.stream_id] = ttrpc_pb2.Response.FromString(frame.data)  # type: ignore[union-attr]
    assert replies[1].payload == b"hi" and not replies[1].HasField("status")
    assert replies[3].status.code == 12
    assert replies[5].status.code == 3


def test_package_exports_exactly_its_public_names() -> None:
    assert sorted(nri_package.__all__) == [
        "ConnState", "Dial", "Event", "NriPlugin", "mask_words", "subscription_mask", "valid_mask_for",
    ]
    for name in nri_package.__all__:
        assert getattr(nri_package, name) is not None
