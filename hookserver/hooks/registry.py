"""The hook registry: a plugin declares its stages by the methods it defines.

Like containerd/nri's stub, nothing is configured twice: a plugin that defines `pre_create_container`
handles PreCreateContainer, and the stage list written into the runtime-proxy registration file and
the NRI event mask are both derived from here. Configuration may narrow the set, never widen it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from hookserver.errors import ConfigError
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.outcome import HookResult
from hookserver.hooks.stages import Stage
from hookserver.view import NodeView

__all__ = [
    "ContainerHook",
    "HookPlugin",
    "HookRegistry",
    "PodHook",
]

log = logging.getLogger(__name__)


@runtime_checkable
class HookPlugin(Protocol):
    """Every plugin has a name; hooks in a stage run sorted by it (byte order, as koordlet does).

    A plugin may also set `pure_decision = True`: its container hooks depend only on the request's pod,
    the container's name and resources, and the view's NodeSLO and node (`hookserver.hooks.memo`), so the
    NRI hot path may reuse a stage's outcome for the same inputs instead of running the hooks again.
    """

    name: str


class PodHook(Protocol):
    def __call__(self, request: PodRequest, view: NodeView) -> HookResult: ...


class ContainerHook(Protocol):
    def __call__(self, request: ContainerRequest, view: NodeView) -> HookResult: ...


class HookRegistry:
    """Plugins per stage. A fresh registry per test; the daemon builds one at startup."""

    def __init__(self, plugins: Iterable[HookPlugin] = ()) -> None:
        self._plugins: dict[str, HookPlugin] = {}
        self._by_stage: dict[Stage, list[tuple[str, Any]]] = {}
        self._active: dict[Stage, tuple[tuple[str, Any], ...]] = {}  # what `handlers` hands out, rebuilt on change
        self._pure: frozenset[Stage] = frozenset()  # stages whose every active plugin sets pure_decision
        self._disabled: frozenset[Stage] = frozenset()
        # Plugins that also decide for NodeSLO host applications (`host_app(app, view)`), by name.
        self._host_app: list[tuple[str, Any]] = []
        for plugin in plugins:
            self.register(plugin)

    def register(self, plugin: HookPlugin) -> frozenset[Stage]:
        """Add a plugin; return the stages it handles. A plugin with no stage method is refused."""
        name = getattr(plugin, "name", "")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"hook plugin {plugin!r} has no name")
        if name in self._plugins:
            raise ConfigError(f"hook plugin {name!r} is registered twice")
        stages = frozenset(s for s in Stage if callable(getattr(plugin, s.method, None)))
        if not stages:
            raise ConfigError(f"hook plugin {name!r} implements no stage method")
        self._plugins[name] = plugin
        for stage in stages:
            handlers = self._by_stage.setdefault(stage, [])
            handlers.append((name, getattr(plugin, stage.method)))
            handlers.sort(key=lambda item: item[0].encode())
        if callable(getattr(plugin, "host_app", None)):
            self._host_app.append((name, getattr(plugin, "host_app")))
            self._host_app.sort(key=lambda item: item[0].encode())
        self._rebuild()
        log.info("hook plugin %s handles %s", name, ", ".join(sorted(s.value for s in stages)))
        return stages

    def disable(self, stages: Iterable[Stage | str]) -> frozenset[Stage]:
        """Narrow the active stages. Naming a stage no plugin handles is a config error."""
        wanted = frozenset(s if isinstance(s, Stage) else _stage_from_name(s) for s in stages)
        unknown = wanted - self.declared_stages()
        if unknown:
            raise ConfigError(
                "disabled stages have no hook: " + ", ".join(sorted(s.value for s in unknown))
            )
        self._disabled = wanted
        self._rebuild()
        return self.stages()

    def declared_stages(self) -> frozenset[Stage]:
        return frozenset(self._by_stage)

    def stages(self) -> frozenset[Stage]:
        """Stages with at least one hook, minus the disabled ones."""
        return self.declared_stages() - self._disabled

    def stage_names(self) -> list[str]:
        """Sorted wire names, for the runtime-proxy registration file (stable, unlike koordlet's)."""
        return sorted(s.value for s in self.stages())

    def handlers(self, stage: Stage) -> tuple[tuple[str, Any], ...]:
        """(plugin name, stage method) in run order; () for a disabled stage. Precomputed: this is the hot path."""
        return self._active.get(stage, ())

    def host_app_handlers(self) -> tuple[tuple[str, Any], ...]:
        """(plugin name, `host_app` method) of the plugins that decide for host applications (koordlet's
        `RegisterHostAppReconciler`), in name order; the reconciler runs them on its ticker."""
        return tuple(self._host_app)

    def memoizable(self, stage: Stage) -> bool:
        """Whether every active hook of `stage` declares `pure_decision` (see `HookPlugin`)."""
        return stage in self._pure

    def _rebuild(self) -> None:
        self._active = {
            stage: tuple(handlers) for stage, handlers in self._by_stage.items() if stage not in self._disabled
        }
        self._pure = frozenset(
            stage for stage, handlers in self._active.items()
            if handlers and all(getattr(self._plugins[name], "pure_decision", False) is True for name, _ in handlers)
        )

    @property
    def plugins(self) -> Mapping[str, HookPlugin]:
        return dict(self._plugins)


def _stage_from_name(name: str) -> Stage:
    try:
        return Stage(name)
    except ValueError:
        raise ConfigError(f"unknown hook stage {name!r}") from None
