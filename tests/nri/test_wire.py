"""Byte-level checks of our ttrpc/mux/NRI encoding against the golden bytes of reference §5.12, and
property tests of framing, splitting, reassembly and translation."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hookserver.api import nri_pb2, ttrpc_pb2
from hookserver.errors import InputError
from hookserver.hooks.stages import Stage
from hookserver.nri.events import Event, mask_words, subscription_mask, valid_mask_for
from hookserver.errors import WireError
from hookserver.nri.mux import MAX_SEND_CHUNK_BYTES, MUX_HEADER, Multiplexer, encode_mux
from hookserver.nri.translate import (
    adjustment_for,
    resources_from_wire,
    resources_to_wire,
    split_env,
    sync_update_entry,
    update_for,
)
from hookserver.nri.ttrpc import (
    GATHER_FROM_BYTES,
    MAX_MESSAGE_BYTES,
    Code,
    Frame,
    FrameDecoder,
    MessageType,
    OversizedFrame,
    StatusError,
    decode_request,
    decode_response,
    encode_frame,
    encode_request,
    encode_response,
    request_view,
)
from hookserver.resources import Resources

REGISTER_DEMO_10 = bytes.fromhex(
    "00000002 00000044"
    "0000003a 00000001 0100"
    "0a1c" + b"nri.pkg.api.v1alpha1.Runtime".hex()
    + "120e" + b"RegisterPlugin".hex()
    + "1a0a 0a04" + b"demo".hex() + "1202" + b"10".hex()
)
CREATE_RESPONSE_35 = bytes.fromhex(
    "0a 21 32 1f 12 1d 0a 08 0a 06 08 80 80 80 80 01 12 11 0a 03 08 80 04 12 04 08 d0 86 03 1a 04 08 a0 8d 06"
)


def test_register_plugin_golden_76_bytes() -> None:
    payload = nri_pb2.RegisterPluginRequest(plugin_name="demo", plugin_idx="10").SerializeToString()
    frame = encode_frame(1, MessageType.REQUEST, encode_request("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin", payload))
    wire = encode_mux(2, frame)
    assert len(wire) == 76
    assert wire == REGISTER_DEMO_10


def test_runtime_empty_reply_golden() -> None:
    wire = encode_mux(2, encode_frame(1, MessageType.RESPONSE, encode_response(b"")))
    assert wire == bytes.fromhex("00000002 0000000a 00000000 00000001 0200")


def test_configure_response_mask_0x89() -> None:
    assert nri_pb2.ConfigureResponse(events=0x89).SerializeToString() == bytes.fromhex("108901")
    mask = subscription_mask({Stage.PRE_RUN_POD_SANDBOX, Stage.PRE_CREATE_CONTAINER, Stage.PRE_UPDATE_CONTAINER_RESOURCES}, 0x7FF)
    assert mask & 0x89 == 0x89


def test_create_container_response_golden_35_bytes() -> None:
    reply = adjustment_for(
        Resources(cpu_shares=512, cpu_quota_us=50000, cpu_period_us=100000, memory_limit_bytes=256 << 20), {}
    )
    data = reply.SerializeToString()
    assert len(data) == 35
    assert data == CREATE_RESPONSE_35


def test_optional_int64_minus_one_is_a_ten_byte_varint() -> None:
    data = nri_pb2.OptionalInt64(value=-1).SerializeToString()
    assert data == bytes.fromhex("08 ff ff ff ff ff ff ff ff ff 01")
    assert len(data) - 1 == 10
    # Presence: a zero value still emits the wrapper (tag + length 0), so the runtime sets it to 0.
    res = nri_pb2.LinuxResources()
    resources_to_wire(Resources(cpu_quota_us=0), res)
    assert res.SerializeToString() == bytes.fromhex("12 02 12 00")


def test_error_response_has_status_and_no_payload() -> None:
    data = encode_response(b"ignored", code=Code.UNIMPLEMENTED, message="nope")
    response = ttrpc_pb2.Response.FromString(data)
    assert response.status.code == 12 and response.status.message == "nope" and response.payload == b""
    with pytest.raises(StatusError) as info:
        decode_response(data)
    assert info.value.code is Code.UNIMPLEMENTED


def test_sender_refuses_an_oversized_message() -> None:
    with pytest.raises(StatusError) as info:
        encode_frame(1, MessageType.REQUEST, b"x" * (MAX_MESSAGE_BYTES + 1))
    assert info.value.code is Code.RESOURCE_EXHAUSTED


@settings(max_examples=100, deadline=None)
@given(
    messages=st.lists(st.tuples(st.integers(0, 2**32 - 1), st.binary(max_size=3000)), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 5000), max_size=12),
    gather_from=st.sampled_from([0, 1, 100, GATHER_FROM_BYTES]),
)
def test_decoder_reassembles_frames_across_any_chunking(
    messages: list[tuple[int, bytes]], cuts: list[int], gather_from: int
) -> None:
    """Whatever the chunking, and whether a frame cut by a chunk is gathered in pieces (`gather_from`
    below its length) or grown in the buffer."""
    stream = b"".join(encode_frame(sid, MessageType.REQUEST, data) for sid, data in messages)
    decoder = FrameDecoder(gather_from=gather_from)
    frames: list[Frame | OversizedFrame] = []
    pos = 0
    for cut in cuts:
        frames += decoder.feed(stream[pos:pos + cut])
        pos += cut
    frames += decoder.feed(stream[pos:])
    assert frames == [Frame(sid, MessageType.REQUEST, 0, data) for sid, data in messages]
    assert decoder.buffered == 0


@settings(max_examples=30, deadline=None)
@given(oversize=st.integers(1, 50), chunk=st.integers(1, 70), after=st.binary(max_size=32))
def test_decoder_skips_an_oversized_frame_and_keeps_going(oversize: int, chunk: int, after: bytes) -> None:
    limit = 32
    stream = struct.pack(">IIBB", limit + oversize, 7, 1, 0) + b"z" * (limit + oversize) + encode_frame(9, 1, after)
    decoder = FrameDecoder(max_data=limit)
    frames: list[Frame | OversizedFrame] = []
    for i in range(0, len(stream), chunk):
        frames += decoder.feed(stream[i:i + chunk])
        assert decoder.buffered <= limit + 10  # never holds the oversized data
    assert frames == [OversizedFrame(7, 1, limit + oversize), Frame(9, 1, 0, after)]
    assert decoder.buffered == 0


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=20000), conn=st.sampled_from([1, 2]))
def test_mux_pieces_are_at_most_4096_and_reassemble(data: bytes, conn: int) -> None:
    wire = encode_mux(conn, data)
    pos, out, sizes = 0, b"", []
    while pos < len(wire):
        cid, length = MUX_HEADER.unpack_from(wire, pos)
        assert cid == conn
        sizes.append(length)
        out += wire[pos + 8:pos + 8 + length]
        pos += 8 + length
    assert out == data
    assert max(sizes) <= MAX_SEND_CHUNK_BYTES
    assert len(sizes) == max(1, -(-len(data) // MAX_SEND_CHUNK_BYTES))


def _received(wire: bytes, cuts: list[int], *, eof: bool = False) -> tuple[dict[int, bytes], BaseException | None]:
    """What each opened connection's sink got from `wire` read in pieces cut at `cuts` (conn 3 is not
    opened), and how the mux ended (None: still open, or a clean EOF)."""

    async def run() -> tuple[dict[int, bytes], BaseException | None]:
        mux = Multiplexer(max_frame=1 << 16)
        got: dict[int, list[bytes]] = {1: [], 2: []}
        mux.open(1, got[1].append)
        mux.open(2, got[2].append)
        pos = 0
        for cut in [*cuts, len(wire)]:
            mux.data_received(wire[pos:pos + cut])
            pos += cut
            if pos >= len(wire):
                break
        if eof:
            mux.eof_received()
        ended = mux._ended  # noqa: SLF001 - how the connection ended is what this test reads
        error = ended.exception() if ended.done() else None
        return {conn: b"".join(parts) for conn, parts in got.items()}, error

    return asyncio.run(run())


@settings(max_examples=100, deadline=None)
@given(
    frames=st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.binary(max_size=9000)), max_size=6),
    cuts=st.lists(st.integers(1, 12000), max_size=12),
)
def test_mux_hands_each_connection_its_bytes_across_any_read_cuts(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    """A payload may reach its sink in pieces (a frame longer than a read goes on as it arrives): each
    connection's byte stream is still exactly its payloads in order, and an unopened one's are dropped."""
    wire = b"".join(MUX_HEADER.pack(conn, len(data)) + data for conn, data in frames)
    got, error = _received(wire, cuts, eof=True)
    assert error is None
    for conn in (1, 2):
        assert got[conn] == b"".join(data for c, data in frames if c == conn)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (MUX_HEADER.pack(1, 10) + b"abc", "inside a frame (3 of 10 bytes)"),
        (MUX_HEADER.pack(1, 3) + b"abc" + b"\x00\x00\x00", "inside a frame header (3 of 8 bytes)"),
        (MUX_HEADER.pack(2, 1 << 17), "declares 131072 bytes, over the 65536 limit"),
    ],
)
@pytest.mark.parametrize("cut", [1, 5, 8, 11, 100])
def test_mux_reports_a_broken_stream(wire: bytes, message: str, cut: int) -> None:
    got, error = _received(wire, [cut] * 20, eof=True)
    assert isinstance(error, WireError) and message in str(error)


def _as_decoded(data: bytes) -> tuple[str, str, bytes, int] | None:
    """What the protobuf decoder reads from a ttrpc.Request, None where it refuses it."""
    try:
        r = decode_request(data)
    except StatusError:
        return None
    return r.service, r.method, r.payload, r.timeout_nano


@settings(max_examples=200, deadline=None)
@given(
    service=st.text(max_size=40), method=st.text(max_size=20), payload=st.binary(max_size=300),
    timeout=st.integers(-(1 << 63), (1 << 63) - 1), metadata=st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3),
    extra=st.binary(max_size=40), repeat=st.booleans(),
)
def test_request_view_reads_what_the_protobuf_decoder_reads(
    service: str, method: str, payload: bytes, timeout: int, metadata: list[tuple[str, str]], extra: bytes, repeat: bool
) -> None:
    """A request read in place (long frames) has the decoder's fields, with unknown fields, metadata, a
    field repeated (the last wins) or bytes appended; where the walk gives up (None), the caller decodes."""
    request = ttrpc_pb2.Request(service=service, method=method, payload=payload, timeout_nano=timeout)
    for key, value in metadata:
        request.metadata.add(key=key, value=value)
    data = request.SerializeToString()
    if repeat:
        data += ttrpc_pb2.Request(method="Again", payload=b"later").SerializeToString()
    for wire in (data, data + extra):
        view = request_view(wire)
        decoded = _as_decoded(wire)
        if wire is data:
            assert view is not None
        if view is not None:
            assert decoded == (view.service, view.method, bytes(view.payload), view.timeout_nano)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
@example(b"*\x01\x00")  # metadata whose entry has tag 0: the view skipped it, the decoder refuses it
@example(b"*\x02\x0a\x01")  # an entry whose key runs past the entry
@example(b"*\x03\x0a\x01\xff")  # an entry whose key is not UTF-8
def test_request_view_never_accepts_what_the_decoder_refuses(data: bytes) -> None:
    view = request_view(data)
    if view is not None:
        assert _as_decoded(data) == (view.service, view.method, bytes(view.payload), view.timeout_nano)


_OPT = st.none() | st.integers(0, 1 << 40)
_RESOURCES = st.builds(
    Resources, cpu_shares=_OPT, cpu_quota_us=st.none() | st.integers(-1, 1 << 40), cpu_period_us=_OPT,
    memory_limit_bytes=st.none() | st.integers(-1, 1 << 40), cpuset_cpus=st.none() | st.sampled_from(["0-3", "1,5"]),
)


@settings(max_examples=100, deadline=None)
@given(updates=st.lists(st.tuples(st.text(min_size=1, max_size=300), _RESOURCES), max_size=5))
def test_sync_update_entries_decode_as_the_protobuf_updates(updates: list[tuple[str, Resources]]) -> None:
    """The hand-encoded reply entries (memoized per value, ids of any length) decode to exactly the updates
    `update_for` builds with ignore_failure; empty values give no entry; asking twice gives the same bytes."""
    entries = [sync_update_entry(cid, res) for cid, res in updates]
    assert entries == [sync_update_entry(cid, res) for cid, res in updates]
    reply = nri_pb2.SynchronizeResponse.FromString(b"".join(entries))
    expected = [update_for(cid, res, ignore_failure=True) for cid, res in updates]
    assert list(reply.update) == [u for u in expected if u is not None]
    assert [e == b"" for e in entries] == [res.is_empty() for _, res in updates]


@given(st.lists(st.text(max_size=12), max_size=10))
def test_split_env_at_first_equals(entries: list[str]) -> None:
    env = split_env(entries)
    for key, value in env.items():
        assert key and value and "=" not in key
        assert any(e.startswith(f"{key}=") and e[len(key) + 1:] == value for e in entries)
    assert split_env(["A=b=c", "=x", "E=", "noeq"]) == {"A": "b=c"}


_opt_int = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
_opt_uint = st.one_of(st.none(), st.integers(0, 2**64 - 1))


@given(
    shares=_opt_uint, quota=_opt_int, period=_opt_uint, memory=_opt_int,
    cpus=st.one_of(st.none(), st.sampled_from(["0-3", "1,3"])),
)
def test_resources_round_trip_through_the_wire(
    shares: int | None, quota: int | None, period: int | None, memory: int | None, cpus: str | None
) -> None:
    res = Resources(cpu_shares=shares, cpu_quota_us=quota, cpu_period_us=period, memory_limit_bytes=memory, cpuset_cpus=cpus)
    wire = nri_pb2.LinuxResources()
    resources_to_wire(res, wire)
    back = resources_from_wire(nri_pb2.LinuxResources.FromString(wire.SerializeToString()))
    assert back == res


def test_out_of_range_values_name_the_field() -> None:
    with pytest.raises(InputError, match="cpu.shares"):
        resources_to_wire(Resources(cpu_shares=-5), nri_pb2.LinuxResources())
    with pytest.raises(InputError, match="container.id"):
        update_for("", Resources(cpu_shares=2))
    assert update_for("c1", Resources()) is None


def test_mask_words_and_valid_masks() -> None:
    assert mask_words(0x89) == ["RunPodSandbox", "CreateContainer", "UpdateContainer"]
    assert mask_words(0x8000) == ["0x8000"]
    assert Event.POST_UPDATE_POD_SANDBOX.word == "PostUpdatePodSandbox"
    assert valid_mask_for("containerd", "v1.7.13") == 0x7FF
    assert valid_mask_for("v2", "v2.0.4") == 0x7FF
    assert valid_mask_for("containerd", "v2.2.1") == 0x3FFF
    assert valid_mask_for("cri-o", "1.30.0", "v0.12.0") == 0x3FFF
    assert valid_mask_for("cri-o", "1.30.0", "v0.9.1") == 0x7FF
    assert valid_mask_for("", "") == 0x7FF


@given(st.sets(st.sampled_from(list(Stage))), st.sampled_from([0x7FF, 0x3FFF, 0x1]))
def test_subscription_is_within_the_valid_mask_and_covers_bookkeeping(stages: set[Stage], valid: int) -> None:
    mask = subscription_mask(stages, valid)
    assert mask & ~valid == 0
    if valid == 0x7FF:
        assert mask & 0x602 == 0x602 and mask & 0x4 == 0x4  # stop/remove pod and container
        assert bool(mask & 0x8) == (Stage.PRE_CREATE_CONTAINER in stages)
        assert bool(mask & 0x80) == (Stage.PRE_UPDATE_CONTAINER_RESOURCES in stages)


def test_ok_responses_encode_exactly_as_protobuf_does() -> None:
    from hookserver.api import ttrpc_pb2 as tp
    from hookserver.nri.ttrpc import encode_response

    for size in (0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 300_000, (4 << 20) - 1):
        payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
        expected = tp.Response(payload=payload).SerializeToString()
        assert encode_response(payload) == expected, size
        assert tp.Response.FromString(encode_response(payload)).payload == payload
