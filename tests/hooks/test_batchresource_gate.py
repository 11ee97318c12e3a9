"""koordlet's `BatchResource` runtime-hook gate: implemented (the hook is hookserver's), and `BatchResource=false`
makes the hook answer every call with no values, so requests pass through untouched."""

from __future__ import annotations

from pathlib import Path

from hookserver.config import load_settings
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage, run_stage
from hookserver.hooks.plugins import default_plugins, plugin_gates
from hookserver.store import StateStore
from hookserver.view import NodeView
from tests.reference_example import SPEC_KEY, WORKED_SPEC_JSON

BE_POD = PodRequest("ns", "p", "uid-1", labels={"koordinator.sh/qosClass": "BE"},
                    annotations={SPEC_KEY: WORKED_SPEC_JSON})


def _run(registry: HookRegistry, stage: Stage, request: PodRequest | ContainerRequest):  # type: ignore[no-untyped-def]
    return run_stage(registry, stage, request, NodeView.of(StateStore().snapshot()))


def test_on_by_default_the_hook_sets_be_values() -> None:
    registry = HookRegistry(default_plugins())  # type: ignore[arg-type]
    out = _run(registry, Stage.PRE_RUN_POD_SANDBOX, BE_POD)
    assert out.resources.cpu_shares == 2048


def test_gate_off_passes_every_stage_through_untouched() -> None:
    registry = HookRegistry(default_plugins(lambda name: name != "BatchResource"))  # type: ignore[arg-type]
    # the stages stay subscribed (the proxy registration and NRI mask do not change with the gate) ...
    assert set(registry.stage_names()) == set(HookRegistry(default_plugins()).stage_names())  # type: ignore[arg-type]
    for stage, request in (
        (Stage.PRE_RUN_POD_SANDBOX, BE_POD),
        (Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=BE_POD, name="a")),
        (Stage.PRE_UPDATE_CONTAINER_RESOURCES, ContainerRequest(pod=BE_POD, name="a")),
    ):
        out = _run(registry, stage, request)
        # ... and each answers with no value, saying why
        assert (out.resources.cpu_shares, out.resources.cpu_quota_us, out.resources.memory_limit_bytes) == (
            None, None, None), stage
        batch = [o for o in out.outcomes if o.plugin == "BatchResource"]
        assert [o.result.reason for o in batch if o.result is not None] == ["feature gate BatchResource is off"]


def test_the_daemon_registers_the_gate_and_honours_false(tmp_path: Path) -> None:
    from hookserver.daemon import Daemon

    assert plugin_gates() == [
        "BatchResource", "CPUSetAllocator", "CPUNormalization", "GPUEnvInject", "RDMADeviceInject",
    ]
    (tmp_path / "cg").mkdir()
    settings = load_settings(overrides={
        "standalone": True, "state_dir": str(tmp_path / "state"), "feature_gates": "BatchResource=false",
        "hook": {"socket": str(tmp_path / "h.sock"), "registration_dir": str(tmp_path / "reg")},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "metrics": {"addr": "127.0.0.1:0"}, "cgroup": {"root": str(tmp_path / "cg"), "version": "v2"},
    }, environ={})
    daemon = Daemon(settings)
    gate = daemon.gates.values["BatchResource"]
    assert (gate.implemented, gate.enabled, gate.source) == (True, False, "flag --feature-gates")
    assert daemon.registry.plugins["BatchResource"].enabled is False  # type: ignore[attr-defined]
    assert "batchresource" not in daemon.knob_owners  # a hook that writes nothing owns no knob
    out = run_stage(daemon.registry, Stage.PRE_RUN_POD_SANDBOX, BE_POD, NodeView.of(daemon.store.snapshot()))
    assert out.resources.cpu_shares is None
