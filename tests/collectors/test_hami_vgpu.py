"""hami_vgpu: HAMi-core shared cache files, packed byte for byte, read into per-container and per-pod series."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import ValidationError

from collectors.settings import CollectorSettings
from collectors.hami_vgpu import with_hami_vgpu_gate
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from hookserver.system import hami_cache
from hookserver.system.hami_cache import VgpuCacheError, iter_regions, parse_region, read_entry
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod, make_scheduler
from tests.collectors.hami_region import REGION_SIZE, GiB, MiB, Proc, pack_region, write_entry
from tests.collectors.test_gpu import _two_gpus

UID_A, UID_B, UID_GONE = "0b6f1c2e-aaaa-4c1e-9d0a-000000000001", "0b6f1c2e-bbbb-4c1e-9d0a-000000000002", "dead-pod"
POD_A = "kubepods/burstable/pod" + UID_A
POD_B = "kubepods/besteffort/pod" + UID_B
UUID0 = "GPU-aaa"  # the fake NVML's minor 0
UUID1 = "GPU-bbb"  # minor 1


def _world(store: StateStore) -> None:
    store.upsert_pod(make_pod(UID_A, cgroup_parent="/" + POD_A, qos_class="LS"))
    store.upsert_container(make_container("ca1", UID_A, name="infer", cgroup_parent="/" + POD_A))
    store.upsert_container(make_container("ca2", UID_A, name="sidecar", cgroup_parent="/" + POD_A))
    store.upsert_pod(make_pod(UID_B, cgroup_parent="/" + POD_B, qos_class="BE"))
    store.upsert_container(make_container("cb1", UID_B, name="batch", cgroup_parent="/" + POD_B))


def _last(store: StateStore, metric: str, **labels: str) -> float | None:
    last = store.series.last(series_key(metric, **labels))
    return None if last is None else last[1]


def _scheduler(host: FakeHost, clock: FakeClock, store: StateStore, directory: Path, *, gpu: bool = True,
               registry: CollectorRegistry | None = None):  # type: ignore[no-untyped-def]
    return make_scheduler(
        host, clock, store, nvml=_two_gpus() if gpu else None, registry=registry,
        hami_vgpu={"enabled": True}, hami_vgpu_dir=str(directory),
    )


# -- the layout ----------------------------------------------------------------------------------------------


def test_the_packed_layout_is_hami_cores_size() -> None:
    # sizeof(shared_region_t) on LP64, from HAMi-core's header compiled by gcc (x86-64): 2 008 952 bytes.
    assert REGION_SIZE == 2_008_952
    assert hami_cache.REGION_SIZE == REGION_SIZE
    assert len(pack_region([UUID0])) == REGION_SIZE


@pytest.mark.parametrize("nprocs", [0, 1, 5])
def test_values_are_the_packed_numbers_summed_over_live_processes(tmp_path: Path, nprocs: int) -> None:
    procs = [Proc(100 + i, used={0: (i + 1) * GiB, 1: (i + 3) * MiB}, sm={0: 10 + i, 1: 2 * i}) for i in range(nprocs)]
    data = pack_region([UUID0, UUID1], limits=[8 * GiB, 4 * GiB], sm_limits=[30, 0], procs=procs, minor=1)
    write_entry(tmp_path, UID_A, "infer", data)
    region = read_entry(str(tmp_path), f"{UID_A}_infer")
    assert (region.major, region.minor, region.processes) == (1, 1, nprocs)
    assert [d.uuid for d in region.devices] == [UUID0, UUID1]
    d0, d1 = region.devices
    assert d0.memory_used_bytes == sum((i + 1) * GiB for i in range(nprocs))
    assert d0.sm_util_percent == sum(10 + i for i in range(nprocs))
    assert d1.memory_used_bytes == sum((i + 3) * MiB for i in range(nprocs))
    assert d1.sm_util_percent == sum(2 * i for i in range(nprocs))
    assert (d0.memory_limit_bytes, d0.sm_limit_percent, d1.memory_limit_bytes, d1.sm_limit_percent) == (
        8 * GiB, 30, 4 * GiB, 0)
    assert region.last_kernel_time == 1_700_000_000


def test_exited_and_free_slots_are_not_counted(tmp_path: Path) -> None:
    procs = [
        Proc(10, used={0: 1 * GiB}, sm={0: 20}),
        Proc(0, used={0: 7 * GiB}, sm={0: 70}),  # pid 0: the process exited, HAMi-core clears the slot lazily
        Proc(12, used={0: 5 * GiB}, sm={0: 50}, status=0),  # status 0: a free slot
        Proc(13, used={0: 2 * GiB}, sm={0: 5}, status=2),  # suspended: still holds its memory
    ]
    write_entry(tmp_path, UID_A, "infer", pack_region([UUID0], procs=procs))
    region = read_entry(str(tmp_path), f"{UID_A}_infer")
    assert region.processes == 2
    assert (region.devices[0].memory_used_bytes, region.devices[0].sm_util_percent) == (3 * GiB, 25)


def test_slots_beyond_proc_num_are_not_read(tmp_path: Path) -> None:
    procs = [Proc(10, used={0: 1 * GiB}), Proc(11, used={0: 9 * GiB})]
    write_entry(tmp_path, UID_A, "infer", pack_region([UUID0], procs=procs, proc_num=1))
    assert read_entry(str(tmp_path), f"{UID_A}_infer").devices[0].memory_used_bytes == 1 * GiB


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"magic": 12345}, "bad_magic"),
        ({"magic": 0}, "uninitialised"),
        ({"major": 2}, "unsupported_version"),
        ({"device_num": 17}, "corrupt"),
        ({"proc_num": 1025}, "corrupt"),
        ({"proc_num": -1}, "corrupt"),
    ],
)
def test_a_corrupt_header_is_refused_with_its_kind(tmp_path: Path, kwargs: dict[str, int], kind: str) -> None:
    write_entry(tmp_path, UID_A, "infer", pack_region([UUID0], procs=[Proc(1, used={0: GiB})], **kwargs))
    with pytest.raises(VgpuCacheError) as err:
        read_entry(str(tmp_path), f"{UID_A}_infer")
    assert err.value.kind == kind
    assert f"{UID_A}_infer.cache" in str(err.value)


def test_truncated_files_are_refused(tmp_path: Path) -> None:
    data = pack_region([UUID0], procs=[Proc(1, used={0: GiB})])
    for size in (0, 10, 1856, REGION_SIZE - 1):
        write_entry(tmp_path, UID_A, "infer", data[:size])
        with pytest.raises(VgpuCacheError) as err:
            read_entry(str(tmp_path), f"{UID_A}_infer")
        assert err.value.kind == "truncated", size
    # Cut between the fstat and the reads (a process in the container truncating it): a short read, no SIGBUS.
    head, tail = data[:1856], data[2_008_896:2_008_920]
    with pytest.raises(VgpuCacheError) as err:
        parse_region(head, data[1856:1856 + 100], tail)
    assert err.value.kind == "truncated"
    with pytest.raises(VgpuCacheError):
        parse_region(head[:100], b"", tail)


@settings(max_examples=200, deadline=None)
@given(
    head=st.binary(min_size=1856, max_size=1856),
    nslots=st.integers(min_value=0, max_value=3),
    slot_bytes=st.binary(min_size=0, max_size=3 * 1960),
    tail=st.binary(min_size=24, max_size=24),
    ndev=st.integers(min_value=0, max_value=16),
    valid_header=st.booleans(),
)
def test_any_bytes_give_a_region_or_a_named_error(
    head: bytes, nslots: int, slot_bytes: bytes, tail: bytes, ndev: int, valid_header: bool
) -> None:
    if valid_header:  # past the magic, version and count checks: the UUIDs and slots are what is fuzzed
        head = (19920718).to_bytes(4, "little") + (1).to_bytes(4, "little") + head[8:56] + ndev.to_bytes(8, "little") + head[64:]
        tail = nslots.to_bytes(4, "little") + tail[4:]
        slot_bytes = slot_bytes.ljust(nslots * 1960, b"\x01")
    try:
        region = parse_region(head, slot_bytes, tail)
    except VgpuCacheError as exc:
        assert not valid_header
        assert exc.kind in {"bad_magic", "uninitialised", "unsupported_version", "corrupt", "truncated"}
    else:
        if valid_header:
            assert len(region.devices) + len(region.skipped_devices) == ndev
        assert 0 <= region.processes <= 1024
        assert all(d.uuid.isprintable() and d.uuid for d in region.devices)


def test_a_uuid_that_is_not_text_leaves_that_device_out(tmp_path: Path) -> None:
    raw = b"\xff\xfe-not-a-uuid".ljust(96, b"\0") + UUID1.encode().ljust(96, b"\0")
    procs = [Proc(1, used={0: GiB, 1: 2 * GiB})]
    write_entry(tmp_path, UID_A, "infer", pack_region([UUID0, UUID1], procs=procs, raw_uuids=raw))
    region = read_entry(str(tmp_path), f"{UID_A}_infer")
    assert [(d.index, d.uuid, d.memory_used_bytes) for d in region.devices] == [(1, UUID1, 2 * GiB)]
    assert region.skipped_devices == ("device 0: UUID is not text",)


def test_symlinks_never_lead_out_of_the_directory(tmp_path: Path) -> None:
    root, outside = tmp_path / "containers", tmp_path / "outside"
    good = pack_region([UUID0], procs=[Proc(1, used={0: GiB})])
    write_entry(outside, UID_A, "infer", good)
    root.mkdir()
    # The entry is a symlink to a directory outside.
    (root / f"{UID_A}_infer").symlink_to(outside / f"{UID_A}_infer")
    # The entry is real, its cache file a symlink to a file outside.
    (root / f"{UID_B}_batch").mkdir()
    (root / f"{UID_B}_batch" / f"{UID_B}_batch.cache").symlink_to(outside / f"{UID_A}_infer" / f"{UID_A}_infer.cache")
    # A FIFO where the file should be: refused without blocking.
    (root / f"{UID_A}_sidecar").mkdir()
    os.mkfifo(root / f"{UID_A}_sidecar" / f"{UID_A}_sidecar.cache")
    got = {entry: (r.kind if isinstance(r, VgpuCacheError) else "read") for entry, r in iter_regions(str(root))}
    assert got == {f"{UID_A}_infer": "symlink", f"{UID_B}_batch": "symlink", f"{UID_A}_sidecar": "not_regular"}


def test_vanished_and_absent_files(tmp_path: Path) -> None:
    with pytest.raises(VgpuCacheError) as err:
        read_entry(str(tmp_path), f"{UID_A}_infer")
    assert err.value.kind == "vanished"
    (tmp_path / f"{UID_A}_infer").mkdir()
    with pytest.raises(VgpuCacheError) as err:
        read_entry(str(tmp_path), f"{UID_A}_infer")
    assert err.value.kind == "absent"
    assert hami_cache.list_entries(str(tmp_path / "not-yet")) == []


def test_hamis_own_file_name_is_read_and_two_files_are_ambiguous(tmp_path: Path) -> None:
    """HAMi's device plugin names the file `<random uuid>.cache` in the same directory layout."""
    entry = tmp_path / f"{UID_A}_infer"
    entry.mkdir()
    (entry / "libvgpu.so").write_bytes(b"\x7fELF")  # not a cache file
    (entry / "5d2c6f1e-0e4b-4f7e-9a55-2f1b7b8c9d00.cache").write_bytes(pack_region([UUID0], procs=[Proc(1, used={0: GiB})]))
    assert read_entry(str(tmp_path), f"{UID_A}_infer").devices[0].memory_used_bytes == GiB
    (entry / "second.cache").write_bytes(pack_region([UUID0]))
    with pytest.raises(VgpuCacheError) as err:
        read_entry(str(tmp_path), f"{UID_A}_infer")
    assert err.value.kind == "ambiguous"
    # koordlet's own name wins over any other.
    (entry / f"{UID_A}_infer.cache").write_bytes(pack_region([UUID0], procs=[Proc(1, used={0: 3 * GiB})]))
    assert read_entry(str(tmp_path), f"{UID_A}_infer").devices[0].memory_used_bytes == 3 * GiB


# -- the collector -------------------------------------------------------------------------------------------


def test_series_per_container_and_pod_with_the_gpu_minor(
    host_v2: FakeHost, clock: FakeClock, store: StateStore, tmp_path: Path
) -> None:
    _world(store)
    root = tmp_path / "containers"
    write_entry(root, UID_A, "infer", pack_region(
        [UUID0, UUID1], limits=[8 * GiB, 6 * GiB], sm_limits=[40, 40],
        procs=[Proc(1, used={0: 3 * GiB, 1: 1 * GiB}, sm={0: 25, 1: 5}), Proc(2, used={0: 1 * GiB}, sm={0: 10})],
    ))
    write_entry(root, UID_A, "sidecar", pack_region([UUID0], limits=[2 * GiB], procs=[Proc(7, used={0: GiB}, sm={0: 4})]))
    write_entry(root, UID_B, "batch", pack_region([UUID1], limits=[4 * GiB], procs=[]))
    registry = CollectorRegistry()
    sched = _scheduler(host_v2, clock, store, root, registry=registry)
    sched.run_once()
    state = sched.status()["collectors"]["hami_vgpu"]
    assert (state["enabled"], state["failures"], state["read_errors_total"]) == (True, 0, 0)
    a = {"pod": UID_A, "qos": "LS"}
    d0, d1 = {"device": UUID0, "minor": "0"}, {"device": UUID1, "minor": "1"}
    assert _last(store, "container_vgpu_memory_usage", container="ca1", **a, **d0) == 4 * GiB
    assert _last(store, "container_vgpu_core_usage", container="ca1", **a, **d0) == 35.0
    assert _last(store, "container_vgpu_memory_usage", container="ca1", **a, **d1) == 1 * GiB
    assert _last(store, "container_vgpu_memory_limit", container="ca1", **a, **d1) == 6 * GiB
    assert _last(store, "container_vgpu_core_limit", container="ca1", **a, **d0) == 40.0
    assert _last(store, "container_vgpu_memory_usage", container="ca2", **a, **d0) == 1 * GiB
    assert store.series.select("container_vgpu_core_limit", {"container": "ca2"}) == []  # no SM limit set
    assert _last(store, "pod_vgpu_memory_usage", **a, **d0) == 5 * GiB
    assert _last(store, "pod_vgpu_core_usage", **a, **d0) == 39.0
    assert _last(store, "pod_vgpu_core_usage", **a, **d1) == 5.0
    b = {"pod": UID_B, "qos": "BE"}
    assert _last(store, "container_vgpu_memory_usage", container="cb1", **b, **d1) == 0.0
    assert _last(store, "container_vgpu_memory_limit", container="cb1", **b, **d1) == 4 * GiB
    text = generate_latest(registry).decode()
    line = next(x for x in text.splitlines()
                if x.startswith("hookserver_container_vgpu_memory_usage_bytes{") and 'container_id="ca1"' in x
                and f'device="{UUID0}"' in x)
    assert 'container_name="infer"' in line and 'minor="0"' in line and f'pod_uid="{UID_A}"' in line
    assert float(line.rsplit(" ", 1)[1]) == 4 * GiB


def test_without_the_gpu_inventory_the_minor_label_is_left_out(
    host_v2: FakeHost, clock: FakeClock, store: StateStore, tmp_path: Path
) -> None:
    _world(store)
    root = tmp_path / "containers"
    write_entry(root, UID_A, "infer", pack_region(["GPU-zzz"], procs=[Proc(1, used={0: GiB})]))
    sched = _scheduler(host_v2, clock, store, root, gpu=False)
    sched.run_once()
    assert _last(store, "container_vgpu_memory_usage", pod=UID_A, container="ca1", qos="LS", device="GPU-zzz") == GiB


def test_bad_files_are_skipped_counted_and_logged_once(
    host_v2: FakeHost, clock: FakeClock, store: StateStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _world(store)
    root = tmp_path / "containers"
    write_entry(root, UID_A, "infer", pack_region([UUID0], procs=[Proc(1, used={0: 2 * GiB})]))
    write_entry(root, UID_A, "sidecar", pack_region([UUID0], magic=7))
    write_entry(root, UID_B, "batch", pack_region([UUID1])[:4096])
    write_entry(root, UID_GONE, "old", pack_region([UUID1]))  # a pod the agent no longer knows
    (root / "no-separator").mkdir()
    (root / f"{UID_B}_starting").mkdir()  # no CUDA process yet
    sched = _scheduler(host_v2, clock, store, root)
    collector = sched._collectors["hami_vgpu"]  # noqa: SLF001 - the skip counts are the collector's own
    with caplog.at_level(logging.WARNING, logger="collectors.hami_vgpu"):
        sched.run_once()
        clock.advance(1.0)
        sched.run_once()
    state = sched.status()["collectors"]["hami_vgpu"]
    assert state["failures"] == 0
    assert state["read_errors_total"] == 6  # bad magic, truncated, bad name: twice each
    assert collector.skip_counts() == {  # type: ignore[attr-defined]
        "bad_magic": 2, "truncated": 2, "bad_name": 2, "unknown_pod": 2, "absent": 2,
    }
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3, warnings  # once per entry and reason, not once per cycle
    assert any("bad_magic" in w and "initialized_flag 7" in w for w in warnings)
    # The good file is read in spite of its neighbours.
    assert _last(store, "container_vgpu_memory_usage", pod=UID_A, container="ca1", qos="LS", device=UUID0, minor="0") == 2 * GiB


def test_an_entry_of_a_container_the_agent_has_not_seen_still_counts_to_its_pod(
    host_v2: FakeHost, clock: FakeClock, store: StateStore, tmp_path: Path
) -> None:
    _world(store)
    root = tmp_path / "containers"
    write_entry(root, UID_B, "late", pack_region([UUID1], procs=[Proc(1, used={0: 3 * GiB}, sm={0: 12})]))
    sched = _scheduler(host_v2, clock, store, root)
    sched.run_once()
    assert store.series.select("container_vgpu_memory_usage", {"pod": UID_B}) == []
    assert _last(store, "pod_vgpu_memory_usage", pod=UID_B, qos="BE", device=UUID1, minor="1") == 3 * GiB


def test_off_by_default_and_no_directory_is_no_error(
    host_v2: FakeHost, clock: FakeClock, store: StateStore, tmp_path: Path
) -> None:
    off = make_scheduler(host_v2, clock, store)
    off.run_once()
    assert off.status()["collectors"]["hami_vgpu"]["disabled_reason"] == "disabled in settings"
    on = _scheduler(host_v2, clock, store, tmp_path / "absent", gpu=False)
    on.run_once()
    state = on.status()["collectors"]["hami_vgpu"]
    assert (state["enabled"], state["runs"], state["read_errors_total"], state["last_samples"]) == (True, 1, 0, 0)


def test_the_gate_sets_the_toggle_and_the_directory() -> None:
    base = CollectorSettings()
    on = with_hami_vgpu_gate(base, gate_on=True, library_path="/opt/hami/lib/libvgpu.so")
    assert (on.hami_vgpu.enabled, on.hami_vgpu_dir) == (True, "/opt/hami/lib/containers")
    assert on.gpu == base.gpu
    off = with_hami_vgpu_gate(base, gate_on=False, library_path="/usr/local/vgpu/libvgpu.so")
    assert (off.hami_vgpu.enabled, off.hami_vgpu_dir) == (False, "/usr/local/vgpu/containers")
    # Enabled in the file without the gate (HAMi's own device plugin), with a directory of its own: both kept.
    explicit = CollectorSettings.model_validate({"hami_vgpu": {"enabled": True}, "hami_vgpu_dir": "/var/hami/containers"})
    kept = with_hami_vgpu_gate(explicit, gate_on=False, library_path="/opt/hami/lib/libvgpu.so")
    assert (kept.hami_vgpu.enabled, kept.hami_vgpu_dir) == (True, "/var/hami/containers")
    for bad in ("relative/dir", "/a/../b", "/a\x00b"):
        with pytest.raises(ValidationError, match="hami_vgpu_dir"):
            CollectorSettings.model_validate({"hami_vgpu_dir": bad})
