"""`AllAlpha` / `AllBeta` in `--feature-gates`, as Kubernetes' featuregate package (koordlet's) applies them.

Stages are koordlet's (pkg/features/koordlet_features.go, pkg/koordlet/runtimehooks/config.go): Beta are
BECPUSuppress, CPUBurst, RdtResctrl, NodeTopologyReport, GroupIdentity, CPUSetAllocator, BatchResource; every
other koordlet gate is Alpha. k8s `setUnsetAlphaGates` / `setUnsetBetaGates` set every gate of the stage that is
not in the map by name, and an explicit setting wins whatever the map order.
"""

from __future__ import annotations

import pytest

from hookserver.errors import ConfigError
from hookserver.featuregates import FeatureGate, GateRegistry, GateValues, parse_feature_gates
from hookserver.koordlet_compat.gates import KOORDLET_GATES

FLAG = "flag --feature-gates"
BETA = {"BECPUSuppress", "CPUBurst", "RdtResctrl", "NodeTopologyReport", "GroupIdentity", "CPUSetAllocator",
        "BatchResource"}
ALPHA = {g.name for g in KOORDLET_GATES} - BETA


def _resolve(*layers: tuple[str, str], registry: GateRegistry | None = None) -> GateValues:
    reg = registry or GateRegistry([FeatureGate("BECPUEvict", False), FeatureGate("CPUBurst", True)])
    return reg.resolve([(source, parse_feature_gates(text, origin=source)) for source, text in layers])


def test_the_catalog_has_koordlets_stages() -> None:
    assert len(ALPHA) == 32 and {g.name for g in KOORDLET_GATES if g.stage == "beta"} == BETA


@pytest.mark.parametrize(
    ("flag", "on", "off"),
    [
        # every alpha gate on, the beta gates at their defaults (all of them true)
        ("AllAlpha=true", ALPHA | BETA, set()),
        # an explicit setting wins over AllAlpha, before or after it in the list
        ("AllAlpha=true,BECPUEvict=false", (ALPHA - {"BECPUEvict"}) | BETA, {"BECPUEvict"}),
        ("BECPUEvict=false,AllAlpha=true", (ALPHA - {"BECPUEvict"}) | BETA, {"BECPUEvict"}),
        # AllBeta=false switches off the beta gates that default to on; alpha gates keep their default (off)
        ("AllBeta=false", set(), ALPHA | BETA),
        ("AllBeta=false,CPUBurst=true", {"CPUBurst"}, (ALPHA | BETA) - {"CPUBurst"}),
        ("AllAlpha=true,AllBeta=false", ALPHA, BETA),
        # AllAlpha=false changes nothing here: every alpha gate is off by default
        ("AllAlpha=false", BETA, ALPHA),
    ],
)
def test_all_alpha_and_all_beta(flag: str, on: set[str], off: set[str]) -> None:
    gates = _resolve((FLAG, flag))
    assert {n for n in ALPHA | BETA if gates.enabled(n)} == on
    assert {n for n in ALPHA | BETA if not gates.enabled(n)} == off


def test_sources_say_which_switch_set_a_gate_and_the_switch_is_listed() -> None:
    gates = _resolve((FLAG, "AllAlpha=true,CPUEvict=false"))
    assert gates.values["SystemConfig"].source == f"{FLAG} AllAlpha"
    assert gates.values["CPUEvict"].source == FLAG
    assert gates.values["CPUBurst"].source == "default"
    assert gates.values["AllAlpha"].enabled and gates.values["AllAlpha"].source == FLAG
    # a registered gate takes the catalog's stage; an accepted, unimplemented one is switched as well
    assert gates.values["BECPUEvict"].implemented and gates.enabled("BECPUEvict")
    assert not gates.values["Accelerators"].implemented and gates.enabled("Accelerators")
    assert "Accelerators=true (flag --feature-gates AllAlpha)" in gates.not_implemented_line()


def test_explicit_settings_in_any_layer_win_and_the_highest_switch_wins() -> None:
    gates = _resolve(("config file f", "BECPUEvict=false,AllAlpha=true"), (FLAG, "AllAlpha=false"))
    assert not gates.enabled("BECPUEvict") and gates.values["BECPUEvict"].source == "config file f"
    assert not gates.enabled("SystemConfig") and gates.values["SystemConfig"].source == f"{FLAG} AllAlpha"
    earlier = _resolve(("config file f", "MemoryEvict=false"), (FLAG, "AllAlpha=true"))
    assert not earlier.enabled("MemoryEvict") and earlier.enabled("CPUEvict")


def test_a_gate_without_a_stage_is_switched_by_neither() -> None:
    registry = GateRegistry([FeatureGate("HookserverOnly", False)], catalog=[])
    gates = _resolve((FLAG, "AllAlpha=true,AllBeta=true"), registry=registry)
    assert not gates.enabled("HookserverOnly")


def test_a_misspelt_switch_is_refused_with_a_hint() -> None:
    with pytest.raises(ConfigError, match="allalpha -> AllAlpha"):
        _resolve((FLAG, "allalpha=true"))
