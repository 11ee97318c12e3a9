"""The extended-resource spec annotation's resource names: the current `kubernetes.io/batch-*`, the legacy
`koordinator.sh/batch-*` koord-manager once wrote, and what a value that is not a quantity gets."""

from __future__ import annotations

import json

import pytest

from hookserver.errors import QuantityError
from hookserver.extended_resource_spec import parse_spec_text


def _spec(requests: dict[str, object], limits: dict[str, object]) -> str:
    return json.dumps({"containers": {"main": {"requests": requests, "limits": limits}}})


def test_legacy_names_read_as_the_current_ones() -> None:
    current = parse_spec_text(_spec({"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
                                    {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "2Gi"}))["main"]
    legacy = parse_spec_text(_spec({"koordinator.sh/batch-cpu": "500", "koordinator.sh/batch-memory": "1Gi"},
                                   {"koordinator.sh/batch-cpu": "1k", "koordinator.sh/batch-memory": "2Gi"}))["main"]
    got = (current.cpu_request_milli, current.cpu_limit_milli, current.memory_request_bytes, current.memory_limit_bytes)
    assert got == (500, 1000, 1 << 30, 2 << 30)
    assert (legacy.cpu_request_milli, legacy.cpu_limit_milli, legacy.memory_request_bytes,
            legacy.memory_limit_bytes) == got


def test_the_current_name_wins_over_the_legacy_one_and_absent_is_minus_one() -> None:
    entry = parse_spec_text(_spec({"kubernetes.io/batch-cpu": "300", "koordinator.sh/batch-cpu": "900"}, {}))["main"]
    assert entry.cpu_request_milli == 300
    assert (entry.cpu_limit_milli, entry.memory_request_bytes, entry.memory_limit_bytes) == (-1, -1, -1)


@pytest.mark.parametrize("value", [None, "", "lots", [], "-1"])
def test_a_value_that_is_not_a_quantity_is_refused_naming_its_field(value: object) -> None:
    # Twice: a refused value is never remembered as a known quantity.
    for _ in range(2):
        with pytest.raises(QuantityError) as err:
            parse_spec_text(_spec({"kubernetes.io/batch-cpu": value}, {}))
        assert "containers[main].requests[kubernetes.io/batch-cpu]" in err.value.field
