"""Feature gates: koordlet's syntax, unknown names stop startup, and each value says where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.cli import serve
from hookserver.config import load_settings
from hookserver.errors import ConfigError
from hookserver.featuregates import FeatureGate, GateRegistry, parse_feature_gates

GATES = [FeatureGate("BECPUSuppress", True), FeatureGate("BECPUEvict", False), FeatureGate("BEMemoryEvict", False)]


def test_flag_syntax_parses_like_koordlet() -> None:
    assert parse_feature_gates("BEMemoryEvict=true, BECPUEvict=false,", origin="flag") == {
        "BEMemoryEvict": True, "BECPUEvict": False,
    }
    assert parse_feature_gates({"BECPUEvict": "True"}, origin="file") == {"BECPUEvict": True}
    assert parse_feature_gates("", origin="flag") == {}


@pytest.mark.parametrize("raw", ["BECPUEvict", "BECPUEvict=maybe", "=true", 42])
def test_bad_gate_syntax_is_a_clear_error(raw: object) -> None:
    with pytest.raises(ConfigError, match="flag"):
        parse_feature_gates(raw, origin="flag")


def test_defaults_then_layers_with_their_sources() -> None:
    values = GateRegistry(GATES).resolve([
        ("config file /etc/h.yaml", {"BECPUEvict": True, "BEMemoryEvict": True}),
        ("flag --feature-gates", {"BEMemoryEvict": False}),
    ])
    assert values.enabled("BECPUSuppress") and values.values["BECPUSuppress"].source == "default"
    assert values.enabled("BECPUEvict") and values.values["BECPUEvict"].source == "config file /etc/h.yaml"
    assert not values.enabled("BEMemoryEvict") and values.values["BEMemoryEvict"].source == "flag --feature-gates"


def test_unknown_gate_names_the_source_and_the_known_gates() -> None:
    with pytest.raises(ConfigError) as err:
        GateRegistry(GATES).resolve([("flag --feature-gates", {"BEMemoryEvcit": True})])
    text = str(err.value)
    assert "flag --feature-gates" in text and "BEMemoryEvcit" in text and "did you mean BEMemoryEvcit -> BEMemoryEvict" in text
    assert "\n" not in text


def test_a_gate_registered_twice_must_agree() -> None:
    registry = GateRegistry(GATES)
    registry.register(FeatureGate("BECPUEvict", False))  # same default: fine
    with pytest.raises(ConfigError, match="different defaults"):
        registry.register(FeatureGate("BECPUEvict", True))


def test_settings_keep_each_layer(tmp_path: Path) -> None:
    config = tmp_path / "h.yaml"
    config.write_text("feature_gates:\n  BECPUEvict: true\n")
    settings = load_settings(
        config_file=str(config), overrides={"feature_gates": "BEMemoryEvict=true"},
        environ={"HOOKSERVER_FEATURE_GATES": "BECPUSuppress=false"},
    )
    assert settings.feature_gates == {"BECPUEvict": True, "BECPUSuppress": False, "BEMemoryEvict": True}
    assert settings.gate_layers() == (
        (f"config file {config}", {"BECPUEvict": True}),
        ("environment HOOKSERVER_FEATURE_GATES", {"BECPUSuppress": False}),
        ("flag --feature-gates", {"BEMemoryEvict": True}),
    )


def test_serve_flags_reach_the_settings(tmp_path: Path) -> None:
    args = serve.build_parser().parse_args([
        "serve", "--feature-gates=BEMemoryEvict=true,BECPUEvict=true", "--qos-dry-run", "--evict-standalone", "kill",
    ])
    settings = serve.settings_from_args(args)
    assert settings.feature_gates == {"BEMemoryEvict": True, "BECPUEvict": True}
    assert settings.qos.dry_run is True and settings.qos.evict_standalone == "kill"
    assert settings.gate_layers()[-1][0] == "flag --feature-gates"


def test_bad_gate_value_in_a_config_file_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "h.yaml"
    config.write_text("feature_gates: 'BECPUEvict=perhaps'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=str(config), environ={})
    assert str(config) in str(err.value) and "perhaps" in str(err.value)


def test_the_agent_registers_koordlets_gates_with_koordlets_defaults() -> None:
    from qos.registry import build_reconcilers, gate_registry

    values = gate_registry(build_reconcilers()).resolve([])
    implemented = {g["name"]: g["enabled"] for g in values.describe() if g["implemented"]}
    # At least these (engineers adding evictors add theirs); each with koordlet's default.
    assert {
        "BECPUSuppress": True, "BECPUEvict": False, "BEMemoryEvict": False,
        # issue 19: the v1.7/v1.8 eviction modes, off in koordlet
        "CPUEvict": False, "MemoryEvict": False, "CPUAllocatableEvict": False, "MemoryAllocatableEvict": False,
        # part 2 (issue 10), koordlet's defaults
        "CPUBurst": True, "CgroupReconcile": False, "SystemConfig": False, "BlkIOReconcile": False, "RdtResctrl": True,
    }.items() <= implemented.items()


def test_the_deployed_config_parses_and_names_only_known_gates(tmp_path: Path) -> None:
    import yaml

    from qos.registry import build_reconcilers, gate_registry

    docs = list(yaml.safe_load_all((Path(__file__).resolve().parents[2] / "deploy" / "hookserver.yaml").read_text()))
    config = next(d for d in docs if d and d.get("kind") == "ConfigMap")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(config)
    settings = load_settings(config_file=str(path), environ={})
    values = gate_registry(build_reconcilers(settings.qos)).resolve(settings.gate_layers())
    assert values.enabled("BECPUSuppress") and not values.enabled("BEMemoryEvict")
    assert values.values["BECPUEvict"].source == f"config file {path}"


def test_per_reconciler_interval_and_cooldown_from_the_config(tmp_path: Path) -> None:
    from qos.registry import build_reconcilers

    config = tmp_path / "h.yaml"
    config.write_text("qos:\n  reconcilers:\n    MemoryEvict: {interval_s: 5, cooldown_s: 30}\n")
    settings = load_settings(config_file=str(config), environ={})
    by_name = {r.name: r for r in build_reconcilers(settings.qos)}
    assert (by_name["MemoryEvict"].interval_s, by_name["MemoryEvict"].cooldown_s) == (5.0, 30.0)
    assert (by_name["CPUEvict"].interval_s, by_name["CPUEvict"].cooldown_s) == (1.0, 20.0)
    bad = tmp_path / "bad.yaml"
    bad.write_text("qos:\n  reconcilers:\n    MemoryEvict: {interval_s: 0}\n")
    with pytest.raises(ConfigError, match="interval_s"):
        load_settings(config_file=str(bad), environ={})
