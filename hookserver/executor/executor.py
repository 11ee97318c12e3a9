"""The resource executor: the single place that turns a `ResourcePlan` into cgroup file writes.

`apply` first resolves and checks every write of the plan (a path that escapes the cgroup root refuses the
whole plan before anything is written), then writes level by level: read the file, skip it when it already
holds the value, write, read back what the kernel kept, and audit every attempt. A failed file is reported in
the `ApplyReport`, never raised. Leveled plans write merged values top-down, then real values bottom-up.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hookserver.executor.settings import CgroupSettings
from hookserver.errors import CgroupNotFoundError, ExecutorError, UnsupportedResourceError
from hookserver.executor.cache import WriteCache
from hookserver.executor.convert import cpu_max_field
from hookserver.executor.fileio import CgroupFiles, OsCgroupFiles, translate_os_error
from hookserver.executor.knob import Knob, Merge
from hookserver.executor.knobs import KNOBS
from hookserver.executor.layout import CgroupLayout
from hookserver.executor.paths import real_dir, resolve_dir, resolve_file
from hookserver.executor.plan import ApplyReport, CgroupResource, CgroupWrite, ResourcePlan, WriteResult
from hookserver.observability.metrics import HookMetrics
from hookserver.store.audit import WriteRecord
from hookserver.store.state import StateStore
from hookserver.system.cgroupcontrollers import missing_controllers
from hookserver.system.roots import SystemRoots

__all__ = ["CgroupExecutor", "UnitMirror", "build_executor"]

logger = logging.getLogger(__name__)

_PLAIN, _GROW, _FINAL = "plain", "grow", "final"
# The v2 controller of a knob's (v1-named) subsystem.
_V2_CONTROLLER = {"blkio": "io"}
_GONE = (CgroupNotFoundError, UnsupportedResourceError)


class UnitMirror(Protocol):
    """Where the systemd driver keeps written values as unit properties (`hookserver.systemd.UnitPropertyKeeper`):
    systemd re-applies a unit's properties over its cgroup files on a reload, so a value kept only in the file
    does not last."""

    def quota_us(self, cgroup_dir: str, quota_us: int, period_us: int) -> int:
        """The quota to write instead of `quota_us`: one the unit's property keeps exactly."""
        ...

    def written(self, cgroup_dir: str, file: str, text: str, previous: str, *, period_us: int = 100_000) -> None:
        """`file` of `cgroup_dir` now holds `text` (it held `previous`); must return in microseconds."""
        ...

    def forget(self, cgroup_dirs: Iterable[str]) -> None:
        """These cgroups (and those below) are gone: nothing about them is worth keeping."""
        ...


@dataclass(frozen=True, slots=True)
class _Prepared:
    write: CgroupWrite
    knob: Knob
    dir: str
    path: str
    desired: str  # the plan value as text (v1 units): the cache compares this
    problem: str  # why the value is refused, or ""


@dataclass(frozen=True, slots=True)
class _Attempt:
    result: WriteResult
    note: str
    errno: int = 0
    failure: type[ExecutorError] | None = None
    final: bool = True  # False: a grow pass wrote a merged value that pass 2 must still correct


class CgroupExecutor:
    """Implements `hookserver.executor.plan.ResourceExecutor` over a `CgroupLayout`.

    `files` is the file access (real by default; tests may pass a recording or failing one), `clock` times
    the write cache (monotonic), `store.audit` receives a `WriteRecord` per attempt and `metrics` counts them.
    """

    def __init__(
        self,
        layout: CgroupLayout,
        *,
        store: StateStore,
        metrics: HookMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        force_update_seconds: float = 60.0,
        files: CgroupFiles | None = None,
    ) -> None:
        self.layout = layout
        self.store = store
        self.metrics = metrics
        self.cache = WriteCache(force_update_seconds=force_update_seconds, clock=clock)
        self._files: CgroupFiles = files if files is not None else OsCgroupFiles()
        self._v2 = layout.writes_v2
        self._real_roots: dict[str, str] = {}
        self._leveled_lock = threading.Lock()
        self.mirror: UnitMirror | None = None

    def attach_mirror(self, mirror: UnitMirror | None) -> None:
        """Mirror every successful write (and every file found already holding its value) into `mirror`: the
        daemon attaches systemd's unit properties when the driver is systemd."""
        self.mirror = mirror

    # -- public ----------------------------------------------------------------------------------
    def apply(self, plan: ResourcePlan) -> ApplyReport:
        """Carry out `plan`. Raises PathEscapeError (before any write) if any path escapes; else reports."""
        dirs: dict[tuple[str, str], str] = {}
        levels = [[self._prepare(w, dirs) for w in level] for level in plan.levels]
        if plan.leveled:
            with self._leveled_lock:
                results = self._apply_leveled(levels, plan.cacheable)
        else:
            results = [r for level in levels for r in self._apply_level(level, plan.cacheable, _PLAIN)]
        return ApplyReport(tuple(results))

    def fresh(self, write: CgroupWrite) -> bool:
        """Whether a cacheable `write` would be skipped: this value went to this file within the force-update
        window. A memory lookup, no path resolution and no I/O, so a reconciler can drop unchanged writes
        before it builds a (leveled) plan."""
        return self.cache.fresh(write.cgroup_dir, write.resource.value, str(write.value))

    def cache_keys(self, writes: Sequence[CgroupWrite]) -> tuple[tuple[str, str, str], ...]:
        """What the write cache compares for each write; a caller that asks again and again keeps these."""
        return tuple((w.cgroup_dir, w.resource.value, str(w.value)) for w in writes)

    def unverified(
        self, writes: Sequence[CgroupWrite], keys: Sequence[tuple[str, str, str]] | None = None
    ) -> list[CgroupWrite]:
        """The writes `fresh` would not skip, in order: one lock and one clock read for the lot. `keys`, when
        given, are `cache_keys(writes)`."""
        return self.cache.unverified(self.cache_keys(writes) if keys is None else keys, writes)

    def forget_writes(self, writes: Iterable[CgroupWrite]) -> None:
        """Let these writes be read and compared again (the caller saw the file drift behind our back)."""
        for w in writes:
            self.cache.forget(w.cgroup_dir, w.resource.value)

    def forget_cgroups(self, cgroup_dirs: Collection[str]) -> int:
        """Drop cached values of these cgroups and every cgroup below them (a pod that is gone). Returns how many."""
        if self.mirror is not None:
            self.mirror.forget(cgroup_dirs)
        return self.cache.forget_under(cgroup_dirs)

    def resolve(self, write: CgroupWrite) -> str:
        """The absolute file a write would go to (validated), for `hookctl` and tests."""
        return self._prepare(write, {}).path

    # -- preparation -----------------------------------------------------------------------------
    def _real_root(self, subsystem: str) -> str:
        real = self._real_roots.get(subsystem)
        if real is None:
            real = real_dir(self.layout.hierarchy_root(subsystem))
            if os.path.isdir(real):
                self._real_roots[subsystem] = real
        return real

    def _prepare(self, write: CgroupWrite, dirs: dict[tuple[str, str], str]) -> _Prepared:
        """Resolve and check one write; `dirs` memoizes directories within one plan."""
        knob = KNOBS[write.resource]
        real_root = self._real_root(knob.subsystem)
        directory = dirs.get((real_root, write.cgroup_dir))
        if directory is None:
            directory = dirs[(real_root, write.cgroup_dir)] = resolve_dir(real_root, write.cgroup_dir)
        path = resolve_file(directory, knob.file(self._v2))
        return _Prepared(write, knob, directory, path, str(write.value), knob.check(write.value, self._v2))

    # -- passes ----------------------------------------------------------------------------------
    def _apply_leveled(self, levels: list[list[_Prepared]], cacheable: bool) -> list[WriteResult]:
        """Pass 1 top-down: MAX/UNION knobs grow to the merged value, others are written for good.
        Pass 2 bottom-up: MAX/UNION knobs that still differ get their real value (a knob whose pass-1 write
        already was the real value, or whose cgroup or file is gone, or whose value is invalid, is settled)."""
        results: list[WriteResult] = []
        settled: set[int] = set()
        for level in levels:
            for prepared, attempt in self._run_level(level, cacheable, _GROW):
                if attempt is None:
                    continue
                results.append(attempt.result)
                gone = attempt.failure is not None and (issubclass(attempt.failure, _GONE) or bool(prepared.problem))
                if gone or (attempt.result.ok and attempt.final):
                    settled.add(id(prepared))
        for level in reversed(levels):
            todo = [p for p in level if p.knob.merge is not Merge.NONE and id(p) not in settled]
            results.extend(a.result for _, a in self._run_level(todo, cacheable, _FINAL) if a is not None)
        return results

    def _apply_level(self, level: Sequence[_Prepared], cacheable: bool, mode: str) -> list[WriteResult]:
        return [a.result for _, a in self._run_level(level, cacheable, mode) if a is not None]

    def _run_level(
        self, level: Sequence[_Prepared], cacheable: bool, mode: str
    ) -> list[tuple[_Prepared, _Attempt | None]]:
        """Writes in knob order (period before quota). If the kernel refuses a period (EINVAL) while a quota
        for the same cgroup is pending, write the quota first and retry the period (runc's order)."""
        pending = sorted(level, key=lambda p: p.knob.order)
        done: set[int] = set()
        out: list[tuple[_Prepared, _Attempt | None]] = []
        for i, prepared in enumerate(pending):
            if i in done:
                continue
            attempt = self._attempt(prepared, cacheable, mode)
            if (
                attempt is not None
                and attempt.errno == errno.EINVAL
                and prepared.write.resource is CgroupResource.CPU_CFS_PERIOD
            ):
                j = _pending_quota(pending, i, done, prepared.dir)
                if j is not None:
                    self._record(prepared, attempt, "; retried after the quota")
                    quota = self._attempt(pending[j], cacheable, mode)
                    done.add(j)
                    out.append((pending[j], self._record(pending[j], quota)))
                    attempt = self._attempt(prepared, cacheable, mode)
            out.append((prepared, self._record(prepared, attempt)))
        return out

    # -- one file --------------------------------------------------------------------------------
    def _attempt(self, p: _Prepared, cacheable: bool, mode: str) -> _Attempt | None:
        """Read, compare, write, read back. None: a grow pass found nothing to widen."""
        write, knob, v2 = p.write, p.knob, self._v2
        if p.problem:
            err = ExecutorError(f"invalid value {p.desired!r} for {p.path}: {p.problem}", path=p.path, value=p.desired)
            return _failed(p, p.desired, "", err, 0)
        resource = write.resource.value
        if cacheable and mode != _GROW:
            held_text = self.cache.fresh_text(write.cgroup_dir, resource, p.desired)
            if held_text is not None:
                return _Attempt(WriteResult(write, p.path, held_text, ok=True, skipped=True), "cached")
        try:
            current = self._files.read(p.path)
        except OSError as exc:
            # The value as the file would have had it (v2 `cpu.weight` 20, not shares 512); with no current
            # text, a field the file keeps (`cpu.max`'s other half) shows as the file's default.
            text = knob.render(write.value, v2, "")
            err = translate_os_error(exc, op="read", path=p.path, value=text)
            if v2 and isinstance(err, UnsupportedResourceError):
                err = self._controller_missing(p, text) or err
            return _failed(p, text, "", err, exc.errno)
        previous = current.strip()
        if v2 and knob.v2_inherited and not previous and str(write.value).strip():
            # An empty v2 cpuset inherits its parent's set: compare (and merge) with that, so a set it already
            # gets is not written (writing it would pin the cgroup: a later change of the parent's set would
            # no longer reach it, and `hookserver cleanup` could not tell the pin from the kubelet's value).
            current = self._read_back(os.path.join(p.dir, knob.v2_inherited)) or current
        value, period_us = self._mirrored_value(p, current)
        text = knob.render(value, v2, current)
        note = ""
        final = True
        if mode == _GROW and knob.merge is not Merge.NONE:
            merged = _merge(knob, current, text, v2)
            if merged is None:
                return None
            final = knob.key(merged, v2) == knob.key(text, v2)
            text, note = merged, "leveled pass 1: grow"
        elif mode == _FINAL:
            note = "leveled pass 2"
        if knob.already(current, v2=v2, text=text):
            if final:
                self.cache.remember(p.write.cgroup_dir, resource, p.desired, text)
                # The file's own text: an empty v2 cpuset that inherits the set stays "inherit" in the unit too.
                self._mirror(p, previous if previous or knob.v2_inherited else text, previous, period_us)
            return _Attempt(
                WriteResult(write, p.path, text, ok=True, skipped=True, previous=previous),
                _join(note, "unchanged"), final=final,
            )
        try:
            self._files.write(p.path, text)
        except OSError as exc:
            fallback = self._inherited_instead(p, text, exc)
            if fallback:
                text, note = fallback, _join(note, "the kernel keeps a populated cpuset non-empty: set to what "
                                                   "it would inherit")
            else:
                self.cache.forget(p.write.cgroup_dir, resource)
                err = translate_os_error(exc, op="write", path=p.path, value=text)
                return _failed(p, text, previous, err, exc.errno)
        held = self._read_back(p.path) if knob.readback else ""
        if final:
            self.cache.remember(p.write.cgroup_dir, resource, p.desired, held or text)
            self._mirror(p, held or text, previous, period_us)
        else:
            self.cache.forget(p.write.cgroup_dir, resource)
        if held and knob.key(held, v2) != knob.key(text, v2):
            note = _join(note, f"kernel holds {held!r}")
        return _Attempt(WriteResult(write, p.path, text, ok=True, previous=previous, held=held), note, final=final)

    def _mirrored_value(self, p: _Prepared, current: str) -> tuple[int | str, int]:
        """The value to render (a CFS quota the unit's property keeps exactly, when a mirror is attached) and the
        CFS period it goes with."""
        value = p.write.value
        if self.mirror is None or p.write.resource not in (CgroupResource.CPU_CFS_QUOTA, CgroupResource.CPU_CFS_PERIOD):
            return value, 0
        period_text = cpu_max_field(current, 1) if self._v2 else self._read_back(os.path.join(p.dir, "cpu.cfs_period_us"))
        period_us = int(period_text) if period_text.isdigit() else 100_000
        if p.write.resource is CgroupResource.CPU_CFS_QUOTA and isinstance(value, int) and value >= 0:
            value = self.mirror.quota_us(p.write.cgroup_dir, value, period_us)
        return value, period_us

    def _mirror(self, p: _Prepared, text: str, previous: str, period_us: int) -> None:
        if self.mirror is not None:
            self.mirror.written(p.write.cgroup_dir, p.knob.file(self._v2), text, previous,
                                period_us=period_us or 100_000)

    def _controller_missing(self, p: _Prepared, text: str) -> UnsupportedResourceError | None:
        """On v2 a file is missing when its controller is not handed down by the parent's cgroup.subtree_control
        (cpuset.cpus in kubepods-besteffort.slice until something turns cpuset on): say so, not just ENOENT."""
        controller = _V2_CONTROLLER.get(p.knob.subsystem, p.knob.subsystem)
        if not missing_controllers(self._real_root(p.knob.subsystem), p.write.cgroup_dir, (controller,)):
            return None
        parent = os.path.dirname(p.write.cgroup_dir.strip("/")) or "the root"
        return UnsupportedResourceError(
            f"read {p.path}: ENOENT: the {controller} controller is not enabled on {p.write.cgroup_dir} "
            f"(not in {parent}'s cgroup.subtree_control)", path=p.path, value=text)

    def _inherited_instead(self, p: _Prepared, text: str, exc: OSError) -> str:
        """v2 refuses to empty the cpuset of a cgroup that has tasks (ENOSPC), so "inherit again" (what
        `hookserver cleanup` restores where the kubelet left the file empty) cannot be had there; the nearest is
        the set it would inherit, the parent's effective set. Writes that and returns it; "" when this is not
        that case or that write fails too (the caller then reports the first error)."""
        if not (self._v2 and p.knob.v2_inherited and not text.strip() and exc.errno == errno.ENOSPC):
            return ""
        inherited = self._read_back(os.path.join(os.path.dirname(p.dir), p.knob.v2_inherited))
        if not inherited:
            return ""
        try:
            self._files.write(p.path, inherited)
        except OSError as again:
            logger.debug("cpuset fallback to %r for %s failed: %s", inherited, p.path, again)
            return ""
        return inherited

    def _read_back(self, path: str) -> str:
        try:
            return self._files.read(path).strip()
        except OSError as exc:
            logger.debug("read-back of %s failed: %s", path, exc)
            return ""

    def _record(self, p: _Prepared, attempt: _Attempt | None, extra: str = "") -> _Attempt | None:
        """Audit and count one attempt (a grow pass with nothing to widen is neither)."""
        if attempt is None:
            return None
        r = attempt.result
        state = "error" if not r.ok else ("skipped" if r.skipped else "ok")
        reason = p.write.reason
        if attempt.note or extra:
            reason = f"{reason} [{_join(attempt.note, extra.lstrip('; '))}]".lstrip()
        self.store.audit.record_write(
            WriteRecord(
                ts=self.store.clock(), path=r.path, value=r.held or r.value, ok=r.ok, owner=p.write.owner,
                reason=reason, previous=r.previous, skipped=r.skipped, error=r.error,
            )
        )
        if self.metrics is not None:
            self.metrics.cgroup_writes.labels(p.write.resource.value, state).inc()
        if not r.ok:
            logger.debug("cgroup write failed: %s", r.error)
        return attempt


def _pending_quota(pending: Sequence[_Prepared], after: int, done: set[int], directory: str) -> int | None:
    for j in range(after + 1, len(pending)):
        p = pending[j]
        if j not in done and p.dir == directory and p.write.resource is CgroupResource.CPU_CFS_QUOTA:
            return j
    return None


def _merge(knob: Knob, current: str, text: str, v2: bool) -> str | None:
    """Pass-1 text for a MAX or UNION knob, or None to keep the current value."""
    old, new = knob.key(current, v2), knob.key(text, v2)
    if knob.merge is Merge.MAX:
        if isinstance(old, int) and isinstance(new, int) and new <= old:
            return None
        return text
    if isinstance(old, frozenset) and isinstance(new, frozenset):
        if new <= old:
            return None
        assert knob.unkey is not None
        return knob.unkey(old | new, v2)
    return text


def _failed(p: _Prepared, value: str, previous: str, err: ExecutorError, code: int | None) -> _Attempt:
    result = WriteResult(p.write, p.path, value, ok=False, error=f"{type(err).__name__}: {err}", previous=previous)
    return _Attempt(result, "", code or 0, type(err))


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a and b else (a or b)


def build_executor(
    settings: CgroupSettings,
    *,
    store: StateStore,
    roots: SystemRoots,
    metrics: HookMetrics | None = None,
    clock: Callable[[], float] = time.monotonic,
    layout: CgroupLayout | None = None,
    files: CgroupFiles | None = None,
) -> CgroupExecutor:
    """The executor for these settings: detects the layout (unless given) and sizes the write cache."""
    return CgroupExecutor(
        layout or CgroupLayout.detect(settings, roots),
        store=store, metrics=metrics, clock=clock,
        force_update_seconds=settings.force_update_seconds, files=files,
    )
