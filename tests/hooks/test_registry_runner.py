"""Registry derives stages from plugin methods; the runner turns errors into values and merges in name order."""

from __future__ import annotations

from typing import Any

import pytest

from hookserver.errors import ConfigError
from hookserver.hooks import HookRegistry, HookResult, PodRequest, Resources, Stage, run_stage

POD = PodRequest("ns", "p", "u")


class SharesPlugin:
    def __init__(self, name: str, shares: int) -> None:
        self.name = name
        self.shares = shares

    def pre_run_pod_sandbox(self, request: PodRequest, snapshot: Any) -> HookResult:
        return HookResult(resources=Resources(cpu_shares=self.shares), reason=f"{self.name} says {self.shares}")


class Broken:
    name = "Broken"

    def pre_run_pod_sandbox(self, request: PodRequest, snapshot: Any) -> HookResult:
        raise RuntimeError("boom")


class NoStages:
    name = "Nothing"


def test_stages_are_derived_from_methods() -> None:
    registry = HookRegistry([SharesPlugin("A", 1)])
    assert registry.stages() == {Stage.PRE_RUN_POD_SANDBOX}
    assert registry.stage_names() == ["PreRunPodSandbox"]


def test_plugin_without_stage_methods_or_duplicate_is_refused() -> None:
    registry = HookRegistry()
    with pytest.raises(ConfigError, match="implements no stage"):
        registry.register(NoStages())
    registry.register(SharesPlugin("A", 1))
    with pytest.raises(ConfigError, match="twice"):
        registry.register(SharesPlugin("A", 2))


def test_disable_narrows_but_cannot_widen() -> None:
    registry = HookRegistry([SharesPlugin("A", 1)])
    with pytest.raises(ConfigError, match="no hook"):
        registry.disable(["PreCreateContainer"])
    with pytest.raises(ConfigError, match="unknown hook stage"):
        registry.disable(["Bogus"])
    assert registry.disable(["PreRunPodSandbox"]) == frozenset()
    assert run_stage(registry, Stage.PRE_RUN_POD_SANDBOX, POD, None).outcomes == ()


def test_hooks_run_in_byte_order_and_later_wins() -> None:
    # "Z" < "a" in byte order, so "a" runs last and its value wins.
    registry = HookRegistry([SharesPlugin("a", 100), SharesPlugin("Z", 5)])
    out = run_stage(registry, Stage.PRE_RUN_POD_SANDBOX, POD, None)
    assert [o.plugin for o in out.outcomes] == ["Z", "a"]
    assert out.resources.cpu_shares == 100


def test_errors_become_outcomes_and_fail_policy_stops_the_chain() -> None:
    registry = HookRegistry([Broken(), SharesPlugin("Later", 7)])
    ignore = run_stage(registry, Stage.PRE_RUN_POD_SANDBOX, POD, None)
    assert ignore.failed and [o.plugin for o in ignore.outcomes] == ["Broken", "Later"]
    assert ignore.first_error is not None and ignore.first_error.error == "boom"
    fail = run_stage(registry, Stage.PRE_RUN_POD_SANDBOX, POD, None, stop_on_error=True)
    assert [o.plugin for o in fail.outcomes] == ["Broken"]
