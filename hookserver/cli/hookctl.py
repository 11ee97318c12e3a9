"""`hookctl`: ask a running hookserver what it knows and why it decided what it did.

    hookctl [--socket PATH] status [-v] | pods | explain NS/NAME | events | writes   [-o json]
            slo | top [--window S] | metrics QUERY | nri
            predict [NS/POD | --priority CLASS | --node | --system] | reclaimable | nodemetric | capacity
            qos | qos plan NAME [--slo FILE] | topology | devices | version
    hookctl record export FILE | replay FILE [--slo FILE] [--colocation FILE] [--predictor K=V ...] [--html OUT]

`record` and `replay` work offline, on the recording file (hookserver/cli/replay_cmd.py); the rest talk
to the debug API on a unix socket (default /var/run/hookserver/debug.sock, or $HOOKCTL_SOCKET).
Output is a table or `key: value` lines by default; `-o json` prints the server's JSON, indented with
sorted keys. Any failure prints one line to stderr and exits 1 (2 for a usage error), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from hookserver.cli import replay_cmd
from hookserver.debug.client import DEFAULT_SOCKET, DEFAULT_TIMEOUT_S, DebugCallError, DebugClient
from hookserver.debug.podref import parse_pod_key
from hookserver.debug.render import render, render_nodemetric, render_predict, render_reclaimable, render_top
from hookserver.debug.render_capacity import render_capacity
from hookserver.debug.render_qos import render_qos, render_qos_plan
from hookserver.debug.render_devices import render_devices
from hookserver.debug.render_topology import render_topology
from hookserver.debug.render_status import render_status
from hookserver.errors import InputError

__all__ = ["build_parser", "main", "print_reply"]

ENV_SOCKET = "HOOKCTL_SOCKET"
_EXIT_ERROR = 1
_EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    # `-o` is accepted before or after the command; SUPPRESS keeps a subcommand from resetting it.
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument(
        "-o", "--output", choices=["table", "json"], default=argparse.SUPPRESS, help="output format (default table)"
    )
    parser = argparse.ArgumentParser(
        prog="hookctl", description="Inspect a running hookserver through its debug socket.", parents=[output]
    )
    parser.add_argument(
        "--socket",
        default=None,
        help=f"debug socket (default ${ENV_SOCKET} or {DEFAULT_SOCKET})",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=f"seconds to wait for a reply (default {DEFAULT_TIMEOUT_S:g})"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    status = sub.add_parser("status", parents=[output], help="node, store and process status (one screen; -v: all)")
    status.add_argument("-v", "--verbose", action="store_true", help="every field of the status")
    sub.add_parser("pods", parents=[output], help="pods the agent knows")
    explain = sub.add_parser("explain", parents=[output], help="what each hook decided for a pod, and why")
    explain.add_argument("pod", metavar="NAMESPACE/NAME")
    events = sub.add_parser("events", parents=[output], help="recent hook calls: rpc, latency, result")
    events.add_argument("--limit", type=int, default=0, help="how many, newest last (default 50)")
    writes = sub.add_parser("writes", parents=[output], help="recent cgroup writes")
    writes.add_argument("--limit", type=int, default=0, help="how many, newest last (default 50)")
    writes.add_argument("--path", default="", dest="path_contains", help="only paths containing this text")
    sub.add_parser("slo", parents=[output], help="the effective NodeSLO and where each part came from")
    top = sub.add_parser("top", parents=[output], help="node and pod CPU/memory now and p95 over a window")
    top.add_argument("--window", type=int, default=0, help="window in seconds (default 300)")
    metrics = sub.add_parser("metrics", parents=[output], help="a raw time-series query")
    metrics.add_argument("query")
    sub.add_parser("nri", parents=[output], help="the NRI connection")
    predict = sub.add_parser("predict", parents=[output], help="predictor models: p60/p90/p95/p98/max, samples, age")
    predict.add_argument("pod", metavar="NAMESPACE/NAME", nargs="?", default="")
    which = predict.add_mutually_exclusive_group()
    which.add_argument("--priority", default="", help="a priority class (koord-prod, koord-mid, koord-batch, ...)")
    which.add_argument("--node", action="store_true", help="the node model")
    which.add_argument("--system", action="store_true", help="the system model (node minus pods)")
    sub.add_parser("reclaimable", parents=[output], help="reclaimable resources per predictor, and why")
    sub.add_parser("nodemetric", parents=[output], help="the NodeMetric status last reported")
    sub.add_parser("capacity", parents=[output],
                   help="batch/mid capacity: the offer, each term of the formula, state, last and next write")
    qos = sub.add_parser("qos", parents=[output], help="QoS reconcilers; `qos plan NAME` replays one")
    qos_sub = qos.add_subparsers(dest="qos_command", required=False, metavar="plan")
    plan = qos_sub.add_parser("plan", parents=[output], help="what a reconciler would do now, without doing it")
    plan.add_argument("name", help="reconciler name (see `hookctl qos`)")
    plan.add_argument("--slo", default="", help="a NodeSLO or slo-controller-config file to plan under")
    sub.add_parser("topology", parents=[output],
                   help="the NodeResourceTopology report, the CPU share pools and the CPUs bound to pods")
    sub.add_parser("devices", parents=[output],
                   help="the Device report (GPUs, RDMA devices, health) and the GPU/RDMA share of the Node")
    sub.add_parser("version", parents=[output], help="client and server versions and protocol versions")
    replay_cmd.add_parsers(sub, output)
    return parser


def _non_negative(value: int, flag: str) -> int:
    if value < 0 or value > 2**32 - 1:
        raise InputError(f"must be between 0 and {2**32 - 1}, got {value}", field=flag)
    return value


def _request(args: argparse.Namespace, client: DebugClient) -> Callable[[], str]:
    """The call for the chosen command; argument errors surface before anything is dialed."""
    command = args.command
    if command == "explain":
        namespace, name = parse_pod_key(args.pod)
        return lambda: client.explain(namespace, name)
    if command == "events":
        limit = _non_negative(args.limit, "--limit")
        return lambda: client.events(limit=limit)
    if command == "writes":
        limit = _non_negative(args.limit, "--limit")
        return lambda: client.writes(limit=limit, path_contains=args.path_contains)
    if command == "top":
        window = _non_negative(args.window, "--window")
        return lambda: client.top(window_seconds=window)
    if command == "metrics":
        if not args.query.strip():
            raise InputError("is empty: give a time-series query", field="QUERY")
        return lambda: client.metrics(args.query)
    if command == "predict":
        if args.pod and (args.priority or args.node or args.system):
            raise InputError("give a pod or one of --priority/--node/--system, not both", field="predict")
        namespace, name = parse_pod_key(args.pod) if args.pod else ("", "")
        return lambda: client.predict(
            namespace=namespace, name=name, priority=args.priority, node=args.node, system=args.system
        )
    if command == "qos" and getattr(args, "qos_command", None) == "plan":
        document, source = _read_slo_file(args.slo) if args.slo else ("", "")
        return lambda: client.qos_plan(args.name, slo_document=document, slo_source=source)
    simple: dict[str, Callable[[], str]] = {
        "status": client.status,
        "pods": client.pods,
        "slo": client.slo,
        "nri": client.nri,
        "reclaimable": client.reclaimable,
        "nodemetric": client.nodemetric,
        "capacity": client.capacity,
        "topology": client.topology,
        "devices": client.devices,
        "qos": client.qos,
    }
    return simple[command]


_MAX_SLO_FILE_BYTES = 4 * 1024 * 1024


def _read_slo_file(path: str) -> tuple[str, str]:
    """The file's text and its absolute path; the server parses it (it knows the NodeSLO model)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_SLO_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", field="--slo") from exc
    if len(data) > _MAX_SLO_FILE_BYTES:
        raise InputError(f"{path} is larger than {_MAX_SLO_FILE_BYTES} bytes", field="--slo")
    try:
        return data.decode("utf-8"), os.path.abspath(path)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}", field="--slo") from exc


def _print_reply(text: str, output: str, out: TextIO, command: str = "", *, verbose: bool = False) -> None:
    doc: Any = json.loads(text)
    if output == "json":
        out.write(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    elif command == "status":
        out.write(render_status(doc, verbose=verbose) + "\n")
    elif command == "top":
        out.write(render_top(doc) + "\n")
    elif command == "predict":
        out.write(render_predict(doc) + "\n")
    elif command == "reclaimable":
        out.write(render_reclaimable(doc) + "\n")
    elif command == "nodemetric":
        out.write(render_nodemetric(doc) + "\n")
    elif command == "capacity":
        out.write(render_capacity(doc) + "\n")
    elif command == "topology":
        out.write(render_topology(doc) + "\n")
    elif command == "devices":
        out.write(render_devices(doc) + "\n")
    elif command == "qos":
        out.write((render_qos_plan(doc) if isinstance(doc, dict) and "plan" in doc else render_qos(doc)) + "\n")
    else:
        out.write(render(doc) + "\n")


print_reply = _print_reply  # the kubectl plugin renders a view fetched through the apiserver the same way


def _version(socket_path: str, timeout_s: float, output: str) -> int:
    """The client's own build first, then the server's; the client part prints even when the server is
    unreachable (exit 1), which is when an operator most needs to know what they are running."""
    from hookserver.version import build_info

    doc: dict[str, Any] = {"client": build_info()}
    error = ""
    with DebugClient(socket_path, timeout_s=timeout_s) as client:
        try:
            doc["server"] = json.loads(client.version())
        except DebugCallError as exc:
            error = str(exc)
        except ValueError as exc:
            error = f"the server sent a reply that is not JSON: {exc}"
    _print_reply(json.dumps(doc), output, sys.stdout)
    sys.stdout.flush()
    if error:
        print(f"hookctl: error: server: {error}", file=sys.stderr)
        return _EXIT_ERROR
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the exit status (0 ok, 1 failed call, 2 usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has already printed usage and the error (or --help)
        return exc.code if isinstance(exc.code, int) else _EXIT_USAGE
    socket_path = args.socket or os.environ.get(ENV_SOCKET) or DEFAULT_SOCKET
    output = getattr(args, "output", "table")
    if args.timeout <= 0:
        print(f"hookctl: error: --timeout must be positive, got {args.timeout:g}", file=sys.stderr)
        return _EXIT_USAGE
    if args.command == "version":
        return _version(socket_path, args.timeout, output)
    if args.command in replay_cmd.COMMANDS:
        return replay_cmd.run(args, output)
    with DebugClient(socket_path, timeout_s=args.timeout) as client:
        try:
            call = _request(args, client)
        except InputError as exc:
            print(f"hookctl: error: {exc}", file=sys.stderr)
            return _EXIT_USAGE
        try:
            text = call()
        except DebugCallError as exc:
            print(f"hookctl: error: {exc}", file=sys.stderr)
            return _EXIT_ERROR
    try:
        _print_reply(text, output, sys.stdout, args.command, verbose=bool(getattr(args, "verbose", False)))
        sys.stdout.flush()
    except BrokenPipeError:
        # `hookctl events | head`: the reader left. Point stdout at /dev/null so the interpreter's
        # final flush does not print a traceback, and exit quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _EXIT_ERROR
    except ValueError as exc:
        print(f"hookctl: error: the server sent a reply that is not JSON: {exc}", file=sys.stderr)
        return _EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
