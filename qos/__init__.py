"""QoS reconcilers (CPU suppress, eviction, CPU burst, memory QoS, sysctls, blkio, resctrl).

Layer: beside hooks and executor. Each reconciler is a pure planner: a store snapshot in, a
`hookserver.executor.plan.ResourcePlan` out; the executor carries plans out. The reconcilers arrive
with their own issue. This package holds only its contract for now, so that the import-layer checks
already cover it.
"""

__all__: list[str] = []
