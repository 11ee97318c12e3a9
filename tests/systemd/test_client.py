"""The systemd client against a D-Bus peer on a real unix socket: the call systemd sees, its errors, garbage,
a closed or missing socket, and a systemd that never answers (bounded by the timeout)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hookserver.errors import SystemdCallError, SystemdUnavailable
from hookserver.systemd import SystemdClient
from hookserver.systemd.wire import Variant
from tests.systemd.fake_systemd import Call, FakeSystemd



def test_set_unit_properties_sends_what_systemd_expects(sock_path: Path) -> None:
    fake = FakeSystemd(sock_path)
    try:
        client = SystemdClient(str(sock_path), timeout_s=2)
        client.set_unit_properties("kubepods-besteffort.slice", [("CPUWeight", Variant("t", 79)),
                                                                 ("AllowedCPUs", Variant("ay", b"\x03"))])
        client.set_unit_properties("kubepods.slice", [("MemoryMax", Variant("t", 1 << 30))])
    finally:
        fake.close()
    assert fake.auth_lines == [b"AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n"]
    assert fake.connections == 1  # the second call reuses the connection
    assert [c.member for c in fake.calls] == ["SetUnitProperties"] * 2
    unit, runtime, props = fake.calls[0].body
    assert (unit, runtime) == ("kubepods-besteffort.slice", True)
    assert props == [("CPUWeight", Variant("t", 79)), ("AllowedCPUs", Variant("ay", b"\x03"))]


def test_an_error_reply_carries_its_name_and_message(sock_path: Path) -> None:
    fake = FakeSystemd(sock_path, behaviour=lambda call: "error:org.freedesktop.systemd1.NoSuchUnit:Unit x.slice "
                                                         "not loaded.")
    try:
        with pytest.raises(SystemdCallError) as caught:
            SystemdClient(str(sock_path), timeout_s=2).set_unit_properties("x.slice", [])
    finally:
        fake.close()
    assert caught.value.name == "org.freedesktop.systemd1.NoSuchUnit"
    assert caught.value.detail == "Unit x.slice not loaded."


def test_garbage_from_the_peer_is_unavailable_not_a_crash(sock_path: Path) -> None:
    fake = FakeSystemd(sock_path, behaviour=lambda call: "garbage")
    try:
        with pytest.raises(SystemdUnavailable, match="not a D-Bus peer"):
            SystemdClient(str(sock_path), timeout_s=2).set_unit_properties("x.slice", [])
    finally:
        fake.close()


def test_a_hang_costs_at_most_the_timeout(sock_path: Path) -> None:
    fake = FakeSystemd(sock_path, behaviour=lambda call: "hang")
    client = SystemdClient(str(sock_path), timeout_s=0.3)
    try:
        start = time.monotonic()
        with pytest.raises(SystemdUnavailable, match="no answer within 0.3 s"):
            client.set_unit_properties("x.slice", [])
        assert time.monotonic() - start < 1.0
    finally:
        fake.close()


def test_a_missing_socket_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SystemdUnavailable, match="ENOENT"):
        SystemdClient(str(tmp_path / "none.sock"), timeout_s=0.5).set_unit_properties("x.slice", [])


def test_a_rejected_authentication_is_an_error(sock_path: Path) -> None:
    fake = FakeSystemd(sock_path, reject_auth=True)
    try:
        with pytest.raises(SystemdCallError, match="REJECTED"):
            SystemdClient(str(sock_path), timeout_s=1).set_unit_properties("x.slice", [])
    finally:
        fake.close()


def test_a_connection_closed_by_systemd_is_reopened_once(sock_path: Path) -> None:
    seen: list[Call] = []

    def close_the_first(call: Call) -> str:
        seen.append(call)
        return "close" if len(seen) == 1 else "ok"

    fake = FakeSystemd(sock_path, behaviour=close_the_first)
    client = SystemdClient(str(sock_path), timeout_s=2)
    try:
        client.set_unit_properties("a.slice", [])  # closed without a reply: retried on a fresh connection
        client.set_unit_properties("b.slice", [])
    finally:
        fake.close()
    assert [c.body[0] for c in seen] == ["a.slice", "a.slice", "b.slice"]
    assert fake.connections == 2


def test_a_systemd_that_went_away_is_unavailable_and_the_next_call_reconnects(sock_path: Path) -> None:
    fake = FakeSystemd(sock_path)
    client = SystemdClient(str(sock_path), timeout_s=1)
    client.set_unit_properties("a.slice", [])
    fake.close()
    sock_path.unlink()
    with pytest.raises(SystemdUnavailable):
        client.set_unit_properties("a.slice", [])
    again = FakeSystemd(sock_path)
    try:
        client.set_unit_properties("a.slice", [])
    finally:
        again.close()
    assert len(again.calls) == 1
