"""The debug API's read-only views as JSON on the metrics port (`GET /debug/v1/<View>`), what `kubectl
hookserver` reads through the apiserver's pods/proxy: the same documents as the socket, errors as HTTP statuses."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookserver.observability import HealthState, MetricsHttpServer
from tests.debug.conftest import ServerFactory


def _get(port: int, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:  # noqa: S310
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def port(make_server: ServerFactory) -> Any:
    debug = make_server(info=lambda: {"mode": "test", "informer": {"started_at": 1795649112.42}})
    http = MetricsHttpServer("127.0.0.1:0", CollectorRegistry(), HealthState(), debug_views=debug.http_view)
    http.start()
    try:
        yield http.port
    finally:
        http.stop()


def test_views_are_the_socket_documents(port: int, make_server: ServerFactory) -> None:
    status, doc = _get(port, "/debug/v1/Status")
    assert status == 200 and doc["pods"] == 3 and doc["mode"] == "test"
    assert doc["informer"]["started_at"].endswith("Z")  # the same units as hookctl gets
    status, doc = _get(port, "/debug/v1/Explain?namespace=batch&name=be-job-0")
    assert status == 200 and doc["pod"]["name"] == "be-job-0"
    status, rows = _get(port, "/debug/v1/Events?limit=2")
    assert status == 200 and len(rows) == 2


def test_errors_are_http_statuses(port: int) -> None:
    assert _get(port, "/debug/v1/Explain?namespace=batch&name=nope")[0] == 404
    assert _get(port, "/debug/v1/Explain?namespace=Bad_NS&name=x")[0] == 400
    assert _get(port, "/debug/v1/Events?limit=-1")[0] == 400
    status, doc = _get(port, "/debug/v1/Qos")
    assert status == 503 and "QoS reconcilers are not running" in doc["error"]
    status, doc = _get(port, "/debug/v1/QosPlan")
    assert status == 404 and "known:" in doc["error"]


def test_without_views_the_path_is_not_served() -> None:
    http = MetricsHttpServer("127.0.0.1:0", CollectorRegistry(), HealthState())
    http.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{http.port}/debug/v1/Status", timeout=10)  # noqa: S310
        assert err.value.code == 404
    finally:
        http.stop()
