"""Typed configuration: defaults < config file (YAML/JSON) < environment (HOOKSERVER_*) < flags.

One frozen pydantic model per area. Each area's model lives beside its code and is only collected
here. Errors name the file, the field and the value.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from collectors.settings import CollectorSettings
from hookserver.capacity.settings import CapacitySettings
from hookserver.devices.settings import DeviceSettings
from hookserver.executor.settings import CgroupSettings
from hookserver.errors import ConfigError
from hookserver.hooks.settings import HookServerSettings
from hookserver.informer.settings import InformerSettings
from hookserver.nri.settings import NriSettings
from hookserver.predictor.settings import PredictorSettings
from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.recorder.settings import RecorderSettings
from hookserver.featuregates import parse_feature_gates
from qos.settings import QoSSettings

__all__ = ["Settings", "load_settings"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DebugSettings(_Frozen):
    socket: str = "/var/run/hookserver/debug.sock"
    # The same read-only views as JSON on the metrics port (`/debug/v1/<Rpc>`): what `kubectl hookserver`
    # reads through the apiserver's pods/proxy where pod exec cannot reach the kubelet. Off by default: the
    # metrics port is unauthenticated and, in the DaemonSet, on the host network, and pod names, cgroup writes
    # and evictions are more than a scrape needs to see; the plugin's first path (exec) needs no listener.
    http_views: bool = False


class MetricsSettings(_Frozen):
    addr: str = "127.0.0.1:9316"


class TopologySettings(_Frozen):
    """The NodeResourceTopology report (hookserver.topology.publisher; koordlet's NodeTopologyReport)."""

    enabled: bool = True
    # koordlet's --node-topology-sync-interval is 3 s; an unchanged document costs no write either way.
    interval_s: float = Field(default=10.0, gt=0, le=3600)
    # The kubelet's root directory, whose `cpu_manager_state` names the CPU manager policy the kubelet runs and
    # the static policy's exclusive CPUs (koordlet's -var-lib-kubelet-dir); "" reads nothing.
    kubelet_root_dir: str = "/var/lib/kubelet"
    # The policy where `cpu_manager_state` is missing or unreadable (hookserver does not read /configz).
    kubelet_cpu_manager_policy: Literal["none", "static"] = "none"
    document_file: str = "noderesourcetopology.json"
    field_manager: str = "hookserver"
    write_timeout_s: float = Field(default=10.0, gt=0, le=120)


class Settings(_Frozen):
    standalone: bool = False
    node_name: str = Field(default_factory=lambda: os.environ.get("NODE_NAME", "") or os.uname().nodename)
    state_dir: str = "/var/run/hookserver"
    kubeconfig: str = ""
    slo_file: str = ""
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    log_level: str = "INFO"
    hook: HookServerSettings = HookServerSettings()
    cgroup: CgroupSettings = CgroupSettings()
    debug: DebugSettings = DebugSettings()
    metrics: MetricsSettings = MetricsSettings()
    nri: NriSettings = NriSettings()
    collectors: CollectorSettings = CollectorSettings()
    informer: InformerSettings = InformerSettings()
    predictor: PredictorSettings = PredictorSettings()
    qos: QoSSettings = QoSSettings()
    devices: DeviceSettings = DeviceSettings()
    reconciler: ReconcilerSettings = ReconcilerSettings()
    capacity: CapacitySettings = CapacitySettings()
    topology: TopologySettings = TopologySettings()
    recorder: RecorderSettings = RecorderSettings()
    # koordlet's --feature-gates: `Name=true,...` or a mapping. Values are checked here, names by the QoS
    # gate registry at startup (it knows which gates exist).
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    # Where each layer of feature_gates came from, lowest first (set by load_settings; see gate_layers).
    _gate_layers: tuple[tuple[str, dict[str, bool]], ...] = PrivateAttr(default=())

    @field_validator("feature_gates", mode="before")
    @classmethod
    def _gate_syntax(cls, value: Any) -> Any:
        return _parse_gates(value, "feature_gates")

    def gate_layers(self) -> tuple[tuple[str, dict[str, bool]], ...]:
        """(source, {gate: value}) per layer that set gates, lowest first; defaults are not a layer."""
        if self._gate_layers or not self.feature_gates:
            return self._gate_layers
        return (("settings", dict(self.feature_gates)),)


def _parse_gates(value: Any, origin: str) -> dict[str, bool]:
    try:
        return parse_feature_gates(value, origin=origin)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _read_file(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        # One line: PyYAML's message spans several (with a caret under the spot); the line and column stay.
        raise ConfigError(f"config file {path}: not valid YAML/JSON: {' '.join(str(exc).split())}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: top level must be a mapping, got {type(data).__name__}")
    return data


# HOOKSERVER_* names that are not settings and must not stop startup: the service links Kubernetes
# injects into every pod of a namespace that has a Service named `hookserver` (with enableServiceLinks,
# the default), and the test harness's own variables (tests/kube, tests/image).
_NOT_SETTINGS = re.compile(
    r"HOOKSERVER_(CONFIG|SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?"
    r"|E2E_\w+|IMAGE_DIR)"
)


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """HOOKSERVER_NODE_NAME=x, HOOKSERVER_HOOK__SOCKET=/x (double underscore nests)."""
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith("HOOKSERVER_") or _NOT_SETTINGS.fullmatch(key):
            continue
        parts = key[len("HOOKSERVER_"):].lower().split("__")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _plain(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A nested copy as plain dicts (defaults may be read-only mappings)."""
    return {k: _plain(v) if isinstance(v, Mapping) else v for k, v in tree.items()}


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(
    *, config_file: str = "", overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings. `overrides` come from flags, as a nested dict of only what was given; `defaults`
    replace the built-in defaults they name (the `koordlet` entry point's daemonset paths), under everything."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    source = "defaults"
    path = config_file or env.get("HOOKSERVER_CONFIG", "")
    if path:
        data = _read_file(path)
        source = path
    if defaults:
        data = _deep_merge(_plain(defaults), data)
    env_data = _from_env(env)
    layers = _gate_layers(source, data, env_data, overrides or {})
    data = _deep_merge(data, env_data)
    data = _deep_merge(data, overrides or {})
    if layers:
        data["feature_gates"] = {name: value for _, layer in layers for name, value in layer.items()}
    try:
        settings = _absolute_paths(Settings.model_validate(data), base=os.getcwd())
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})" for err in exc.errors()
        )
        raise ConfigError(f"config from {source}: {problems}") from None
    settings._gate_layers = layers
    return settings


def _gate_layers(
    source: str, file_data: Mapping[str, Any], env_data: Mapping[str, Any], overrides: Mapping[str, Any]
) -> tuple[tuple[str, dict[str, bool]], ...]:
    """Each source's feature gates, lowest first, so `hookctl qos` can say where a value came from."""
    out: list[tuple[str, dict[str, bool]]] = []
    for origin, data in (
        (f"config file {source}", file_data),
        ("environment HOOKSERVER_FEATURE_GATES", env_data),
        ("flag --feature-gates", overrides),
    ):
        raw = data.get("feature_gates")
        if raw:
            out.append((origin, parse_feature_gates(raw, origin=origin)))
    return tuple(out)


# Path settings that may be given relative (e.g. `run/hookserver.sock` for `make run`). They are resolved
# once, against the working directory at startup, so sockets, the registration file's `remote-endpoint`
# and hookctl all see one absolute path, whatever directory a later component runs from.
_PATH_FIELDS = (
    ("", "state_dir"), ("", "kubeconfig"), ("", "slo_file"),
    ("hook", "socket"), ("hook", "host_endpoint"), ("hook", "registration_dir"),
    ("debug", "socket"), ("nri", "socket"),
)


def _absolute_paths(settings: Settings, *, base: str) -> Settings:
    changes: dict[str, dict[str, str]] = {}
    top: dict[str, str] = {}
    for section, name in _PATH_FIELDS:
        owner = getattr(settings, section) if section else settings
        value = getattr(owner, name)
        if value and not os.path.isabs(value):
            absolute = os.path.normpath(os.path.join(base, value))
            if section:
                changes.setdefault(section, {})[name] = absolute
            else:
                top[name] = absolute
    if not changes and not top:
        return settings
    updates: dict[str, object] = dict(top)
    for section, fields in changes.items():
        updates[section] = getattr(settings, section).model_copy(update=fields)
    return settings.model_copy(update=updates)
