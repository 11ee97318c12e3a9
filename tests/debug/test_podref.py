"""NAMESPACE/NAME parsing: valid Kubernetes names pass, anything else names the bad part."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.debug.podref import parse_pod_key, validate_pod_ref
from hookserver.errors import InputError

_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
_subdomain = st.lists(_label, min_size=1, max_size=4).map(".".join)


@given(namespace=_label, name=_subdomain)
def test_valid_keys_round_trip(namespace: str, name: str) -> None:
    assert parse_pod_key(f"{namespace}/{name}") == (namespace, name)


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_input_error(text: str) -> None:
    try:
        namespace, name = parse_pod_key(text)
    except InputError as exc:
        assert exc.field in ("pod", "namespace", "name")
        assert "\n" not in str(exc)
    else:
        assert f"{namespace}/{name}" == text


@pytest.mark.parametrize(
    ("text", "field"),
    [("web", "pod"), ("a/b/c", "pod"), ("/x", "namespace"), ("x/", "name"), ("Web/x", "namespace"),
     ("web/x_y", "name"), ("web/" + "a" * 254, "name"), ("a" * 64 + "/x", "namespace")],
)
def test_bad_keys_name_the_part(text: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_pod_key(text)
    assert err.value.field == field


def test_long_values_are_cut_in_the_message() -> None:
    with pytest.raises(InputError) as err:
        validate_pod_ref("ns", "X" * 1000)
    assert len(str(err.value)) < 200
