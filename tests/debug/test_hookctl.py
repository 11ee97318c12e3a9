"""hookctl against a real debug server on a unix socket, every command in table and JSON mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookserver.debug import DebugCallError, DebugClient
from tests.debug.conftest import (
    BAD_UID,
    BE_UID,
    BE_WRITE_CGROUPFS,
    BE_WRITE_SYSTEMD,
    OTHER_WRITE,
    CtlResult,
    ServerFactory,
    World,
)

REPO = Path(__file__).resolve().parents[2]


def _table(out: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[0].split(), [line.split() for line in lines[1:]]


# -- status ---------------------------------------------------------------------------------------
def test_status_counts_the_store_and_merges_info(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server(info=lambda: {"version": "9.9.9-test", "stages": ["PreRunPodSandbox"]})
    table: CtlResult = ctl("--socket", server.socket_path, "status", "-v")
    assert table.rc == 0, table.err
    assert "pods: 3" in table.out and "containers: 2" in table.out
    assert "version: 9.9.9-test" in table.out and "stages: PreRunPodSandbox" in table.out
    doc = ctl("--socket", server.socket_path, "status", "-o", "json").json()
    assert doc["pods"] == 3 and doc["containers"] == 2
    assert doc["recent_hook_calls"] == 5 and doc["recent_hook_failures"] == 1
    assert doc["recent_writes"] == 3 and doc["recent_write_failures"] == 1
    assert doc["version"] == "9.9.9-test"


def test_status_shows_nri_from_its_provider_and_survives_a_failing_info(make_server: ServerFactory, ctl: Any) -> None:
    def broken_info() -> dict[str, Any]:
        raise RuntimeError("settings\nunreadable")

    server = make_server(providers={"nri": lambda args: {"state": "connected", "reconnects": 2}}, info=broken_info)
    doc = ctl("--socket", server.socket_path, "-o", "json", "status").json()
    assert doc["nri"] == {"state": "connected", "reconnects": 2}
    assert doc["info_error"] == "RuntimeError: settings unreadable"
    assert doc["pods"] == 3


# -- pods -----------------------------------------------------------------------------------------
def test_pods_table_and_json(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    table = ctl("--socket", server.socket_path, "pods")
    assert table.rc == 0
    header, rows = _table(table.out)
    assert header == ["POD", "UID", "QOS", "SOURCE", "SANDBOX", "CONTAINERS", "AGE"]
    assert [r[0] for r in rows] == ["batch/be-job-0", "batch/broken", "web/frontend-1"]
    doc = ctl("--socket", server.socket_path, "pods", "-o", "json").json()
    by_pod = {row["pod"]: row for row in doc}
    assert by_pod["batch/be-job-0"]["uid"] == BE_UID
    assert by_pod["batch/be-job-0"]["qos"] == "BE"
    assert by_pod["batch/be-job-0"]["containers"] == 1
    assert by_pod["web/frontend-1"]["qos"] == "LS" and by_pod["web/frontend-1"]["sandbox"] == "sandbox-ls"
    assert by_pod["batch/broken"]["containers"] == 0


def test_json_output_is_pretty_with_sorted_keys(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    out = ctl("--socket", server.socket_path, "-o", "json", "pods").out
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"


# -- explain --------------------------------------------------------------------------------------
def test_explain_be_pod_names_plugin_values_reason_and_writes(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    table = ctl("--socket", server.socket_path, "explain", "batch/be-job-0")
    assert table.rc == 0, table.err
    assert "plugin: BatchResource" in table.out
    assert "cpu_shares: 2048" in table.out and "cpu_quota_us: 400000" in table.out
    assert "shares from sum of batch-cpu requests 2000m -> 2048" in table.out
    assert BE_WRITE_CGROUPFS in table.out and BE_WRITE_SYSTEMD in table.out
    assert OTHER_WRITE not in table.out

    doc = ctl("--socket", server.socket_path, "explain", "batch/be-job-0", "-o", "json").json()
    assert doc["pod"]["uid"] == BE_UID and doc["pod"]["qos_class"] == "BE" and doc["pod"]["source"] == "proxy"
    assert doc["pod"]["cgroup_parent"] == f"/kubepods/besteffort/pod{BE_UID}"
    assert doc["pod"]["containers"] == ["main"]
    groups = {(g["stage"], g["container"]): g["hooks"] for g in doc["decisions"]}
    assert set(groups) == {("PreRunPodSandbox", ""), ("PreCreateContainer", "main")}
    pod_hook = groups[("PreRunPodSandbox", "")][0]
    assert pod_hook["plugin"] == "BatchResource" and pod_hook["applied"] is True
    assert pod_hook["values"] == {"cpu_shares": 2048, "cpu_quota_us": 400000, "memory_limit_bytes": 2 * 1024**3}
    assert "quota_rule" in pod_hook["inputs"] and pod_hook["error"] == ""
    container_hook = groups[("PreCreateContainer", "main")][0]
    assert container_hook["door"] == "nri" and container_hook["values"]["cpu_shares"] == 2048
    assert {w["path"] for w in doc["writes"]} == {BE_WRITE_CGROUPFS, BE_WRITE_SYSTEMD}
    assert [e["rpc"] for e in doc["events"]] == ["PreRunPodSandboxHook", "CreateContainer"]


def test_explain_non_be_pod_says_why_nothing_was_applied(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    doc = ctl("--socket", server.socket_path, "explain", "web/frontend-1", "-o", "json").json()
    hooks = [h for g in doc["decisions"] for h in g["hooks"]]
    assert hooks and all(not h["applied"] and h["reason"] == "not a BE pod" for h in hooks)
    assert hooks[0]["inputs"] == {"qos_class": "LS"}
    assert doc["writes"] == []
    table = ctl("--socket", server.socket_path, "explain", "web/frontend-1")
    assert "applied: false" in table.out and "reason: not a BE pod" in table.out


def test_explain_bad_annotation_pod_shows_the_error(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    doc = ctl("--socket", server.socket_path, "explain", "batch/broken", "-o", "json").json()
    hook = doc["decisions"][0]["hooks"][0]
    assert hook["applied"] is False and hook["values"] == {}
    assert hook["error"].startswith("annotations[node.koordinator.sh/extended-resource-spec]: not valid JSON")
    assert doc["events"][0]["result"] == "error"
    assert doc["pod"]["uid"] == BAD_UID
    table = ctl("--socket", server.socket_path, "explain", "batch/broken")
    assert "error: annotations[node.koordinator.sh/extended-resource-spec]: not valid JSON" in table.out


def test_explain_unknown_pod_is_a_one_line_error(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    result = ctl("--socket", server.socket_path, "explain", "batch/nope")
    assert result.rc == 1 and result.out == ""
    assert result.err.count("\n") == 1
    assert "no hook decisions recorded for pod batch/nope" in result.err


@pytest.mark.parametrize("key", ["nope", "/name", "ns/", "a/b/c", "NS/x", "ns/under_score", ""])
def test_explain_malformed_key_fails_before_dialing(key: str, ctl: Any, tmp_path: Path) -> None:
    # The socket does not exist: a usage error must be reported without trying to connect.
    result = ctl("--socket", str(tmp_path / "absent.sock"), "explain", key)
    assert result.rc == 2 and result.out == ""
    assert "hookctl: error:" in result.err and "does not exist" not in result.err


# -- events and writes ----------------------------------------------------------------------------
def test_events_table_and_json(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    header, rows = _table(ctl("--socket", server.socket_path, "events").out)
    assert header == ["TIME", "DOOR", "RPC", "POD", "CONTAINER", "LATENCY_MS", "RESULT", "ERROR", "DETAIL"]
    assert len(rows) == 5
    doc = ctl("--socket", server.socket_path, "events", "-o", "json").json()
    assert [e["pod"] for e in doc] == [
        "batch/be-job-0", "web/frontend-1", "batch/broken", "batch/be-job-0", "web/frontend-1",
    ]
    assert all(e["latency_ms"] >= 0 for e in doc)
    broken = [e for e in doc if e["pod"] == "batch/broken"]
    assert broken[0]["result"] == "error" and "not valid JSON" in broken[0]["error"]
    limited = ctl("--socket", server.socket_path, "events", "--limit", "2", "-o", "json").json()
    assert limited == doc[-2:]


def test_writes_table_json_limit_and_filter(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    header, rows = _table(ctl("--socket", server.socket_path, "writes").out)
    assert header[:6] == ["TIME", "PATH", "VALUE", "RESULT", "OWNER", "REASON"]
    assert len(rows) == 3
    doc = ctl("--socket", server.socket_path, "writes", "-o", "json").json()
    assert [w["result"] for w in doc] == ["ok", "ok", "error"]
    assert doc[2]["error"] == "Invalid argument" and doc[2]["owner"] == "cpusuppress"
    memory = ctl("--socket", server.socket_path, "writes", "--path", "memory.limit", "-o", "json").json()
    assert [w["path"] for w in memory] == [BE_WRITE_SYSTEMD]
    last = ctl("--socket", server.socket_path, "writes", "--limit", "1", "-o", "json").json()
    assert [w["path"] for w in last] == [OTHER_WRITE]


# -- provider-backed commands ----------------------------------------------------------------------
def test_provider_commands_return_provider_data(make_server: ServerFactory, ctl: Any) -> None:
    seen: dict[str, dict[str, Any]] = {}

    def provider(name: str, reply: Any) -> Any:
        def call(args: dict[str, Any]) -> Any:
            seen[name] = args
            return reply

        return call

    server = make_server(
        providers={
            "slo": provider("slo", {"cpu_suppress": {"enable": True, "source": "file:/etc/slo.yaml"}}),
            "top": provider("top", [{"pod": "batch/be-job-0", "cpu_milli": 250, "cpu_p95_milli": 900}]),
            "metrics": provider("metrics", [{"series": "node_cpu", "value": 1.5}]),
            "nri": provider("nri", {"state": "connected", "runtime": "containerd", "events": ["CreateContainer"]}),
        }
    )
    sock = server.socket_path
    assert ctl("--socket", sock, "slo", "-o", "json").json()["cpu_suppress"]["source"] == "file:/etc/slo.yaml"
    assert "source: file:/etc/slo.yaml" in ctl("--socket", sock, "slo").out
    assert ctl("--socket", sock, "top", "--window", "60", "-o", "json").json()[0]["cpu_p95_milli"] == 900
    assert seen["top"] == {"window_seconds": 60}
    ctl("--socket", sock, "top")
    assert seen["top"] == {"window_seconds": 300}
    header, rows = _table(ctl("--socket", sock, "metrics", "node_cpu{mode='user'}").out)
    assert header == ["SERIES", "VALUE"] and rows == [["node_cpu", "1.5"]]
    assert seen["metrics"] == {"query": "node_cpu{mode='user'}"}
    nri = ctl("--socket", sock, "nri")
    assert "runtime: containerd" in nri.out and "events: CreateContainer" in nri.out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["slo"], "no NodeSLO source is running"),
        (["top"], "the collectors are not running"),
        (["metrics", "cpu"], "the time-series store is not running"),
        (["nri"], "the nri front door is not running"),
        (["predict", "--node"], "the predictor is not running"),
        (["reclaimable"], "the predictor is not running"),
        (["nodemetric"], "NodeMetric reporting is not running"),
        (["qos"], "the QoS reconcilers are not running"),
        (["qos", "plan", "cpusuppress"], "the QoS reconcilers are not running"),
    ],
)
def test_provider_commands_without_provider_fail_cleanly(
    make_server: ServerFactory, ctl: Any, argv: list[str], message: str
) -> None:
    server = make_server()
    result = ctl("--socket", server.socket_path, *argv)
    assert result.rc == 1 and result.out == ""
    assert result.err.startswith(f"hookctl: error: {message}") and result.err.count("\n") == 1


def test_provider_that_raises_is_a_clean_error(make_server: ServerFactory, ctl: Any) -> None:
    def boom(args: dict[str, Any]) -> Any:
        raise KeyError("window")

    server = make_server(providers={"top": boom})
    result = ctl("--socket", server.socket_path, "top")
    assert result.rc == 1
    assert result.err.strip() == "hookctl: error: Top failed inside hookserver: KeyError: 'window'"


def test_later_provider_commands_pass_their_arguments(make_server: ServerFactory, ctl: Any, tmp_path: Path) -> None:
    seen: dict[str, dict[str, Any]] = {}

    def recorder(name: str) -> Any:
        def call(args: dict[str, Any]) -> Any:
            seen[name] = args
            return {"answered_by": name}

        return call

    names = ("predict", "reclaimable", "nodemetric", "qos", "qos_plan", "version")
    server = make_server(providers={n: recorder(n) for n in names})
    sock = server.socket_path
    assert ctl("--socket", sock, "predict", "default/web-0", "-o", "json").json() == {"answered_by": "predict"}
    assert seen["predict"] == {"namespace": "default", "name": "web-0", "priority": "", "node": False, "system": False}
    ctl("--socket", sock, "predict", "--priority", "koord-prod")
    assert seen["predict"]["priority"] == "koord-prod" and seen["predict"]["name"] == ""
    ctl("--socket", sock, "predict", "--system")
    assert seen["predict"]["system"] is True
    for command, name in (("reclaimable", "reclaimable"), ("nodemetric", "nodemetric"), ("qos", "qos"), ("version", "version")):
        assert f"answered_by: {name}" in ctl("--socket", sock, command).out
    slo = tmp_path / "slo.yaml"
    slo.write_text("cpuSuppressThresholdPercent: 50\n")
    assert ctl("--socket", sock, "qos", "plan", "cpusuppress", "--slo", str(slo)).rc == 0
    assert seen["qos_plan"] == {
        "name": "cpusuppress", "slo_document": "cpuSuppressThresholdPercent: 50\n", "slo_source": str(slo)
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "default/web-0", "--node"], "give a pod or one of --priority/--node/--system"),
        (["qos", "plan", "cpusuppress", "--slo", "/nonexistent/slo.yaml"], "--slo: cannot read /nonexistent/slo.yaml"),
    ],
)
def test_later_provider_commands_refuse_bad_arguments_before_dialing(
    ctl: Any, tmp_path: Path, argv: list[str], message: str
) -> None:
    result = ctl("--socket", str(tmp_path / "absent.sock"), *argv)
    assert result.rc == 2 and message in result.err and result.err.count("\n") == 1


def test_predict_rpc_refuses_two_selectors(make_server: ServerFactory) -> None:
    server = make_server(providers={"predict": lambda args: {}})
    with DebugClient(server.socket_path) as client:
        with pytest.raises(DebugCallError) as info:
            client.predict(priority="koord-prod", node=True)
    assert info.value.code == "INVALID_ARGUMENT"


# -- connection failures --------------------------------------------------------------------------
def test_missing_socket_is_a_one_line_error(ctl: Any, tmp_path: Path) -> None:
    result = ctl("--socket", str(tmp_path / "nothing.sock"), "status")
    assert result.rc == 1 and result.out == ""
    assert result.err.strip() == (
        f"hookctl: error: debug socket {tmp_path / 'nothing.sock'} does not exist "
        "(is hookserver running? use --socket or HOOKCTL_SOCKET to point elsewhere)"
    )


def test_refused_socket_is_a_one_line_error(ctl: Any, tmp_path: Path) -> None:
    import socket

    path = tmp_path / "dead.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))  # bound, never listening: connect() is refused
    try:
        result = ctl("--socket", str(path), "pods")
    finally:
        sock.close()
    assert result.rc == 1 and result.out == ""
    assert result.err.count("\n") == 1
    assert result.err.startswith(f"hookctl: error: cannot reach hookserver at {path}")
    assert "refused" in result.err


def test_socket_from_environment(make_server: ServerFactory, ctl: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = make_server()
    monkeypatch.setenv("HOOKCTL_SOCKET", server.socket_path)
    assert ctl("pods", "-o", "json").rc == 0
    monkeypatch.setenv("HOOKCTL_SOCKET", server.socket_path + ".missing")
    assert ctl("pods").rc == 1
    assert ctl("--socket", server.socket_path, "pods").rc == 0  # the flag wins over the environment


def test_usage_errors_return_2(ctl: Any) -> None:
    assert ctl().rc == 2
    assert ctl("frobnicate").rc == 2
    assert ctl("pods", "-o", "yaml").rc == 2
    assert ctl("events", "--limit", "-1").rc == 2


def test_hookctl_as_a_process_prints_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOOKCTL_SOCKET": str(tmp_path / "gone.sock")}
    proc = subprocess.run(
        [sys.executable, "-m", "hookserver.cli.hookctl", "status"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=30,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert "does not exist" in proc.stderr


def test_explain_after_pod_recreated_shows_the_current_uid(world: World, make_server: ServerFactory, ctl: Any) -> None:
    from hookserver.dispatch import HookDispatcher
    from hookserver.hooks import HookRegistry, PodRequest, Stage
    from hookserver.hooks.plugins import BatchResourcePlugin

    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=world.store, executor=None)
    world.store.remove_pod(BAD_UID)
    dispatcher.dispatch_pod(
        Stage.PRE_RUN_POD_SANDBOX,
        PodRequest("batch", "broken", "new-uid-2", labels={"koordinator.sh/qosClass": "LS"}),
        door="proxy", rpc="PreRunPodSandboxHook",
    )
    server = make_server()
    doc = ctl("--socket", server.socket_path, "explain", "batch/broken", "-o", "json").json()
    assert doc["pod"]["uid"] == "new-uid-2"
    hooks = [h for g in doc["decisions"] for h in g["hooks"]]
    assert len(hooks) == 1 and hooks[0]["reason"] == "not a BE pod" and hooks[0]["error"] == ""
