"""Feature gates for the whole agent: implemented = registered by a QoS reconciler or a default hook plugin;
the rest of koordlet's catalog is accepted and said to be not implemented; any other name stops startup."""

from __future__ import annotations

import logging
from typing import Any

from hookserver.config import Settings
from hookserver.featuregates import GateValues, koordlet_catalog
from hookserver.hooks.plugins import plugin_gates
from hookserver.koordlet_compat.flags import KoordletArgs
from hookserver.predictor import NODE_METRIC_PROM_GATE
from hookserver.topology.publisher import HUGEPAGE_REPORT_GATE
from hookserver.wiring.devices import DEVICE_GATES
from qos.framework.reconciler import Reconciler
from qos.registry import build_reconcilers, gate_registry

__all__ = ["AGENT_GATES", "koordlet_compat_report", "log_koordlet_compat", "resolve_feature_gates"]

log = logging.getLogger("hookserver.daemon")

# Gates of parts that are neither a reconciler nor a hook plugin, with koordlet's defaults: the NRT report and
# the Device report (hookserver/wiring/devices.py).
AGENT_GATES = ("NodeTopologyReport", NODE_METRIC_PROM_GATE, HUGEPAGE_REPORT_GATE, *DEVICE_GATES)


def resolve_feature_gates(settings: Settings) -> tuple[list[Reconciler], GateValues]:
    """The QoS reconcilers and every gate's value. Implemented = registered by a reconciler (each one's
    `gates`), by a default hook plugin (`plugin_gates()`, with koordlet's default) or by an agent part
    (`AGENT_GATES`); the rest of koordlet's catalog is accepted, not implemented; any other name raises
    ConfigError."""
    reconcilers = build_reconcilers(settings.qos)
    catalog = {g.name: g for g in koordlet_catalog()}
    hook_gates = [catalog[name] for name in (*plugin_gates(), *AGENT_GATES)]
    return reconcilers, gate_registry(reconcilers, also=hook_gates).resolve(settings.gate_layers())


def log_koordlet_compat(gates: GateValues, args: KoordletArgs) -> None:
    """Once, at startup: koordlet gates accepted but not implemented, and koordlet flags mapped or ignored.
    A warning when the operator set something hookserver will not do; else information."""
    line = gates.not_implemented_line()
    if line:
        asked = any(v.source != "default" for v in gates.not_implemented())
        log.log(logging.WARNING if asked else logging.INFO, "feature gates %s", line)
    for text in args.log_lines():
        log.log(logging.WARNING if args.ignored else logging.INFO, "%s", text)


def koordlet_compat_report(gates: GateValues, args: KoordletArgs) -> dict[str, Any]:
    """For `hookctl status`: what of koordlet's command line and gates hookserver took, and what it did not."""
    return {
        "gates_not_implemented": [
            {"name": v.name, "value": v.enabled, "source": v.source} for v in gates.not_implemented()
            if v.enabled or v.source != "default"
        ],
        "flags": args.describe(),
    }
