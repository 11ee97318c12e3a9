"""Settings precedence and errors that name the file, the field and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.config import load_settings
from hookserver.errors import ConfigError


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("hook:\n  socket: /from/file\n  failure_policy: Fail\nnode_name: file-node\n")
    env = {"HOOKSERVER_HOOK__SOCKET": "/from/env", "HOOKSERVER_NODE_NAME": "env-node"}
    s = load_settings(config_file=str(config), environ=env, overrides={"node_name": "flag-node"})
    assert s.hook.socket == "/from/env"
    assert s.hook.failure_policy == "Fail"
    assert s.node_name == "flag-node"
    assert s.cgroup.root == "/sys/fs/cgroup"  # default kept


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("hook: [1, 2]\n", "hook"),
        ("nri:\n  plugin_idx: '7'\n", "nri.plugin_idx"),
        ("no_such_key: 1\n", "no_such_key"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("hook: {socket: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(config_file=str(config), environ={})
    assert needle in str(info.value)
    assert str(config) in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_settings(config_file=str(tmp_path / "missing.yaml"), environ={})


def test_relative_paths_resolve_against_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings(overrides={"hook": {"socket": "run/h.sock", "registration_dir": "run/d"}, "state_dir": "st"}, environ={})
    assert s.hook.socket == str(tmp_path / "run" / "h.sock")
    assert s.hook.registration_dir == str(tmp_path / "run" / "d")
    assert s.state_dir == str(tmp_path / "st")
    assert s.debug.socket == "/var/run/hookserver/debug.sock"  # absolute stays as given


def test_nri_backoff_must_not_shrink() -> None:
    with pytest.raises(ConfigError, match="backoff_max_s"):
        load_settings(overrides={"nri": {"backoff_initial_s": 10, "backoff_max_s": 1}}, environ={})


def test_the_test_tier_variables_are_not_settings() -> None:
    # `export HOOKSERVER_E2E_KUBECONFIG=...` (the e2e tier) used to make every agent started from that shell
    # refuse its configuration ("e2e_kubeconfig: Extra inputs are not permitted").
    settings = load_settings(environ={"HOOKSERVER_E2E_KUBECONFIG": "/tmp/k", "HOOKSERVER_NODE_NAME": "n1"})
    assert settings.node_name == "n1" and settings.kubeconfig == ""
    with pytest.raises(ConfigError, match="e2ekubeconfig"):
        load_settings(environ={"HOOKSERVER_E2EKUBECONFIG": "/tmp/k"})  # a typo is still an error


def test_hook_budget_and_breaker_settings_are_validated_and_reach_the_dispatcher(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="breaker_stuck_ms"):
        load_settings(overrides={"hook": {"hook_budget_ms": 500, "breaker_stuck_ms": 100}}, environ={})
    with pytest.raises(ConfigError, match="hook_budget_ms"):
        load_settings(overrides={"hook": {"hook_budget_ms": 0}}, environ={})
    from hookserver.daemon import Daemon

    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")  # a (fixture) cgroup2 root
    s = load_settings(
        overrides={
            "standalone": True, "state_dir": str(tmp_path), "hook": {"hook_budget_ms": 20, "breaker_trip_after": 5},
            "cgroup": {"root": str(tmp_path), "version": "v2"}, "nri": {"enabled": False},
        },
        environ={"HOOKSERVER_HOOK__BREAKER_COOL_DOWN_S": "60"},
    )
    breakers = Daemon(s).dispatcher.breakers.settings
    assert (breakers.budget_s, breakers.trip_after, breakers.cool_down_s) == (0.02, 5, 60.0)
