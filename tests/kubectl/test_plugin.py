"""The kubectl plugin against the fake apiserver (pod exec over a real websocket, v4 channel protocol) and a
real agent debug server: `explain NS/POD` finds the pod's node and the agent there and answers exactly as
`hookctl explain` does; node commands, `-o json`, exit statuses, kubeconfig/context as kubectl takes them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookserver.cli.kubectl_hookserver import main
from tests.debug.conftest import ServerFactory, make_server, world  # noqa: F401 - fixtures
from tests.informer.fake_apiserver import FakeApiServer, make_pod

ROOT = Path(__file__).resolve().parents[2]


def _agent(name: str, node: str, *, phase: str = "Running") -> dict[str, Any]:
    pod = make_pod(name, node=node, namespace="hookserver-system", phase=phase)
    pod["metadata"]["labels"] = {"app": "hookserver"}
    pod["spec"]["containers"] = [{"name": "hookserver", "image": "hookserver:0.1.0"}]
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


@pytest.fixture
def cluster(make_server: ServerFactory, tmp_path: Path) -> Iterator[tuple[FakeApiServer, str, list[Any]]]:  # noqa: F811
    agent_socket = make_server().socket_path
    fake = FakeApiServer(token="t0ken").start()
    calls: list[Any] = []

    def run(namespace: str, pod: str, container: str, command: list[str]) -> tuple[bytes, bytes, int]:
        calls.append((namespace, pod, container, command))
        assert command[0] == "hookctl"
        done = subprocess.run([sys.executable, "-m", "hookserver.cli.hookctl", "--socket", agent_socket, *command[1:]],
                              capture_output=True, timeout=60)
        return done.stdout, done.stderr, done.returncode

    fake.exec_run = run
    fake.apply("pods", make_pod("be-job-0", node="node-a", namespace="batch"))
    fake.apply("pods", make_pod("pending", node="", namespace="batch"))
    fake.apply("pods", _agent("hookserver-aaaaa", "node-a"))
    fake.apply("pods", _agent("hookserver-bbbbb", "node-b"))
    fake.apply("pods", _agent("hookserver-ccccc", "node-c", phase="Pending"))
    try:
        yield fake, fake.kubeconfig(str(tmp_path / "kubeconfig")), calls
        # the socket the plugin's hookctl talks to is the agent's
    finally:
        fake.kill()


def _hookctl(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookserver.cli.hookctl", "--socket", socket, *args],
                          capture_output=True, text=True, timeout=60)


def test_explain_finds_the_node_and_the_agent_and_answers_as_hookctl(
    cluster: tuple[FakeApiServer, str, list[Any]], make_server: ServerFactory,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, kubeconfig, calls = cluster
    assert main(["--kubeconfig", kubeconfig, "explain", "batch/be-job-0"]) == 0
    out = capsys.readouterr().out
    assert calls[-1][:3] == ("hookserver-system", "hookserver-aaaaa", "hookserver")
    assert calls[-1][3] == ["hookctl", "explain", "batch/be-job-0"]
    assert "BatchResource" in out and "be-job-0" in out
    assert main(["--kubeconfig", kubeconfig, "explain", "batch/be-job-0", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pod"]["name"] == "be-job-0" and doc["decisions"]


def test_node_commands_and_json(cluster: tuple[FakeApiServer, str, list[Any]], capsys: pytest.CaptureFixture[str]) -> None:
    _fake, kubeconfig, calls = cluster
    assert main(["--kubeconfig", kubeconfig, "-o", "json", "status", "node-b"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pods"] == 3 and calls[-1][1] == "hookserver-bbbbb"
    assert main(["--kubeconfig", kubeconfig, "status", "node-a"]) == 0
    assert capsys.readouterr().out.startswith("hookserver ")  # hookctl's one-screen summary
    assert main(["--kubeconfig", kubeconfig, "events", "node-a", "--limit", "2"]) == 0
    assert calls[-1][3] == ["hookctl", "events", "--limit", "2"]
    assert main(["--kubeconfig", kubeconfig, "hookctl", "node-a", "--", "pods"]) == 0
    assert "be-job-0" in capsys.readouterr().out


def test_hookctls_exit_status_and_errors_come_through(cluster: tuple[FakeApiServer, str, list[Any]],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _fake, kubeconfig, _calls = cluster
    assert main(["--kubeconfig", kubeconfig, "explain", "batch/pending"]) == 1
    assert "not scheduled" in capsys.readouterr().err
    assert main(["--kubeconfig", kubeconfig, "explain", "batch/nope"]) == 1
    assert "batch/nope: not found" in capsys.readouterr().err
    assert main(["--kubeconfig", kubeconfig, "status", "node-c"]) == 1  # the agent there is Pending
    err = capsys.readouterr().err
    assert "no running hookserver agent on node node-c" in err and "Pending" in err
    assert main(["--kubeconfig", kubeconfig, "qos", "node-a"]) == 1  # the agent's hookctl: no qos provider
    assert "hookctl: error:" in capsys.readouterr().err
    assert main(["--kubeconfig", kubeconfig, "explain", "not-a-key"]) == 2


def test_agents_and_kubeconfig_from_the_environment_with_a_context(
    cluster: tuple[FakeApiServer, str, list[Any]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _fake, kubeconfig, _calls = cluster
    doc = json.loads(Path(kubeconfig).read_text())
    doc["contexts"].append({"name": "other", "context": {"cluster": "nowhere", "user": "fake"}})
    doc["clusters"].append({"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}})
    doc["current-context"] = "other"
    merged = tmp_path / "merged"
    merged.write_text(json.dumps(doc))
    monkeypatch.setenv("KUBECONFIG", str(merged))
    assert main(["--context", "fake", "agents", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["node"], r["pod"], r["ready"]) for r in rows] == [
        ("node-a", "hookserver-system/hookserver-aaaaa", True), ("node-b", "hookserver-system/hookserver-bbbbb", True),
        ("node-c", "hookserver-system/hookserver-ccccc", True)]
    assert main(["agents", "--request-timeout", "2"]) == 1  # the current context's server is not there
    assert "kubectl-hookserver: error:" in capsys.readouterr().err


def test_the_plugin_is_a_console_script_kubectl_finds_on_path() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'kubectl-hookserver = "hookserver.cli.kubectl_hookserver:main"' in text
    exe = Path(sys.executable).parent / "kubectl-hookserver"
    assert exe.exists() and os.access(exe, os.X_OK)
    done = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "explain" in done.stdout


@pytest.fixture
def proxied(make_server: ServerFactory, tmp_path: Path) -> Iterator[tuple[FakeApiServer, str, list[Any], str]]:  # noqa: F811
    """An apiserver that cannot exec (500 "error dialing backend", as the kube-e2e harness's) but proxies to
    the agent's metrics port, where the agent serves its debug views."""
    agent = make_server()
    fake = FakeApiServer(token="t0ken").start()
    calls: list[Any] = []

    def proxy(namespace: str, pod: str, port: int, path: str, query: dict[str, str]) -> tuple[int, str]:
        calls.append((namespace, pod, port, path, query))
        assert path.startswith("/debug/v1/")
        return agent.http_view(path.removeprefix("/debug/v1/"), query)

    fake.proxy_run = proxy
    fake.apply("pods", make_pod("be-job-0", node="node-a", namespace="batch"))
    fake.apply("pods", _agent("hookserver-aaaaa", "node-a"))
    try:
        yield fake, fake.kubeconfig(str(tmp_path / "kubeconfig")), calls, agent.socket_path
    finally:
        fake.kill()


def _ageless(text: str) -> str:
    """`age: 1s` and `age: 0s` alike (a loaded machine crossed the second between two renderings)."""
    return re.sub(r"\bage: \d+(\.\d+)?[smhd]\b", "age: <n>", text)


def test_where_exec_fails_the_views_come_through_pods_proxy(
    proxied: tuple[FakeApiServer, str, list[Any], str], capsys: pytest.CaptureFixture[str],
) -> None:
    _fake, kubeconfig, calls, socket = proxied
    assert main(["--kubeconfig", kubeconfig, "explain", "batch/be-job-0"]) == 0
    # rendered alike; the two renderings are a moment apart, so a relative age may tick over between them
    assert _ageless(capsys.readouterr().out) == _ageless(_hookctl(socket, "explain", "batch/be-job-0").stdout)
    assert calls[-1] == ("hookserver-system", "hookserver-aaaaa", 9316, "/debug/v1/Explain",
                         {"namespace": "batch", "name": "be-job-0"})
    assert main(["--kubeconfig", kubeconfig, "--via", "proxy", "status", "node-a", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pods"] == 3
    assert main(["--kubeconfig", kubeconfig, "events", "node-a", "--limit", "2", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert main(["--kubeconfig", kubeconfig, "--via", "exec", "status", "node-a"]) == 1
    assert "error dialing backend" in capsys.readouterr().err
    assert main(["--kubeconfig", kubeconfig, "qos", "node-a"]) == 1  # the agent's own error, through the proxy
    assert "QoS reconcilers are not running" in capsys.readouterr().err
    assert main(["--kubeconfig", kubeconfig, "hookctl", "node-a", "--", "pods"]) == 1  # raw hookctl: exec only
    assert "error dialing backend" in capsys.readouterr().err
    assert main(["--kubeconfig", kubeconfig, "--via", "proxy", "hookctl", "node-a", "--", "pods"]) == 1
    assert "needs pod exec" in capsys.readouterr().err


def test_an_agent_with_its_http_views_off_gets_a_clear_line(
    proxied: tuple[FakeApiServer, str, list[Any], str], capsys: pytest.CaptureFixture[str],
) -> None:
    """debug.http_views is off by default: the agent's metrics port answers 404 under /debug/v1/, and the plugin
    says which setting that is instead of printing the 404 page."""
    fake, kubeconfig, _calls, _socket = proxied
    fake.proxy_run = lambda *_args: (404, "not found: /debug/v1/Status (try /metrics, /healthz, /readyz)\n")
    assert main(["--kubeconfig", kubeconfig, "--via", "proxy", "status", "node-a"]) == 1
    err = capsys.readouterr().err
    assert "debug.http_views is off" in err and "--via exec" in err
