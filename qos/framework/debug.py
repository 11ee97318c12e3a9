"""The `qos` and `qos_plan` debug providers (`hookctl qos`, `hookctl qos plan NAME [--slo FILE]`).

A replay plans on the live snapshot, optionally under a NodeSLO or slo-controller-config document the
client sent as text (`slo_document`, with its path in `slo_source`). The document is parsed with the
agent's own NodeSLO parsers and resolved for this node's labels, so what you try here is what the cluster
would give this node. A bad document is an InputError naming the file and the field: nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookserver.errors import ConfigError, InputError
from hookserver.slo.document import parse_slo_text

from qos.framework.runner import QoSRunner
from qos.snapshot.model import QoSSnapshot

__all__ = ["QoSProviders"]

# koordlet's plugin names, lower-cased (its CPU suppress name has the famous triple s).
_KOORDLET_NAMES = {"CPUSuppress": "cpusuppresss", "MemoryEvict": "memoryevict", "CPUEvict": "cpuevict"}


class QoSProviders:
    """Callables for `DebugServer(providers=...)`: `report(args)` and `replay(args)`."""

    def __init__(
        self, runner: QoSRunner, *, snapshot: Callable[[], QoSSnapshot], node_labels: Callable[[], dict[str, str]],
        replay_snapshot: Callable[[str], QoSSnapshot] | None = None,
    ) -> None:
        """`replay_snapshot(gate)`: the snapshot for a replay of that gate's reconciler, with the kernel facts it
        needs read even while its gate is off (else `snapshot`)."""
        self.runner = runner
        self._snapshot = snapshot
        self._replay_snapshot = replay_snapshot
        self._node_labels = node_labels

    def _canonical(self, name: str) -> str:
        """Names are matched case-insensitively, and koordlet's own names ("CPUSuppresss", "memoryEvict") or a
        reconciler's gate name ("BEMemoryEvict") find the reconciler too."""
        folded = name.lower()
        for canonical, reconciler in self.runner.reconcilers.items():
            gate_names = {g.name.lower() for g in reconciler.gates}
            if folded == canonical.lower() or folded in gate_names or folded == _KOORDLET_NAMES.get(canonical, ""):
                return canonical
        return name

    def report(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.runner.report()

    def replay(self, args: dict[str, Any]) -> dict[str, Any]:
        name = self._canonical(str(args.get("name", "")).strip())
        if name not in self.runner.reconcilers:
            known = ", ".join(sorted(self.runner.reconcilers))
            raise InputError(f"unknown reconciler {name!r} (known: {known})", field="name")
        document = str(args.get("slo_document", ""))
        source = str(args.get("slo_source", "")) or "the --slo document"
        gate = self.runner.reconcilers[name].gate.name
        snapshot = self._replay_snapshot(gate) if self._replay_snapshot is not None else self._snapshot()
        if document.strip():
            origin = f"file {source}"
            try:
                parsed = parse_slo_text(document, origin=origin, strict_json=source.endswith(".json"))
                resolved = parsed.resolve(self._node_labels())
            except ConfigError as exc:
                raise InputError(str(exc), field="--slo") from None
            snapshot = snapshot.with_slo(resolved.spec, origin=origin, sources=resolved.sources)
        elif document:
            raise InputError(f"{source} is empty: give a NodeSLO or slo-controller-config document", field="--slo")
        return self.runner.replay(name, snapshot)
