"""`kubectl hookserver`: the kubectl plugin (installed as `kubectl-hookserver` on PATH).

    kubectl hookserver explain NAMESPACE/POD            what the agent on the pod's node decided, and why
    kubectl hookserver status|qos|capacity|top|events|writes|pods|nodemetric|slo NODE   that agent's view
    kubectl hookserver agents                           the agent pods: node, ready, image
    kubectl hookserver hookctl NODE -- ARGS...          any other hookctl command on that node

Flags, as kubectl plugins take them: --kubeconfig (else $KUBECONFIG, else ~/.kube/config, else in-cluster),
--context, -o json, --agent-namespace (default hookserver-system), --request-timeout, --via. Each node command
runs `hookctl` in the agent's container through the apiserver (pod exec, see hookserver/kubectl), so it answers
exactly as `hookctl` does on the node, and exits with hookctl's status (1: failed call, 2: usage error). Where the
apiserver cannot exec (it cannot reach or authenticate to the kubelet), the views come through the pods/proxy
subresource from the agent's metrics port (`/debug/v1/<View>`) and are rendered here by hookctl's renderers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from hookserver.debug.podref import parse_pod_key
from hookserver.debug.render import render_table
from hookserver.errors import HookServerError, InputError

__all__ = ["build_parser", "main"]

_NODE_COMMANDS = {
    "status": "node, store and process status (-v: every field)",
    "qos": "QoS reconcilers, gates and the last evictions",
    "capacity": "batch/mid capacity: the offer and each term of the formula",
    "top": "node and pod CPU/memory now and p95",
    "events": "recent hook calls and evictions",
    "writes": "recent cgroup writes",
    "pods": "pods the agent knows",
    "nodemetric": "the NodeMetric status last reported",
    "slo": "the effective NodeSLO and where each part came from",
}


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", choices=["table", "json"], default=argparse.SUPPRESS)
    common.add_argument("--kubeconfig", default=argparse.SUPPRESS, help="kubeconfig file (default $KUBECONFIG)")
    common.add_argument("--context", default=argparse.SUPPRESS, help="kubeconfig context")
    common.add_argument("--agent-namespace", default=argparse.SUPPRESS,
                        help="the DaemonSet's namespace (default hookserver-system)")
    common.add_argument("--request-timeout", type=float, default=argparse.SUPPRESS,
                        help="seconds per apiserver call (default 30)")
    common.add_argument("--via", choices=["auto", "exec", "proxy"], default=argparse.SUPPRESS,
                        help="pod exec (hookctl in the agent), pods/proxy (the agent's /debug/v1 views), or auto: "
                             "exec, then proxy when the apiserver cannot exec (default auto)")
    parser = argparse.ArgumentParser(prog="kubectl hookserver", parents=[common],
                                     description="Ask the hookserver agent on a node, through the apiserver.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    explain = sub.add_parser("explain", parents=[common], help="what each hook decided for a pod, and why")
    explain.add_argument("pod", metavar="NAMESPACE/POD")
    for name, text in _NODE_COMMANDS.items():
        cmd = sub.add_parser(name, parents=[common], help=text)
        cmd.add_argument("node", metavar="NODE")
        if name == "status":
            cmd.add_argument("-v", "--verbose", action="store_true")
        if name == "top":
            cmd.add_argument("--window", type=int, default=0)
        if name in ("events", "writes"):
            cmd.add_argument("--limit", type=int, default=0)
    sub.add_parser("agents", parents=[common], help="the agent pods: node, phase, ready, image")
    raw = sub.add_parser("hookctl", parents=[common], help="any hookctl command on NODE: hookctl NODE -- ARGS")
    raw.add_argument("node", metavar="NODE")
    raw.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _hookctl_args(args: argparse.Namespace) -> list[str]:
    out = ["-o", "json"] if getattr(args, "output", "table") == "json" else []
    if args.command == "explain":
        return [*out, "explain", args.pod]
    if args.command == "hookctl":
        rest = [a for a in args.args if a != "--"] if args.args[:1] == ["--"] else list(args.args)
        return [*out, *rest]
    cmd = [*out, args.command]
    if getattr(args, "verbose", False):
        cmd.append("-v")
    if getattr(args, "window", 0):
        cmd += ["--window", str(args.window)]
    if getattr(args, "limit", 0):
        cmd += ["--limit", str(args.limit)]
    return cmd


# command -> the debug API view (`/debug/v1/<Rpc>`) and how its arguments map to the view's fields
_VIEWS = {"status": "Status", "explain": "Explain", "events": "Events", "writes": "Writes", "pods": "Pods",
          "slo": "Slo", "top": "Top", "nodemetric": "NodeMetric", "qos": "Qos", "capacity": "Capacity"}


def _view_query(args: argparse.Namespace) -> dict[str, str]:
    if args.command == "explain":
        namespace, name = parse_pod_key(args.pod)
        return {"namespace": namespace, "name": name}
    query = {}
    if getattr(args, "limit", 0):
        query["limit"] = str(args.limit)
    if getattr(args, "window", 0):
        query["window_seconds"] = str(args.window)
    return query


def _through_proxy(cluster: Any, agent: Any, args: argparse.Namespace) -> int:
    """The view as JSON through pods/proxy, rendered here as hookctl renders it."""
    from hookserver.cli.hookctl import print_reply

    if args.command not in _VIEWS:
        raise HookServerError(f"`{args.command}` needs pod exec (hookctl in the agent); pods/proxy serves the views "
                              f"{', '.join(sorted(_VIEWS))}")
    status, text = cluster.proxy_get(agent, f"/debug/v1/{_VIEWS[args.command]}", _view_query(args))
    if status == 404:
        raise HookServerError(f"{agent.key}: the agent does not serve its views over HTTP (setting debug.http_views is "
                              f"off, the default); use pod exec (--via exec) or turn debug.http_views on")
    if status != 200:
        try:
            message = json.loads(text).get("error") or text
        except (ValueError, AttributeError):
            message = text.strip()[:300]
        raise HookServerError(f"{agent.key}: HTTP {status}: {message}")
    print_reply(text, getattr(args, "output", "table"), sys.stdout, args.command,
                verbose=bool(getattr(args, "verbose", False)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command == "explain":
            namespace, name = parse_pod_key(args.pod)
    except InputError as exc:
        print(f"kubectl-hookserver: error: {exc}", file=sys.stderr)
        return 2
    from hookserver.kubectl.cluster import AGENT_NAMESPACE, Cluster, load_configuration  # the kubernetes client: late

    try:
        cluster = Cluster(load_configuration(getattr(args, "kubeconfig", ""), getattr(args, "context", "")),
                          namespace=getattr(args, "agent_namespace", AGENT_NAMESPACE),
                          timeout_s=getattr(args, "request_timeout", 30.0))
        if args.command == "agents":
            agents = cluster.agents()
            if getattr(args, "output", "table") == "json":
                print(json.dumps([{"node": a.node, "pod": a.key, "phase": a.phase, "ready": a.ready, "image": a.image}
                                  for a in agents], indent=2, sort_keys=True))
            else:
                rows = [{"node": a.node, "pod": a.key, "phase": a.phase, "ready": a.ready, "image": a.image}
                        for a in agents]
                print("\n".join(render_table(rows)) if rows else f"no agent pods in namespace {cluster.namespace}")
            return 0
        node = cluster.node_of(namespace, name) if args.command == "explain" else args.node
        agent = cluster.agent_on(node)
        via = getattr(args, "via", "auto")
        if via == "proxy":
            return _through_proxy(cluster, agent, args)
        try:
            result = cluster.exec(agent, ["hookctl", *_hookctl_args(args)])
        except HookServerError as exc:
            if via == "exec" or args.command not in _VIEWS:
                raise
            # the apiserver could not exec (no route or no credentials to the kubelet): the views by pods/proxy
            try:
                return _through_proxy(cluster, agent, args)
            except HookServerError as proxy_exc:
                raise HookServerError(f"{exc}; and through pods/proxy: {proxy_exc}") from proxy_exc
    except HookServerError as exc:
        print(f"kubectl-hookserver: error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.rc


if __name__ == "__main__":
    sys.exit(main())
