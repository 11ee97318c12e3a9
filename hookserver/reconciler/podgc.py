"""Which pods to forget: those whose cgroup has been gone for a grace period and no informer lists.

Behind koord-runtime-proxy the agent hears only the hooked stages (no stop, no remove), so in standalone
mode nothing else ever says a pod stopped: without this, every pod a node ever ran stays in the store, its
caches and its series. A pod an informer source (apiserver, kubelet) lists is left to that source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["PodCollector"]


class PodCollector:
    """Remembers since when each pod's cgroup is missing; `due` names the pods to drop now."""

    def __init__(self, *, grace_s: float, lists_pod: Callable[[str], bool], clock: Callable[[], float]) -> None:
        self.grace_s = grace_s
        self._lists_pod = lists_pod
        self._clock = clock
        self._absent_since: dict[str, float] = {}

    def absent(self, uid: str, now: float) -> None:
        self._absent_since.setdefault(uid, now)

    def present(self, uid: str) -> None:
        self._absent_since.pop(uid, None)

    def forget(self, uid: str) -> None:
        self._absent_since.pop(uid, None)

    def due(self, live: Iterable[str]) -> list[str]:
        """Pods to collect now, among the store's `live` pods (entries for pods already gone are pruned)."""
        live_set = set(live)
        now = self._clock()
        out: list[str] = []
        for uid, since in list(self._absent_since.items()):
            if uid not in live_set:
                del self._absent_since[uid]
            elif now - since >= self.grace_s and not self._lists_pod(uid):
                out.append(uid)
        return out

    def __len__(self) -> int:
        return len(self._absent_since)
