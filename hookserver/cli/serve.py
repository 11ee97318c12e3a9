"""`hookserver serve`: parse flags into settings, run the daemon until SIGTERM/SIGINT.

koordlet's flags are accepted too (`-cgroup-root-dir=/host-cgroup/ -feature-gates=...`, Go syntax): they are
taken out of the command line first (`hookserver.koordlet_compat.flags`), mapped onto settings under
hookserver's own flags, and reported (mapped or ignored) at startup and in `hookctl status`. The `koordlet`
entry point (`hookserver.cli.koordlet`) is `serve` over koordlet's daemonset defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from hookserver.config import Settings, load_settings
from hookserver.errors import ConfigError, HookServerError
from hookserver.koordlet_compat.flags import KOORDLET_DEFAULTS, KoordletArgs, split_koordlet_args

__all__ = ["build_parser", "main", "settings_from_args"]


class _VersionAction(argparse.Action):
    """`--version`, computed only when asked for (it imports grpc and the generated descriptors)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        from hookserver.version import version_text

        print(version_text())
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hookserver", description="Kubernetes colocation node agent")
    parser.add_argument(
        "--version", action=_VersionAction, help="print the version and the protocol versions it speaks, and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the agent")
    serve.add_argument("--standalone", action="store_true", default=None, help="no apiserver: pods from hooks/NRI, NodeSLO from --slo-file or defaults")
    serve.add_argument("--config", default="", help="YAML or JSON config file (flags override it)")
    serve.add_argument("--hook-socket", help="unix socket for the koord-runtime-proxy RuntimeHookService")
    serve.add_argument("--hook-host-endpoint", help="socket path the proxy dials, written into the registration file")
    serve.add_argument("--registration-dir", help="runtime-proxy hookserver.d directory")
    serve.add_argument("--debug-socket", help="unix socket for hookctl")
    nri = serve.add_mutually_exclusive_group()
    nri.add_argument("--nri-socket", help="containerd NRI socket to dial")
    nri.add_argument("--no-nri", action="store_true", help="do not register as an NRI plugin")
    serve.add_argument("--metrics-addr", help="HOST:PORT for /metrics, /healthz, /readyz (port 0 picks one)")
    serve.add_argument("--state-dir", help="directory for checkpoints")
    serve.add_argument("--cgroup-root", help="cgroup filesystem root (default /sys/fs/cgroup)")
    serve.add_argument("--cgroup-driver", choices=["cgroupfs", "systemd", "auto"])
    serve.add_argument("--node-name")
    serve.add_argument("--failure-policy", choices=["Ignore", "Fail"])
    serve.add_argument("--kubeconfig")
    serve.add_argument("--slo-file", help="NodeSLO or slo-controller-config file (standalone)")
    serve.add_argument("--proc-root")
    serve.add_argument("--sys-root")
    serve.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.add_argument(
        "--feature-gates", metavar="A=true,B=false",
        help="koordlet feature gates, e.g. BEMemoryEvict=true,BECPUEvict=true (hookctl qos lists them)",
    )
    serve.add_argument("--qos-dry-run", action="store_true", default=None,
                       help="QoS reconcilers plan, audit and show, but write and evict nothing")
    serve.add_argument("--evict-standalone", choices=["report", "kill"],
                       help="standalone mode: report evictions only (default), or kill the pod's processes")
    reconciler = serve.add_mutually_exclusive_group()
    reconciler.add_argument("--reconcile-interval", type=float, metavar="SECONDS",
                            help="periodic reconciler pass (koordlet's runtime-hooks-reconcile-interval, default 10)")
    reconciler.add_argument("--no-reconciler", action="store_true", help="do not re-apply hook values to running pods")
    # Last: `cleanup` copies serve's flags as they are now (argparse parents copy, they do not link), and
    # settings_from_args reads every one of them.
    from hookserver.cli.cleanup import add_cleanup_parser

    add_cleanup_parser(sub, serve)
    return parser


def own_long_options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """hookserver's long option names (no dashes), in every subcommand, and whether each takes a value: what
    `split_koordlet_args` must leave to argparse."""
    out: dict[str, bool] = {}
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.extend(action.choices.values())
    for each in parsers:
        for option, action in each._option_string_actions.items():
            if option.startswith("--"):
                out[option[2:]] = action.nargs != 0
    return out


def settings_from_args(
    args: argparse.Namespace, *, koordlet: KoordletArgs | None = None, koordlet_defaults: bool = False
) -> Settings:
    """Flags override the file and environment; only flags actually given are applied. koordlet's flags
    (`koordlet`) count as flags, under hookserver's own where both set one setting. With `koordlet_defaults`
    the lowest layer is koordlet's daemonset defaults (paths its DaemonSet mounts) instead of hookserver's."""
    overrides: dict[str, Any] = {}

    def put(path: str, value: Any) -> None:
        if value is None:
            return
        node = overrides
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value

    put("standalone", args.standalone)
    put("hook.socket", args.hook_socket)
    put("hook.host_endpoint", args.hook_host_endpoint)
    put("hook.registration_dir", args.registration_dir)
    put("hook.failure_policy", args.failure_policy)
    put("debug.socket", args.debug_socket)
    put("nri.socket", args.nri_socket)
    if args.no_nri:
        put("nri.enabled", False)
    put("metrics.addr", args.metrics_addr)
    put("state_dir", args.state_dir)
    put("cgroup.root", args.cgroup_root)
    put("cgroup.driver", args.cgroup_driver)
    put("node_name", args.node_name)
    put("kubeconfig", args.kubeconfig)
    put("slo_file", args.slo_file)
    put("proc_root", args.proc_root)
    put("sys_root", args.sys_root)
    put("log_level", args.log_level)
    put("feature_gates", args.feature_gates)
    put("qos.dry_run", args.qos_dry_run)
    put("qos.evict_standalone", args.evict_standalone)
    put("reconciler.interval_s", args.reconcile_interval)
    if args.no_reconciler:
        put("reconciler.enabled", False)
    if koordlet is not None and koordlet.overrides:
        koordlet.mark_overridden(overrides)
        overrides = _merge(koordlet.overrides, overrides)
    return load_settings(config_file=args.config, overrides=overrides,
                         defaults=KOORDLET_DEFAULTS if koordlet_defaults else None)


def _merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    out = dict(low)
    for key, value in high.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


async def _serve(settings: Settings, koordlet: KoordletArgs) -> int:
    from hookserver.daemon import Daemon

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    daemon = Daemon(settings, koordlet_args=koordlet)
    return await daemon.run(stop)


def _check_feature_gates(settings: Settings) -> None:
    """An unknown or malformed --feature-gates name is refused here, before logging starts, so the refusal
    is the one line on stderr (the daemon resolves them again when it starts)."""
    from hookserver.daemon import resolve_feature_gates

    resolve_feature_gates(settings)


def main(argv: list[str] | None = None, *, koordlet_defaults: bool = False) -> int:
    """`hookserver serve|cleanup ...`; `koordlet_defaults` for the `koordlet` entry point."""
    parser = build_parser()
    try:
        rest, koordlet = split_koordlet_args(sys.argv[1:] if argv is None else argv,
                                             own_options=own_long_options(parser))
    except ConfigError as exc:
        print(f"hookserver: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(rest)
    try:
        settings = settings_from_args(args, koordlet=koordlet, koordlet_defaults=koordlet_defaults)
        _check_feature_gates(settings)
    except ConfigError as exc:
        print(f"hookserver: {exc}", file=sys.stderr)
        return 2
    if args.command == "cleanup":
        from hookserver.cli.cleanup import run_cleanup

        return run_cleanup(settings, force=bool(args.force))
    logging.basicConfig(
        level=getattr(logging, settings.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return asyncio.run(_serve(settings, koordlet))
    except HookServerError as exc:
        # A startup refusal (socket in use, unusable path, bad plugin config): one line, not a traceback.
        print(f"hookserver: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
