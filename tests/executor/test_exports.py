"""The public surfaces list exactly their public names, and the executor satisfies the plan protocol."""

from __future__ import annotations

import inspect

import hookserver.executor as executor_pkg
import hookserver.system as system_pkg
from hookserver.executor import CgroupExecutor, build_executor
from hookserver.executor.plan import ResourceExecutor


def _public(module: object) -> set[str]:
    return {n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)}


def test_all_is_honest() -> None:
    for pkg in (executor_pkg, system_pkg):
        assert set(pkg.__all__) == _public(pkg) - {"annotations"}, pkg.__name__
        for name in pkg.__all__:
            assert getattr(pkg, name) is not None


def test_executor_is_a_resource_executor() -> None:
    protocol = inspect.signature(ResourceExecutor.apply)
    ours = inspect.signature(CgroupExecutor.apply)
    assert list(ours.parameters) == list(protocol.parameters) == ["self", "plan"]
    params = inspect.signature(build_executor).parameters
    assert list(params)[:1] == ["settings"]
    assert {"store", "roots", "metrics", "clock"} <= {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
