"""koordlet's command line read as Go's flag package reads it, mapped onto settings or reported as ignored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hookserver.cli import koordlet as koordlet_entry
from hookserver.cli import serve
from hookserver.errors import ConfigError
from hookserver.koordlet_compat.flags import KOORDLET_FLAGS, split_koordlet_args
from tests.koordlet_compat.test_chart_args import chart_args

ROOT = Path(__file__).resolve().parents[2]
OWN = serve.own_long_options(serve.build_parser())


def _settings(argv: list[str], *, koordlet_defaults: bool = False):  # type: ignore[no-untyped-def]
    parser = serve.build_parser()
    rest, used = split_koordlet_args(["serve", *argv], own_options=OWN)
    return serve.settings_from_args(parser.parse_args(rest), koordlet=used, koordlet_defaults=koordlet_defaults), used


def test_the_charts_arguments_map_onto_settings() -> None:
    settings, used = _settings(chart_args(9316))
    assert settings.metrics.addr == "0.0.0.0:9316"
    assert settings.cgroup.root == "/host-cgroup/"
    assert settings.hook.host_endpoint == "/var/run/koordlet/koordlet.sock"
    assert settings.feature_gates == {"BECPUEvict": True, "BEMemoryEvict": True, "CgroupReconcile": True,
                                      "Accelerators": True}
    assert settings.gate_layers()[-1][0] == "flag --feature-gates"
    assert [u.flag for u in used.ignored] == ["logtostderr", "v"]


@pytest.mark.parametrize("argv", [
    ["-runtime-hooks-addr=/x/k.sock"], ["--runtime-hooks-addr=/x/k.sock"],
    ["-runtime-hooks-addr", "/x/k.sock"], ["--runtime-hooks-addr", "/x/k.sock"],
])
def test_one_or_two_dashes_equals_or_space(argv: list[str]) -> None:
    settings, _ = _settings(argv)
    assert settings.hook.socket == "/x/k.sock"


def test_bool_flags_take_no_separate_value() -> None:
    settings, _ = _settings(["-enable-nri-runtime-hook=false", "--standalone"])
    assert settings.nri.enabled is False and settings.standalone is True
    settings, _ = _settings(["-enable-nri-runtime-hook"])
    assert settings.nri.enabled is True
    _, used = _settings(["-enable-pprof", "-runtime-hooks-network=unix"])
    assert [(u.flag, u.value) for u in used.ignored] == [("enable-pprof", "true"), ("runtime-hooks-network", "unix")]


def test_migration_flags_map_with_go_values() -> None:
    settings, _ = _settings([
        "-runtime-hooks-nri-socket-path=nri/nri.sock", "-runtime-hooks-reconcile-interval=30s",
        "-runtime-hooks-disable-stages=PreStartContainer,PostStopPodSandbox", "-runtime-hooks-failure-policy=Fail",
        "-prediction-checkpoint-filepath=/pc", "-prediction-cold-start-duration=12h",
        "-prediction-model-checkpoint-max-per-step=5", "-cpu-evict-cool-time-seconds=40",
        "-memory-evict-interval-seconds=2", "-kubeconfig=/kc", "-var-lib-kubelet-dir=/host-kubelet/",
    ])
    assert settings.nri.socket == "/host-var-run/nri/nri.sock"  # relative to koordlet's var-run root
    assert settings.reconciler.interval_s == 30.0
    assert settings.hook.disable_stages == ("PreStartContainer", "PostStopPodSandbox")
    assert settings.hook.failure_policy == "Fail"
    assert settings.predictor.koordlet_checkpoint_dir == "/pc"
    assert settings.predictor.cold_start_duration_s == 12 * 3600
    assert settings.predictor.checkpoint_max_per_step == 5
    assert settings.qos.reconcilers["CPUEvict"].cooldown_s == 40
    assert settings.qos.reconcilers["MemoryEvict"].interval_s == 2
    assert settings.kubeconfig == "/kc"
    assert settings.topology.kubelet_root_dir == "/host-kubelet/"  # where cpu_manager_state is read


def test_hookservers_own_flag_wins_and_repeated_gates_add_up() -> None:
    settings, used = _settings(["-cgroup-root-dir=/host-cgroup/", "--cgroup-root", "/sys/fs/cgroup",
                                "-feature-gates=BECPUEvict=true", "-feature-gates=Accelerators=true"])
    assert settings.cgroup.root == "/sys/fs/cgroup"
    assert [u.overridden for u in used.mapped if u.flag == "cgroup-root-dir"] == [True]
    assert settings.feature_gates == {"BECPUEvict": True, "Accelerators": True}


@pytest.mark.parametrize(("argv", "message"), [
    (["-no-such-flag=1"], "flag provided but not defined: -no-such-flag"),
    (["-enable-pprof=maybe"], "invalid value 'maybe' for flag -enable-pprof"),
    (["-kube-api-burst=lots"], "invalid value 'lots' for flag -kube-api-burst"),
    (["-runtime-hooks-reconcile-interval=10"], "invalid value '10' for flag -runtime-hooks-reconcile-interval"),
    (["-runtime-hooks-network=tcp"], "unix socket only"),
    (["-runtime-hooks-addr"], "flag needs an argument: -runtime-hooks-addr"),
])
def test_bad_flags_are_refused_clearly(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        split_koordlet_args(argv, own_options=OWN)


def test_every_flag_is_mapped_to_a_real_setting_or_says_why_not() -> None:
    from hookserver.config import Settings

    fields = Settings.model_fields
    for flag in KOORDLET_FLAGS.values():
        assert bool(flag.setting) != bool(flag.ignored_because), flag.name
        if flag.setting:
            head = flag.setting.split(".")[0]
            assert head in fields, flag.name


def test_the_koordlet_entry_point_is_serve_over_koordlets_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], bool]] = []
    monkeypatch.setattr(serve, "main", lambda argv, *, koordlet_defaults=False: seen.append((argv, koordlet_defaults)) or 0)
    assert koordlet_entry.main(["-addr=:9316"]) == 0
    assert seen == [(["serve", "-addr=:9316"], True)]

    settings, _ = _settings([], koordlet_defaults=True)
    assert settings.hook.socket == "/host-var-run-koordlet/koordlet.sock"
    assert settings.hook.registration_dir == "/host-etc-hookserver/"
    assert settings.hook.registration_name == "koordlet"
    assert settings.cgroup.root == "/host-cgroup/" and settings.sys_root == "/host-sys/"
    assert settings.predictor.koordlet_checkpoint_dir == "/prediction-checkpoints"
    assert settings.metrics.addr == "0.0.0.0:9316"


def test_the_koordlet_command_refuses_an_unknown_flag_in_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "hookserver.cli.koordlet", "-addr=:9316", "-bogus=1"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "hookserver: flag provided but not defined: -bogus (neither a hookserver nor a koordlet flag)"]


def test_the_koordlet_console_script_is_declared() -> None:
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["koordlet"] == "hookserver.cli.koordlet:main"


def test_go_help_is_the_usage() -> None:
    rest, used = split_koordlet_args(["serve", "-help"], own_options=OWN)
    assert rest == ["serve", "--help"] and used.used == []
