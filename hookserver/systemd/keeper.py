"""Keep what the agent writes to systemd-owned cgroups in the units' own properties.

Why: under the systemd driver a `daemon-reload`, a `systemctl set-property` by someone else or the start of a
sibling slice makes systemd write every cgroup file of a unit from the unit's properties again: the kubelet's
CPUWeight 1 and no limits for a BE pod slice, an empty AllowedCPUs for the BE tier. Mirroring each successful
write into the unit's runtime properties (`SetUnitProperties(unit, runtime=true, ...)`, as the kubelet's own
driver does) makes systemd re-apply the agent's values instead, so there is no window and no churn.

The executor calls `written` after a file write (or a file found already holding the value); that costs a dict
update under a lock and a wake-up, so the hook's hot path never waits for systemd. One worker thread sends the
values, batched per unit (the newest value of each property wins) and deduplicated against what systemd was last
told. Before a property is first changed, the file's previous value (the kubelet's) is recorded in the node
originals, so `hookserver cleanup` can hand the unit its own values back (`restore_units`). A systemd that is
missing, hangs or refuses is a status line (`status()`), and the reconciler's reactive path stays in place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from hookserver.errors import SystemdCallError, SystemdUnavailable
from hookserver.systemd.client import SystemdClient
from hookserver.systemd.properties import (
    MIRRORED_FILES,
    UnitProperty,
    properties_for,
    property_from_text,
    systemd_quota_us,
    unit_of,
)
from hookserver.systemd.wire import Variant

__all__ = ["ORIGINALS_SECTION", "OriginalsBook", "UnitPropertyKeeper", "restore_units"]

logger = logging.getLogger(__name__)

ORIGINALS_SECTION = "systemd_units"  # key "<unit>/<Property>", value `UnitProperty.to_text()`
_MAX_KNOWN_UNITS = 4096  # what systemd was told, per unit: cleared past this (a resend is harmless)
_RETRY_S = 5.0  # how long to wait before trying an unreachable systemd again
_GONE = ("org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed")
# How long the worker lets a burst of writes gather before it sends: one plan writes several files of a unit
# within microseconds, and they should reach systemd as one call.
_GATHER_S = 0.005


class OriginalsBook(Protocol):
    """What the keeper needs of `hookserver.store.NodeOriginals`."""

    def record(self, section: str, key: str, value: str) -> bool: ...

    def forget(self, section: str, key: str) -> None: ...

    def section(self, section: str) -> Mapping[str, str]: ...


class UnitPropertyKeeper:
    """`client`: systemd's Manager API; `originals`: where the kubelet's values are kept before the first change
    (None: not recorded); `fallback_s`: how soon the reconciler restores a reset file when systemd is not
    reachable (for the status line)."""

    def __init__(self, client: SystemdClient, *, originals: OriginalsBook | None = None, fallback_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.originals = originals
        self.fallback_s = fallback_s
        self._clock = clock
        self._cond = threading.Condition()
        # unit -> file -> (text, the file's text before the first of these writes, CFS period): what `written`
        # queues, as it came (the worker turns it into properties, off the caller's thread)
        self._raw: dict[str, dict[str, tuple[str, str, int]]] = {}
        self._pending: dict[str, dict[str, UnitProperty]] = {}
        self._before: dict[tuple[str, str], UnitProperty] = {}
        self._told: dict[str, dict[str, UnitProperty]] = {}
        self._dirs: dict[str, str] = {}  # unit -> its cgroup directory, to know which units a gone pod had
        self._gone: set[str] = set()  # units whose pod is gone: what is kept about them is dropped
        self._unsupported: set[str] = set()
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._retry_at = 0.0
        self._gather_until = 0.0
        self.reachable: bool | None = None  # None: not tried yet
        self.problem = ""
        self.calls = 0
        self.errors = 0
        self.last_error = ""

    # -- the executor's side ---------------------------------------------------------------------
    def quota_us(self, cgroup_dir: str, quota_us: int, period_us: int) -> int:
        """The quota to write on a systemd unit: the one its CPUQuota= keeps (see `systemd_quota_us`), so the
        file, the property and a reloaded drop-in agree. Other directories keep `quota_us`."""
        return systemd_quota_us(quota_us, period_us) if unit_of(cgroup_dir) else quota_us

    def written(self, cgroup_dir: str, file: str, text: str, previous: str, *, period_us: int = 100_000) -> None:
        """The file `file` of `cgroup_dir` now holds `text` (it held `previous`). Queues the unit properties that
        keep it; a no-op for a directory that is no systemd unit or a file without one. `period_us`: the CFS
        period, for v1's `cpu.cfs_quota_us` (v2's `cpu.max` carries its own)."""
        if file not in MIRRORED_FILES:
            return
        unit = unit_of(cgroup_dir)
        if not unit:
            return
        with self._cond:
            if not self._raw and not self._pending:
                self._gather_until = self._clock() + _GATHER_S
            self._dirs[unit] = cgroup_dir
            files = self._raw.setdefault(unit, {})
            earlier = files.get(file)
            files[file] = (text, earlier[1] if earlier is not None else previous, period_us)
            self._cond.notify()

    def forget(self, cgroup_dirs: Iterable[str]) -> None:
        """These pods' cgroups are gone (the executor's `forget_cgroups`): their units and every unit below them
        need no property sent and no original kept (so the originals do not grow with pod churn)."""
        roots = tuple(d.rstrip("/") for d in cgroup_dirs if d)
        if not roots:
            return
        with self._cond:
            for unit, directory in list(self._dirs.items()):
                if any(directory == r or directory.startswith(r + "/") for r in roots):
                    self._gone.add(unit)
                    del self._dirs[unit]
            if self._gone:
                self._cond.notify()

    def _convert(self, raw: Mapping[str, Mapping[str, tuple[str, str, int]]]) -> None:
        """The worker's side of `written` (holding the lock): queued files become unit properties, and each
        property's value before our first change is kept for the originals."""
        for unit, files in raw.items():
            queued = self._pending.setdefault(unit, {})
            for file, (text, previous, period_us) in files.items():
                props = properties_for(file, text, period_us=period_us)
                olds = properties_for(file, previous, period_us=period_us)
                for prop, old in zip(props, olds if len(olds) == len(props) else (None,) * len(props), strict=True):
                    if prop.name in self._unsupported:
                        continue
                    queued[prop.name] = prop
                    if old is not None and (unit, prop.name) not in self._before:
                        self._before[(unit, prop.name)] = old
            if not queued:
                del self._pending[unit]

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> UnitPropertyKeeper:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="systemd-unit-properties", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Send what is queued (within half of `timeout_s`), then end the worker and close the connection."""
        if self._thread is not None and self.reachable is not False:
            self.flush(timeout_s / 2)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.client.close()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until everything queued was sent (or given up on); False when `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._raw or self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def status(self) -> dict[str, Any]:
        """For `hookctl status`: the mode in words, and the counts."""
        with self._cond:
            pending = sum(len(p) for p in self._pending.values()) + sum(len(f) for f in self._raw.values())
            units = len(self._told)
        if self.reachable is False:
            mode = (f"not reachable ({self.problem}), values restored on reset within "
                    f"{self.fallback_s:g} s")
        else:
            mode = f"unit properties kept through {self.client.socket_path}"
        return {"mode": mode, "reachable": self.reachable, "socket": self.client.socket_path, "units": units,
                "pending": pending, "calls": self.calls, "errors": self.errors, "last_error": self.last_error,
                "unsupported": sorted(self._unsupported)}

    # -- the worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._gone and (
                        not (self._raw or self._pending) or self._clock() < self._not_before()):
                    queued = self._raw or self._pending
                    self._cond.wait(None if not queued else max(0.001, self._not_before() - self._clock()))
                if self._stopping:
                    return
                gone, self._gone = self._gone, set()
                for unit in gone:
                    self._raw.pop(unit, None)
                    self._pending.pop(unit, None)
                    self._told.pop(unit, None)
                    for key in [k for k in self._before if k[0] == unit]:
                        del self._before[key]
                batch: dict[str, dict[str, UnitProperty]] = {}
                if self._clock() >= self._not_before():  # else woken only to drop gone units
                    raw, self._raw = self._raw, {}
                    self._convert(raw)
                    batch, self._pending = self._pending, {}
                self._busy = True
            try:
                self._drop_originals(gone)
                self._send(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _drop_originals(self, units: set[str]) -> None:
        if self.originals is None or not units:
            return
        for key in list(self.originals.section(ORIGINALS_SECTION)):
            if key.partition("/")[0] in units:
                try:
                    self.originals.forget(ORIGINALS_SECTION, key)
                except OSError as exc:
                    self._failed(f"{key}: the original cannot be dropped: {exc}")

    def _not_before(self) -> float:
        return max(self._retry_at, self._gather_until)

    def _send(self, batch: Mapping[str, dict[str, UnitProperty]]) -> None:
        units = list(batch.items())
        for i, (unit, props) in enumerate(units):
            if self._stopping:
                return
            try:
                self._send_unit(unit, props)
            except SystemdUnavailable as exc:
                self._unreachable(str(exc), dict(units[i:]))  # this unit and every one not tried yet
                return

    def _send_unit(self, unit: str, props: dict[str, UnitProperty]) -> None:
        told = self._told.get(unit, {})
        todo = [p for name, p in props.items() if told.get(name) != p and name not in self._unsupported]
        if not todo:
            return
        todo = self._record_originals(unit, todo)
        for _ in range(len(todo) + 1):
            if not todo:
                return
            try:
                self.calls += 1
                self.client.set_unit_properties(unit, [(p.name, Variant(p.signature, p.value)) for p in todo])
            except SystemdCallError as exc:
                rejected = [p for p in todo if p.name in exc.detail]
                if exc.name in _GONE or not rejected:
                    self._failed(f"{unit}: {exc}")
                    if exc.name in _GONE:
                        self._told.pop(unit, None)
                    return
                # One property this systemd does not have (an older version): never again, send the rest.
                logger.info("systemd: %s not settable on %s (%s); that file stays on the reactive path",
                            ", ".join(p.name for p in rejected), unit, exc)
                self._unsupported.update(p.name for p in rejected)
                todo = [p for p in todo if p not in rejected]
                continue
            if self.reachable is not True:
                logger.info("systemd: unit properties kept through %s", self.client.socket_path)
            self.reachable, self.problem = True, ""
            if len(self._told) >= _MAX_KNOWN_UNITS and unit not in self._told:
                self._told.clear()
            self._told.setdefault(unit, {}).update((p.name, p) for p in todo)
            return

    def _record_originals(self, unit: str, todo: list[UnitProperty]) -> list[UnitProperty]:
        """Record each property's value before our first change; a property whose original cannot be kept is
        not changed (it would be lost for `hookserver cleanup`)."""
        if self.originals is None:
            return todo
        kept: list[UnitProperty] = []
        for prop in todo:
            with self._cond:
                before = self._before.pop((unit, prop.name), None)
            try:
                if before is not None:
                    self.originals.record(ORIGINALS_SECTION, f"{unit}/{prop.name}", before.to_text())
            except OSError as exc:
                self._failed(f"{unit}/{prop.name}: the original cannot be recorded: {exc}")
                continue
            kept.append(prop)
        return kept

    def _failed(self, text: str) -> None:
        self.errors += 1
        self.last_error = text
        logger.debug("systemd: %s", text)

    def _unreachable(self, problem: str, unsent: Mapping[str, dict[str, UnitProperty]]) -> None:
        if self.reachable is not False:
            logger.warning("systemd: not reachable (%s); cgroup values are restored by the reconciler after a "
                           "reset", problem)
        self.reachable, self.problem = False, problem
        self.errors += 1
        self.last_error = problem
        with self._cond:
            for unit, props in unsent.items():
                newer = self._pending.setdefault(unit, {})
                for name, prop in props.items():
                    newer.setdefault(name, prop)
            self._retry_at = self._clock() + _RETRY_S


def restore_units(client: SystemdClient, originals: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """For `hookserver cleanup`: give each unit the property values recorded before the agent's first change.
    `originals` is the `systemd_units` section; returns (key, None) for each restored (or gone) unit property
    and (key, error) for the others. Raises SystemdUnavailable when systemd cannot be reached at all."""
    by_unit: dict[str, list[tuple[str, UnitProperty]]] = {}
    out: list[tuple[str, str | None]] = []
    for key, text in sorted(originals.items()):
        unit, _, _ = key.partition("/")
        try:
            by_unit.setdefault(unit, []).append((key, property_from_text(text)))
        except ValueError as exc:
            out.append((key, str(exc)))
    for unit, entries in by_unit.items():
        try:
            client.set_unit_properties(unit, [(p.name, Variant(p.signature, p.value)) for _, p in entries])
        except SystemdCallError as exc:
            gone = exc.name in _GONE
            out += [(key, None if gone else str(exc)) for key, _ in entries]
            continue
        out += [(key, None) for key, _ in entries]
    return out
