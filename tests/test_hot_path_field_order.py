"""The hot path builds these records positionally (a keyword call costs ~0.5 us there). Mypy catches a
reordering that changes types; this catches one that does not (two str fields swapped), which would file
a container's name as its sandbox, silently."""

from __future__ import annotations

import dataclasses

import pytest

from hookserver.dispatch import DispatchResult
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.outcome import HookOutcome, HookResult, StageOutcome
from hookserver.resources import Resources
from hookserver.store.records import ContainerRecord

# The order each positional call site relies on (the comment beside it says the same).
HOT_PATH_ORDER = [
    (DispatchResult, ("stage", "resources", "envs", "result", "error", "outcome")),  # dispatch.dispatch_container
    (ContainerRecord, ("id", "pod_uid", "name", "sandbox_id", "cgroup_parent", "state", "pid", "resources", "source",
                       "updated_at")),  # dispatch._learn_container
    (HookOutcome, ("plugin", "stage", "duration_s", "result")),  # hooks.runner.run_stage
    (StageOutcome, ("stage", "outcomes", "resources", "envs", "duration_s", "error_count")),  # hooks.runner.run_stage
    (ContainerRequest, ("pod", "name", "container_id", "attempt", "annotations", "envs", "resources", "cgroup_parent",
                        "source")),  # nri.translate.container_request, proxy.translate.container_request
    (PodRequest, ("namespace", "name", "uid", "labels", "annotations", "cgroup_parent", "sandbox_id", "runtime_handler",
                  "attempt", "resources", "source")),  # proxy.translate.container_request
    (HookResult, ("resources", "envs", "applied", "reason", "inputs")),  # hooks.plugins.batchresource decisions
    (Resources, ("cpu_shares", "cpu_quota_us", "cpu_period_us", "memory_limit_bytes")),  # the same
]


@pytest.mark.parametrize(("cls", "order"), HOT_PATH_ORDER, ids=[c.__name__ for c, _ in HOT_PATH_ORDER])
def test_positional_hot_path_constructors_match_the_field_order(cls: type, order: tuple[str, ...]) -> None:
    fields = tuple(f.name for f in dataclasses.fields(cls) if not f.kw_only)
    assert fields[: len(order)] == order, f"{cls.__name__}: update every positional call site, then this list"
