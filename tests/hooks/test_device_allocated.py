"""The device-allocated annotation parser: koordinator's JSON shape, Go's leniencies, clear refusals."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.errors import AnnotationError
from hookserver.koord_devices import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    VirtualFunction,
    device_allocations,
    parse_device_allocations,
)

# The example in koordinator's apis/extension/device_share.go comment, with a VF added.
EXAMPLE = {
    "gpu": [
        {"minor": 1, "resources": {GPU_CORE: 100, GPU_MEMORY_RATIO: 100, GPU_MEMORY: "16Gi"}},
        {"minor": 0, "resources": {GPU_CORE: 50, GPU_MEMORY_RATIO: 50, GPU_MEMORY: "8Gi"}},
    ],
    "rdma": [
        {"minor": 0, "id": "0000:09:00.0", "resources": {"koordinator.sh/rdma": 100},
         "extension": {"vfs": [{"minor": 3, "busID": "0000:09:00.3"}]}},
    ],
}


def test_example_decodes_in_order_with_values() -> None:
    alloc = parse_device_allocations(json.dumps(EXAMPLE))
    gpus = alloc["gpu"]
    assert [g.minor for g in gpus] == [1, 0]  # the annotation's order, not sorted
    assert gpus[0].value(GPU_MEMORY) == 16 << 30
    assert gpus[1].value(GPU_CORE) == 50 and gpus[1].value("nope") is None
    rdma = alloc["rdma"][0]
    assert rdma.id == "0000:09:00.0" and rdma.vfs == (VirtualFunction(3, "0000:09:00.3"),)


def test_absent_annotation_is_none_and_go_leniencies_are_kept() -> None:
    assert device_allocations({}) is None
    assert dict(parse_device_allocations("null")) == {}
    alloc = parse_device_allocations('{"gpu": [{"resources": {}, "unknown": 1}], "fpga": null}')
    assert alloc["gpu"][0].minor == 0 and alloc["fpga"] == ()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{", f"annotations[{ANNOTATION_DEVICE_ALLOCATED}]"),
        ("[1]", f"annotations[{ANNOTATION_DEVICE_ALLOCATED}]"),
        ('{"gpu": {"minor": 0}}', "gpu"),
        ('{"gpu": [null]}', "gpu[0]"),
        ('{"gpu": [{"minor": "0"}]}', "gpu[0].minor"),
        ('{"gpu": [{"minor": 1.5}]}', "gpu[0].minor"),
        ('{"gpu": [{"minor": 4294967296}]}', "gpu[0].minor"),
        ('{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory": "8 GiB"}}]}',
         "gpu[0].resources[koordinator.sh/gpu-memory]"),
        ('{"rdma": [{"minor": 0, "id": 7}]}', "rdma[0].id"),
        ('{"rdma": [{"extension": {"vfs": [{"busID": 1}]}}]}', "rdma[0].extension.vfs[0].busID"),
    ],
)
def test_malformed_input_names_the_field(text: str, field: str) -> None:
    with pytest.raises(AnnotationError) as info:
        parse_device_allocations(text)
    assert info.value.field == field
    assert str(info.value).startswith(field + ": ")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=64), _json.map(json.dumps)))
def test_garbage_is_decoded_or_refused_with_an_annotation_error(text: str) -> None:
    try:
        alloc = parse_device_allocations(text)
    except AnnotationError as exc:
        assert str(exc)  # a reason, never an empty message
        return
    for entries in alloc.values():
        for entry in entries:
            assert isinstance(entry.minor, int) and -(1 << 31) <= entry.minor < (1 << 31)
