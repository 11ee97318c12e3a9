"""The reconciler package lists exactly its public names, and the real executor is what it needs."""

from __future__ import annotations

import inspect

import hookserver.reconciler as pkg
from hookserver.executor import CgroupExecutor
from hookserver.reconciler import ReconcileExecutor


def test_all_is_honest() -> None:
    public = {n for n, v in vars(pkg).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert set(pkg.__all__) == public - {"annotations"}
    assert pkg.__doc__ and "front door" in pkg.__doc__


def test_the_cgroup_executor_has_every_method_the_reconciler_calls() -> None:
    needed = {n for n in vars(ReconcileExecutor) if not n.startswith("_")} - {"layout"}
    assert needed == {"apply", "cache_keys", "unverified", "forget_writes", "forget_cgroups"}
    for name in needed:
        ours = inspect.signature(getattr(CgroupExecutor, name))
        wanted = inspect.signature(getattr(ReconcileExecutor, name))
        assert list(ours.parameters) == list(wanted.parameters), name
