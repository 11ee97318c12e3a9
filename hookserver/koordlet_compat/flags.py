"""koordlet's command line, read the way Go's `flag` package reads it, and mapped onto hookserver's settings.

An operator swaps koordlet's image in the koordinator DaemonSet and keeps its arguments (the v1.8 chart passes
`-addr=:9316 -cgroup-root-dir=/host-cgroup/ -feature-gates=... -runtime-hooks-host-endpoint=... --logtostderr=true
--v=4`). Every flag koordlet defines is accepted here: one that means a hookserver setting is mapped onto it,
any other is accepted and reported as ignored (its value is still checked as Go would, so `-enable-pprof=maybe`
fails as it would fail koordlet). A flag that is neither hookserver's nor koordlet's stops startup.

Go's syntax: one or two dashes, `-flag=value` or `-flag value`; a bool flag takes no separate value (`-flag`
is true, `-flag=false` is false). The names are koordlet's at koordinator a7a1b76b (v1.8+): the `InitFlags` of
`pkg/koordlet/{config,util/system,statesinformer/impl,metricsadvisor/framework,metriccache,qosmanager/framework,
runtimehooks,audit,prediction,resourceexecutor}`, `cmd/koordlet/options`, klog's flags and controller-runtime's
`-kubeconfig`.

`KOORDLET_DEFAULTS` are the settings a koordlet DaemonSet's mounts expect where no flag is given (koordlet's
daemonset-mode defaults): used by the `/koordlet` entry point, under the config file, the environment and flags.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hookserver.errors import ConfigError, InputError
from hookserver.kubewire import parse_go_duration

__all__ = [
    "KOORDLET_DEFAULTS",
    "KOORDLET_FLAGS",
    "KoordletArgs",
    "KoordletFlag",
    "UsedFlag",
    "split_koordlet_args",
]

# koordlet's daemonset-mode paths (pkg/koordlet/util/system/config.go NewDsModeConfig, runtimehooks defaults,
# cmd/koordlet/options, prediction), as hookserver settings. The registration file keeps koordlet's name, so the
# swap replaces koordlet's registration instead of adding a second one for the same socket.
KOORDLET_DEFAULTS: Mapping[str, Any] = {
    "metrics": {"addr": "0.0.0.0:9316"},
    "cgroup": {"root": "/host-cgroup/"},
    "sys_root": "/host-sys/",
    "proc_root": "/proc/",
    "state_dir": "/host-var-run-koordlet/hookserver-state",
    "hook": {
        "socket": "/host-var-run-koordlet/koordlet.sock",
        "host_endpoint": "/var/run/koordlet/koordlet.sock",
        "registration_dir": "/host-etc-hookserver/",
        "registration_name": "koordlet",
    },
    "nri": {"socket": "/host-var-run/nri/nri.sock", "plugin_name": "koordlet_nri", "plugin_idx": "00"},
    "predictor": {"koordlet_checkpoint_dir": "/prediction-checkpoints"},
}
# koordlet joins a relative -runtime-hooks-nri-socket-path to -var-run-root-dir.
_VAR_RUN_ROOT = "/host-var-run/"


@dataclass(frozen=True, slots=True)
class KoordletFlag:
    """One koordlet flag: its Go type, the hookserver setting it sets (dotted path; "" when ignored), how its
    value becomes the setting's, and why it is ignored."""

    name: str
    kind: str  # string | bool | int | float | duration | list | map
    setting: str = ""
    convert: Callable[[str], Any] | None = None
    ignored_because: str = ""


@dataclass(frozen=True, slots=True)
class UsedFlag:
    """A koordlet flag as given on the command line, and what became of it."""

    flag: str
    value: str
    setting: str = ""  # the hookserver setting it set
    setting_value: Any = None
    ignored_because: str = ""
    overridden: bool = False  # hookserver's own flag for the same setting was given too, and wins

    def as_dict(self) -> dict[str, Any]:
        if self.setting:
            out = {"flag": f"-{self.flag}={self.value}", "setting": self.setting, "value": self.setting_value}
            return out | ({"overridden": "by hookserver's own flag"} if self.overridden else {})
        return {"flag": f"-{self.flag}={self.value}", "ignored": self.ignored_because}


@dataclass(slots=True)
class KoordletArgs:
    """What `split_koordlet_args` took out of the command line: settings overrides (nested, as flags give
    them), and each flag used, mapped or ignored, for the startup log and `hookctl status`."""

    overrides: dict[str, Any] = field(default_factory=dict)
    used: list[UsedFlag] = field(default_factory=list)

    def mark_overridden(self, own: Mapping[str, Any]) -> None:
        """Note the mapped flags whose setting hookserver's own flags (`own`, nested like `overrides`) also set."""
        def given(path: str) -> bool:
            node: Any = own
            for part in path.split("."):
                if not isinstance(node, Mapping) or part not in node:
                    return False
                node = node[part]
            return True

        self.used = [replace(u, overridden=True) if u.setting and given(u.setting) else u for u in self.used]

    @property
    def mapped(self) -> list[UsedFlag]:
        return [u for u in self.used if u.setting]

    @property
    def ignored(self) -> list[UsedFlag]:
        return [u for u in self.used if not u.setting]

    def describe(self) -> dict[str, Any]:
        return {"mapped": [u.as_dict() for u in self.mapped], "ignored": [u.as_dict() for u in self.ignored]}

    def log_lines(self) -> list[str]:
        out = []
        if self.mapped:
            out.append("koordlet flags mapped: " + ", ".join(
                f"-{u.flag}={u.value} -> {u.setting}" + (" (overridden by hookserver's flag)" if u.overridden else "")
                for u in self.mapped))
        if self.ignored:
            out.append("koordlet flags accepted, ignored: " + ", ".join(
                f"-{u.flag}={u.value} ({u.ignored_because})" for u in self.ignored))
        return out


def _addr(value: str) -> str:
    """Go's `:9316` listens on every address; hookserver's metrics.addr wants HOST:PORT."""
    return f"0.0.0.0{value}" if value.startswith(":") else value


def _seconds(value: str) -> float:
    return parse_go_duration(value)


def _stages(value: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",") if s.strip())


def _network(value: str) -> str:
    if value != "unix":
        raise ConfigError(f"flag -runtime-hooks-network={value}: hookserver serves runtime hooks on a unix socket only")
    return value


def _nri_socket(value: str) -> str:
    return value if os.path.isabs(value) else os.path.join(_VAR_RUN_ROOT, value)


def _mapped(name: str, kind: str, setting: str, convert: Callable[[str], Any] | None = None) -> KoordletFlag:
    return KoordletFlag(name, kind, setting, convert)


def _ignored(names: str, kind: str, why: str) -> list[KoordletFlag]:
    return [KoordletFlag(name, kind, ignored_because=why) for name in names.split()]


_FLAGS: list[KoordletFlag] = [
    # cmd/koordlet/options, util/system
    _mapped("addr", "string", "metrics.addr", _addr),
    _mapped("cgroup-root-dir", "string", "cgroup.root"),
    _mapped("proc-root-dir", "string", "proc_root"),
    _mapped("sys-root-dir", "string", "sys_root"),
    _mapped("default-runtime-type", "string", "cgroup.runtime"),
    _mapped("kubeconfig", "string", "kubeconfig"),
    _mapped("feature-gates", "map", "feature_gates"),
    # runtimehooks
    _mapped("runtime-hooks-addr", "string", "hook.socket"),
    _mapped("runtime-hooks-host-endpoint", "string", "hook.host_endpoint"),
    _mapped("runtime-hooks-config-path", "string", "hook.registration_dir"),
    _mapped("runtime-hooks-failure-policy", "string", "hook.failure_policy"),
    _mapped("disable-unset-cpu-quota", "bool", "hook.disable_unset_cpu_quota"),
    _mapped("node-topology-sync-interval", "duration", "topology.interval_s", _seconds),
    _mapped("var-lib-kubelet-dir", "string", "topology.kubelet_root_dir"),  # where cpu_manager_state is
    _mapped("runtime-hooks-disable-stages", "list", "hook.disable_stages", _stages),
    _mapped("enable-nri-runtime-hook", "bool", "nri.enabled"),
    _mapped("runtime-hooks-nri-socket-path", "string", "nri.socket", _nri_socket),
    _mapped("runtime-hooks-nri-connect-timeout", "duration", "nri.connect_timeout_s", _seconds),
    _mapped("runtime-hooks-nri-backoff-duration", "duration", "nri.backoff_initial_s", _seconds),
    _mapped("runtime-hooks-nri-backoff-cap", "duration", "nri.backoff_max_s", _seconds),
    _mapped("runtime-hooks-nri-plugin-name", "string", "nri.plugin_name"),
    _mapped("runtime-hooks-nri-plugin-index", "string", "nri.plugin_idx"),
    _mapped("runtime-hooks-reconcile-interval", "duration", "reconciler.interval_s", _seconds),
    # despite its name, the HAMi-core library file's path (koordlet's util/system/config.go)
    _mapped("hami-core-library-directory-path", "string", "hook.gpu.hami_core_library_path"),
    *_ignored("runtime-hooks-network", "string", "hookserver serves hooks on a unix socket"),
    *_ignored("runtime-hooks-plugin-failure-policy", "string",
              "per-hook policy: under Fail the chain stops at the first failing hook"),
    *_ignored("runtime-hooks-nri-backoff-factor", "float", "hookserver's NRI backoff doubles"),
    *_ignored("runtime-hooks-nri-backoff-steps", "int", "hookserver's NRI backoff never gives up"),
    # prediction
    _mapped("prediction-checkpoint-filepath", "string", "predictor.koordlet_checkpoint_dir"),
    _mapped("prediction-cold-start-duration", "duration", "predictor.cold_start_duration_s", _seconds),
    _mapped("prediction-safety-margin-percent", "int", "predictor.safety_margin_percent", int),
    _mapped("prediction-cpu-histogram-decay-halflife", "duration", "predictor.cpu_half_life_s", _seconds),
    _mapped("prediction-memory-histogram-decay-halflife", "duration", "predictor.memory_half_life_s", _seconds),
    _mapped("prediction-training-interval", "duration", "predictor.training_interval_s", _seconds),
    _mapped("prediction-model-expiration-duration", "duration", "predictor.model_expiration_s", _seconds),
    _mapped("prediction-model-checkpoint-interval", "duration", "predictor.checkpoint_interval_s", _seconds),
    _mapped("prediction-model-checkpoint-max-per-step", "int", "predictor.checkpoint_max_per_step", int),
    # qosmanager, resourceexecutor
    _mapped("cpu-suppress-interval-seconds", "int", "qos.reconcilers.CPUSuppress.interval_s", int),
    _mapped("cpu-evict-interval-seconds", "int", "qos.reconcilers.CPUEvict.interval_s", int),
    _mapped("cpu-evict-cool-time-seconds", "int", "qos.reconcilers.CPUEvict.cooldown_s", int),
    _mapped("memory-evict-interval-seconds", "int", "qos.reconcilers.MemoryEvict.interval_s", int),
    _mapped("memory-evict-cool-time-seconds", "int", "qos.reconcilers.MemoryEvict.cooldown_s", int),
    _mapped("resource-force-update-seconds", "int", "cgroup.force_update_seconds", int),
    *_ignored("reconcile-interval-seconds", "int", "each reconciler keeps its own interval (qos.reconcilers)"),
    *_ignored("only-evict-by-api", "bool", "evictions always use the Eviction API with an apiserver"),
    *_ignored("qos-extension-plugins", "map", "no qosmanager extension plugins"),
    # klog, pprof, the apiserver client
    *_ignored("v vmodule stderrthreshold log_dir log_file log_backtrace_at", "string",
              "klog flag; hookserver logs to stderr at log_level"),
    *_ignored("log_file_max_size", "int", "klog flag; hookserver logs to stderr at log_level"),
    *_ignored("logtostderr alsologtostderr skip_headers skip_log_headers add_dir_header one_output "
              "legacy_stderr_threshold_behavior", "bool", "klog flag; hookserver logs to stderr at log_level"),
    *_ignored("enable-pprof", "bool", "no pprof; profile hookserver with py-spy"),
    *_ignored("pprof-addr", "string", "no pprof; profile hookserver with py-spy"),
    *_ignored("kube-api-qps", "float", "the apiserver client is not rate limited"),
    *_ignored("kube-api-burst", "int", "the apiserver client is not rate limited"),
    *_ignored("configmap-name configmap-namespace", "string", "koordlet's own ConfigMap is not read"),
    # paths and endpoints of features hookserver does not have, or finds by itself
    *_ignored("sys-fs-root-dir var-run-root-dir run-root-dir containerd-endpoint "
              "docker-endpoint pouch-endpoint pod-resources-proxy-path "
              "xpu-device-infos-dir", "string", "koordlet-only path or endpoint"),
    # states informer, collectors, metric cache, audit
    *_ignored("kubelet-preferred-address-type", "string", "see informer.kubelet_* settings"),
    *_ignored("kubelet-read-only-port", "int", "see informer.kubelet_* settings"),
    *_ignored("kubelet-insecure-tls disable-query-kubelet-config enable-pod-taskids enable-node-metric-report "
              "xpu-enforce-collect-from-device-infos", "bool", "koordlet states-informer option"),
    *_ignored("kubelet-sync-interval kubelet-sync-timeout report-interval", "duration",
              "koordlet states-informer option"),
    *_ignored("enable-pagecache-collector enable-resctrl-collector", "bool", "collectors are set in collectors.*"),
    *_ignored("collect-res-used-interval collect-sys-metric-outdated-interval collect-node-cpu-info-interval "
              "collect-node-storage-info-interval cpi-collector-interval collect-cpi-timewindow "
              "psi-collector-interval resctrl-collector-interval coldpage-collector-interval", "duration",
              "collectors are set in collectors.*"),
    *_ignored("tsdb-path", "string", "time series live in memory (collectors.retention_s)"),
    *_ignored("tsdb-enable-prometheus-metric", "bool", "time series live in memory (collectors.retention_s)"),
    *_ignored("tsdb-retention-duration tsdb-min-block-duration tsdb-max-block-duration", "duration",
              "time series live in memory (collectors.retention_s)"),
    *_ignored("tsdb-max-bytes tsdb-max-block-chunk-segment-size tsdb-head-chunks-write-buffer-size tsdb-stripe-size "
              "tsdb-wal-segment-size metric-expire-seconds metric-gc-interval-seconds", "int",
              "time series live in memory (collectors.retention_s)"),
    *_ignored("audit-log-dir", "string", "the audit lives in memory (hookctl events)"),
    *_ignored("audit-verbose audit-max-disk-space-mb audit-max-events-limit audit-max-concurrent-readers", "int",
              "the audit lives in memory (hookctl events)"),
]
KOORDLET_FLAGS: Mapping[str, KoordletFlag] = {f.name: f for f in _FLAGS}

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}  # Go's strconv.ParseBool
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def _check(flag: KoordletFlag, value: str) -> Any:
    """The value as Go would parse it for the flag's type; ConfigError as Go's `invalid value` would."""
    problem = f"invalid value {value!r} for flag -{flag.name}"
    try:
        if flag.kind == "bool":
            if value not in _TRUE | _FALSE:
                raise ValueError("not a bool")
            return value in _TRUE
        if flag.kind == "int":
            return int(value, 10)
        if flag.kind == "float":
            return float(value)
        if flag.kind == "duration":
            return parse_go_duration(value, field=f"-{flag.name}")
    except (ValueError, InputError) as exc:
        raise ConfigError(f"{problem}: {exc}") from None
    return value


def _put(tree: dict[str, Any], path: str, value: Any) -> None:
    node = tree
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def split_koordlet_args(
    argv: Sequence[str], *, own_options: Mapping[str, bool]
) -> tuple[list[str], KoordletArgs]:
    """Take koordlet's flags out of `argv`; return the rest (hookserver's own, for argparse) and what they set.

    `own_options` maps hookserver's long option names (without dashes) to whether they take a value. A
    double-dash name hookserver has is hookserver's (`--kubeconfig`, `--feature-gates`); any other name koordlet
    has is koordlet's, with one or two dashes. Anything else is left for argparse, which refuses it, except a
    single-dash long name, refused here in Go's words (argparse would read `-foo` as `-f oo`).
    """
    rest: list[str] = []
    out = KoordletArgs()
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if token == "--":
            rest.extend(argv[index - 1:])
            break
        if not token.startswith("-") or token == "-" or _is_number(token):
            rest.append(token)
            continue
        dashes = 2 if token.startswith("--") else 1
        name, has_value, value = token[dashes:].partition("=")
        if dashes == 2 and name in own_options:
            rest.append(token)
            if own_options[name] and not has_value and index < len(argv):
                rest.append(argv[index])
                index += 1
            continue
        if dashes == 1 and name == "help" and not has_value:  # Go's -help prints the usage
            rest.append("--help")
            continue
        flag = KOORDLET_FLAGS.get(name)
        if flag is None:
            if dashes == 1 and len(name) > 1:
                raise ConfigError(f"flag provided but not defined: {token.partition('=')[0]} "
                                  "(neither a hookserver nor a koordlet flag)")
            rest.append(token)
            continue
        if not has_value:
            if flag.kind == "bool":
                value = "true"
            elif index < len(argv):
                value = argv[index]
                index += 1
            else:
                raise ConfigError(f"flag needs an argument: -{name}")
        parsed = _check(flag, value)
        if not flag.setting:
            if flag.name == "runtime-hooks-network":
                _network(value)
            out.used.append(UsedFlag(name, value, ignored_because=flag.ignored_because))
            continue
        try:
            setting_value = flag.convert(value) if flag.convert is not None else parsed
        except (ValueError, InputError) as exc:
            raise ConfigError(f"invalid value {value!r} for flag -{name}: {exc}") from None
        if flag.kind == "map":  # Go's map flags add up over repeats: -feature-gates=A=true -feature-gates=B=true
            earlier = next((u.setting_value for u in out.used if u.flag == name), "")
            setting_value = f"{earlier},{setting_value}" if earlier else setting_value
        _put(out.overrides, flag.setting, setting_value)
        out.used = [u for u in out.used if u.flag != name]  # Go: the last occurrence wins
        out.used.append(UsedFlag(name, value, flag.setting, setting_value))
    return rest, out


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
