"""The plugin's view of the cluster: load the kubeconfig as kubectl does, find a pod's node and the agent
pod on a node, and run a command in the agent's container (pod `exec`, websocket v4/v5 channel protocol)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.stream import stream

from hookserver.errors import ConfigError, HookServerError

__all__ = ["AGENT_CONTAINER", "AGENT_LABEL", "AGENT_NAMESPACE", "AgentNotFound", "AgentPod", "Cluster", "ExecResult",
           "load_configuration"]

AGENT_NAMESPACE = "hookserver-system"  # deploy/hookserver.yaml
AGENT_LABEL = "app=hookserver"
AGENT_CONTAINER = "hookserver"


class AgentNotFound(HookServerError):
    """No agent pod (or no such pod/node) where the plugin looked: the message says where and what to check."""


@dataclass(frozen=True, slots=True)
class AgentPod:
    namespace: str
    name: str
    node: str
    phase: str
    ready: bool
    image: str
    metrics_port: int = 9316

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ExecResult:
    stdout: str
    stderr: str
    rc: int


def load_configuration(kubeconfig: str = "", context: str = "") -> k8s_client.Configuration:
    """As kubectl: `--kubeconfig`, else $KUBECONFIG (a `:`-separated list is merged), else ~/.kube/config;
    `--context` picks a context; with no kubeconfig file at all, the in-cluster service account."""
    configuration = k8s_client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG", "") or os.path.expanduser("~/.kube/config")
    try:
        if kubeconfig or any(os.path.exists(p) for p in path.split(os.pathsep) if p):
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context or None, client_configuration=configuration, persist_config=False)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"kubeconfig {path}: {exc}") from exc
    return configuration


def _ready(pod: Any) -> bool:
    for cond in (pod.status.conditions or []) if pod.status is not None else []:
        if cond.type == "Ready":
            return bool(cond.status == "True")
    return False


def _agent(pod: Any) -> AgentPod:
    containers = pod.spec.containers or []
    image = next((c.image for c in containers if c.name == AGENT_CONTAINER), containers[0].image if containers else "")
    port = next((p.container_port for c in containers for p in (c.ports or []) if p.name == "metrics"), 9316)
    return AgentPod(pod.metadata.namespace, pod.metadata.name, pod.spec.node_name or "",
                    (pod.status.phase if pod.status is not None else "") or "", _ready(pod), image or "", int(port))


def _labels_match(labels: Mapping[str, str] | None, selector: str) -> bool:
    wanted = dict(term.split("=", 1) for term in selector.split(",") if "=" in term)
    return all((labels or {}).get(k) == v for k, v in wanted.items())


class Cluster:
    """Calls through one kubernetes ApiClient. Every apiserver error becomes AgentNotFound or HookServerError
    with a sentence an operator can act on (never a traceback)."""

    def __init__(self, configuration: k8s_client.Configuration, *, namespace: str = AGENT_NAMESPACE,
                 selector: str = AGENT_LABEL, container: str = AGENT_CONTAINER, timeout_s: float = 30.0) -> None:
        self.api = k8s_client.CoreV1Api(k8s_client.ApiClient(configuration))
        self.namespace = namespace
        self.selector = selector
        self.container = container
        self.timeout_s = timeout_s

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, _request_timeout=self.timeout_s, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                raise AgentNotFound(f"{what}: not found") from exc
            if exc.status == 403:
                raise HookServerError(f"{what}: forbidden (RBAC): {exc.reason}") from exc
            raise HookServerError(f"{what}: HTTP {exc.status} {exc.reason}") from exc
        except Exception as exc:  # noqa: BLE001 - urllib3/socket failures: one line for the operator
            raise HookServerError(f"{what}: {type(exc).__name__}: {exc}") from exc

    def node_of(self, namespace: str, name: str) -> str:
        pod = self._call(f"pod {namespace}/{name}", self.api.read_namespaced_pod, name, namespace)
        node = pod.spec.node_name if pod.spec is not None else ""
        if not node:
            raise AgentNotFound(f"pod {namespace}/{name} is not scheduled to a node yet")
        return str(node)

    def agents(self, node: str = "") -> list[AgentPod]:
        """The agent pods (on `node` only when given), by node."""
        kwargs: dict[str, Any] = {"label_selector": self.selector}
        if node:
            kwargs["field_selector"] = f"spec.nodeName={node}"
        pods = self._call(f"agent pods in namespace {self.namespace}", self.api.list_namespaced_pod, self.namespace,
                          **kwargs)
        found = [_agent(p) for p in pods.items if _labels_match(p.metadata.labels, self.selector)
                 and (not node or p.spec.node_name == node) and not p.metadata.deletion_timestamp]
        return sorted(found, key=lambda a: (a.node, a.name))

    def agent_on(self, node: str) -> AgentPod:
        found = self.agents(node)
        running = [a for a in found if a.phase == "Running"]
        if not running:
            what = f"{len(found)} not running ({', '.join(f'{a.name}: {a.phase}' for a in found)})" if found else "none"
            raise AgentNotFound(f"no running hookserver agent on node {node} (pods labelled {self.selector} in "
                                f"namespace {self.namespace}: {what}); is the DaemonSet deployed and the node "
                                "not excluded by its tolerations/selectors?")
        return running[0]

    def proxy_get(self, agent: AgentPod, path: str, query: Mapping[str, str]) -> tuple[int, str]:
        """GET `path` on the agent's metrics port through the apiserver's pods/proxy subresource: (HTTP status,
        body). The apiserver dials the pod itself (no kubelet in the way); RBAC `get pods/proxy`."""
        client = self.api.api_client
        resource = f"/api/v1/namespaces/{agent.namespace}/pods/{agent.name}:{agent.metrics_port}/proxy{path}"
        what = f"pods/proxy to {agent.key}:{agent.metrics_port}{path}"
        try:
            method, url, headers, _body, _post = client.param_serialize(
                "GET", resource, query_params=list(query.items()), auth_settings=["BearerToken"])
            response = client.call_api(method, url, headers, _request_timeout=self.timeout_s)
            response.read()
        except Exception as exc:  # noqa: BLE001 - urllib3/socket failures: one line
            raise HookServerError(f"{what}: {type(exc).__name__}: {exc}") from exc
        data = response.data
        return int(response.status), data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")

    def exec(self, agent: AgentPod, command: Sequence[str]) -> ExecResult:
        """Run `command` in the agent's container (pod exec) and return its output and exit status."""
        what = f"exec in {agent.key}"
        try:
            resp = stream(self.api.connect_get_namespaced_pod_exec, agent.name, agent.namespace,
                          container=self.container, command=list(command), stderr=True, stdin=False, stdout=True,
                          tty=False, _preload_content=False, _request_timeout=self.timeout_s)
        except ApiException as exc:
            if exc.status == 403:
                raise HookServerError(f"{what}: forbidden: the plugin needs `create pods/exec` in namespace "
                                      f"{agent.namespace} ({exc.reason})") from exc
            raise HookServerError(f"{what}: HTTP {exc.status} {exc.reason}") from exc
        except Exception as exc:  # noqa: BLE001 - websocket/socket failures: one line
            raise HookServerError(f"{what}: {type(exc).__name__}: {exc}") from exc
        try:
            resp.run_forever(timeout=self.timeout_s)
            out, err = resp.read_stdout() or "", resp.read_stderr() or ""
            if resp.is_open():
                raise HookServerError(f"{what}: no answer within {self.timeout_s:g} s")
            try:
                rc = resp.returncode  # from the error channel's Status
            except (TypeError, KeyError, ValueError, IndexError):
                rc = None  # closed without a Status: the exec did not finish
        finally:
            resp.close()
        return ExecResult(str(out), str(err), int(rc if rc is not None else 1))
