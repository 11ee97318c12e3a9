"""Reconciler front door (beside proxy, nri and debug): re-applies hook values to running pods whose hooks
were missed (agent down, restarting or failing open) or whose rules changed, and forgets pods whose cgroups
are gone. Same dispatcher, hooks and executor as the other doors; its audit door is "reconciler".

    engine = PodReconciler(store=store, dispatcher=dispatcher, executor=executor, settings=settings.reconciler)
    reconciler = Reconciler(settings.reconciler, store=store, engine=engine)
    await reconciler.run(stop)     # passes on pod syncs (rate-limited), rule changes and every interval
    reconciler.status()            # hookctl status: last pass, cost, corrections, pods collected
"""

from hookserver.reconciler.metrics import ReconcilerMetrics
from hookserver.reconciler.podgc import PodCollector
from hookserver.reconciler.ratelimit import TokenBucket
from hookserver.reconciler.reconcile import DOOR, PodReconciler, ReconcileExecutor
from hookserver.reconciler.report import PassReport
from hookserver.reconciler.reconciler import Reconciler
from hookserver.reconciler.targets import ContainerTarget, PodTarget, pod_target, runtime_of

__all__ = [
    "DOOR",
    "ContainerTarget",
    "PassReport",
    "PodCollector",
    "PodReconciler",
    "PodTarget",
    "ReconcileExecutor",
    "Reconciler",
    "ReconcilerMetrics",
    "TokenBucket",
    "pod_target",
    "runtime_of",
]
