"""Hook plugins. Each defines only the stage methods it handles (see hookserver.hooks.registry)."""

from collections.abc import Callable

from hookserver.hooks.plugins.batchresource import BatchResourcePlugin

__all__ = ["BatchResourcePlugin", "default_plugins", "plugin_gates"]


def plugin_gates() -> list[str]:
    """The koordlet runtime-hook gates the default plugins implement (registered as implemented, so a
    `BatchResource=false` is honoured rather than reported as not implemented)."""
    return [BatchResourcePlugin.feature_gate]


def default_plugins(gate_enabled: Callable[[str], bool] | None = None) -> list[object]:
    """The plugins the daemon registers by default (koordlet's default gates that apply here), each told
    whether its gate is on (all on when no gate values are given)."""

    def on(name: str) -> bool:
        return True if gate_enabled is None else gate_enabled(name)

    return [BatchResourcePlugin(enabled=on(BatchResourcePlugin.feature_gate))]
