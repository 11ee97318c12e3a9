"""The `hook:` settings: the koord-runtime-proxy front door and what every hook door shares (failure policy,
budgets and breakers, the hot path's interpreter and GC tuning). A leaf pydantic module: the proxy server and
the daemon read it, `hookserver.config` collects it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["GpuEnvSettings", "HookServerSettings"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuEnvSettings(_Frozen):
    """GPU injection (`hook.gpu`; hookserver/hooks/plugins/gpu_env.py). koordlet's flag:
    `--hami-core-library-directory-path` (despite the name, the library file's path)."""

    hami_core_library_path: str = "/usr/local/vgpu/libvgpu.so"

    @field_validator("hami_core_library_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or "\x00" in value or value.rstrip("/") == "" or ".." in value.split("/"):
            raise ValueError(f"must be an absolute file path without '..' (got {value!r})")
        return value


class HookServerSettings(_Frozen):
    """The koord-runtime-proxy front door."""

    socket: str = "/var/run/koordlet/koordlet.sock"
    # The path the proxy dials, written into the registration file (differs from `socket` in a DaemonSet
    # where the host path is mounted elsewhere). Empty means the same as `socket`.
    host_endpoint: str = ""
    registration_dir: str = "/etc/runtime/hookserver.d"
    registration_name: str = "hookserver"
    socket_mode: int = 0o660
    failure_policy: Literal["Ignore", "Fail"] = "Ignore"
    disable_stages: tuple[str, ...] = ()
    max_workers: int = Field(default=8, ge=1, le=256)
    # Per-hook time budget and breaker (every door; see hookserver.hooks.breaker).
    hook_budget_ms: float = Field(default=50.0, gt=0, le=2000)
    breaker_trip_after: int = Field(default=3, ge=1, le=1000)
    breaker_stuck_ms: float = Field(default=500.0, gt=0, le=60000)
    breaker_cool_down_s: float = Field(default=30.0, gt=0, le=3600)
    # koordlet's --disable-unset-cpu-quota: keep the CFS quota of pods koord-scheduler bound to a cpuset
    # (CPUSetAllocator unsets it by default, koordinator#489).
    disable_unset_cpu_quota: bool = False
    # The GIL switch interval while serving (`hookserver.aio.interpreter`): how long the event loop's hot path
    # may wait for a busy background thread to hand over the GIL. 1 ms measured better than CPython's 5 ms in
    # every A/B (interpreter.py's module doc; `python -m tests.bench nri_busy` compares two values side by side).
    switch_interval_ms: float = Field(default=1.0, gt=0, le=100)
    # The hot gate (`hookserver.aio.hotgate`): background loops pause at safe points while a hook is answered
    # and for `yield_linger_ms` after it (a pod wave's calls come back to back), at most `yield_max_defer_ms`
    # at one point, so a stream of hooks delays background work but cannot starve it.
    background_yield: bool = True
    yield_linger_ms: float = Field(default=2.0, ge=0, le=1000)
    yield_max_defer_ms: float = Field(default=50.0, gt=0, le=10000)
    # Garbage collection off the hot path (`hookserver.aio.gcpacer`): automatic collection off while serving,
    # the same collections run from one thread every `gc_pace_ms` once the gate is quiet. 0 leaves CPython's own.
    gc_pace_ms: float = Field(default=20.0, ge=0, le=1000)
    # Generation 0 paced too (CPython's own kept as a backstop at 10x its threshold): background threads' young
    # collections otherwise land inside hooks (gcpacer.py's module doc has the measurement). Needs gc_pace_ms > 0.
    gc_pace_young: bool = True
    # A due collection that finds a hook in flight waits for a quiet moment up to this long (generation 0 only until
    # half-way to CPython's backstop), then at the gate as before: 0.3-50 ms walks otherwise ran mid-wave.
    gc_quiet_wait_ms: float = Field(default=1000.0, ge=0, le=60000)
    # Survivors of a paced full collection are frozen (`gc.freeze()`) like the start-up heap, so the next full
    # one walks only what is new; every `gc_deep_every_s` all is unfrozen and collected once (cycles among old objects).
    gc_freeze_survivors: bool = True
    gc_deep_every_s: float = Field(default=600.0, gt=0, le=86400)
    # Heap kept warm for the NRI sync's large buffers (`hookserver.aio.heapreserve`): a sync chunk is read, joined
    # and decoded without page faults (8 MiB covers a 500-pod sync). Resident memory; 0 leaves glibc's own thresholds.
    heap_reserve_mib: int = Field(default=8, ge=0, le=32)
    # GPUEnvInject's HAMi-core library (koordlet's --hami-core-library-directory-path).
    gpu: GpuEnvSettings = GpuEnvSettings()

    @model_validator(mode="after")
    def _stuck_over_budget(self) -> HookServerSettings:
        if self.breaker_stuck_ms < self.hook_budget_ms:
            raise ValueError(
                f"breaker_stuck_ms ({self.breaker_stuck_ms}) must be at least hook_budget_ms ({self.hook_budget_ms})"
            )
        return self
