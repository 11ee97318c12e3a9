"""`hookserver cleanup`: put back what the agent changed on the node, for operators who uninstall it.

Runs while the agent is stopped, with the same settings as `serve` (`--config`, `--state-dir`,
`--cgroup-root`, `--proc-root`, `--sys-root`, ...). Reads what to restore from the state dir
(`node-originals.json`, written atomically at each first write) and restores:
  * sysctls (vm.min_free_kbytes, watermark_scale_factor, memcg_reap_background) to their recorded values;
  * systemd unit properties (systemd driver) the agent kept its values in get the kubelet's values back;
  * the BE tier's CFS quota and cpuset to what they were before CPU suppress (the cpuset also on every
    BE pod and container below, widened top-down so the kernel accepts it);
  * resctrl groups the agent created (class-level and pod-level `koordlet-<uid>`) are removed (their tasks
    return to the default group);
  * processes whose oom_score_adj OOMScoreAdj changed get their recorded score back, when the same process
    (pid and start time) still runs; the others are listed as gone;
  * the htb TCNetworkQoS put on the network interface is deleted (the kernel's default qdisc returns);
  * pod processes holding a core-scheduling cookie get the default cookie back (CoreSched);
  * the batch/mid capacity offer is withdrawn: in cluster mode a server-side apply of nothing to the Node's
    status with the agent's field manager (fields another writer owns stay theirs), in standalone mode the
    state dir's capacity document is removed. Without this, a node whose agent is gone would keep offering
    batch capacity nobody measures any more.
Prints one line per item and exits 0 when everything was restored, 1 when something failed (the
failed items stay recorded, so a second run retries them). Refuses (exit 2) while the agent's hook or
debug socket answers, unless `--force`: a running agent would undo the cleanup within a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from hookserver.config import Settings
from hookserver.errors import HookServerError
from hookserver.executor.plan import CgroupResource, CgroupWrite, FileWrite, NetCommand, ResourcePlan
from hookserver.store.originals import NodeOriginals
from hookserver.system.files import read_text
from hookserver.system.socketfiles import socket_is_live
from hookserver.system.coresched import CoreSchedKernel
from hookserver.system.processes import read_start_ticks, split_process_key
from qos.isolation.oom_score_adj import restore_writes
from qos.snapshot.kernel import NODE_SETTINGS
from qos.snapshot.oom_reader import ORIGINALS_SECTION
from qos.snapshot.pod_resctrl_reader import POD_GROUPS_SECTION
from qos.snapshot.tc_reader import TC_SECTION

__all__ = ["add_cleanup_parser", "run_cleanup"]


def add_cleanup_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                       parent: argparse.ArgumentParser) -> None:
    cleanup = sub.add_parser(
        "cleanup", parents=[parent], add_help=False,  # `serve`'s flags (and its -h), so the settings are the same
        help="restore what the agent changed on the node (sysctls, BE tier quota and cpuset, resctrl groups, "
             "processes' oom_score_adj, the network interface's tc htb, core-sched cookies) and withdraw its "
             "batch/mid capacity offer",
    )
    cleanup.add_argument("--force", action="store_true", help="run even though the agent's sockets answer")


def _cpuset_plan(hier: str, directory: str, value: str) -> ResourcePlan:
    """`value` for the BE tier's cpuset and every BE pod and container below it, leveled (widened top-down)."""
    levels: list[tuple[CgroupWrite, ...]] = [(CgroupWrite(directory, CgroupResource.CPUSET_CPUS, value,
                                                          owner="cleanup", reason="restore the BE tier cpuset"),)]
    current = [directory]
    for _ in range(2):  # pods, then containers
        below = []
        for rel_dir in current:
            try:
                below += sorted(f"{rel_dir}/{e.name}" for e in os.scandir(os.path.join(hier, rel_dir)) if e.is_dir())
            except OSError:
                pass
        if below:
            levels.append(tuple(CgroupWrite(d, CgroupResource.CPUSET_CPUS, value, owner="cleanup",
                                            reason="restore BE cpuset") for d in below))
        current = below
    return ResourcePlan(levels=tuple(levels), leveled=True, cacheable=False)


def _restore_units(settings: Settings, originals: NodeOriginals, out: list[str]) -> int:
    """systemd unit properties the agent kept its values in (the systemd driver): the kubelet's values back, so
    a later daemon-reload does not re-apply the agent's. A unit that is gone has nothing to restore."""
    from hookserver.systemd import ORIGINALS_SECTION, PRIVATE_SOCKET, SystemdClient, restore_units

    recorded = originals.section(ORIGINALS_SECTION)
    if not recorded:
        return 0
    client = SystemdClient(settings.cgroup.systemd_socket or PRIVATE_SOCKET, timeout_s=settings.cgroup.systemd_timeout_s)
    try:
        results = restore_units(client, recorded)
    except HookServerError as exc:
        out.append(f"FAILED    systemd unit properties ({len(recorded)} kept): {exc}")
        return 1
    finally:
        client.close()
    failed = 0
    for key, error in results:
        if error is None:
            out.append(f"restored  systemd {key} = {recorded[key]}")
            originals.forget(ORIGINALS_SECTION, key)
        else:
            failed += 1
            out.append(f"FAILED    systemd {key}: {error}")
    return failed


def _restore_cgroups(settings: Settings, originals: NodeOriginals, out: list[str]) -> int:
    """The BE tier quota and cpuset (recorded as `cpu:<dir>/<file>` / `cpuset:<dir>/<file>`)."""
    recorded = originals.section("cgroup")
    if not recorded:
        return 0
    from hookserver.executor import build_executor
    from hookserver.store import StateStore
    from hookserver.system import SystemRoots

    roots = SystemRoots(proc=settings.proc_root, sys=settings.sys_root, cgroup=settings.cgroup.root)
    executor = build_executor(settings.cgroup, store=StateStore(), roots=roots)
    failed = 0
    for key, value in sorted(recorded.items()):
        subsystem, _, rel = key.partition(":")
        directory, _, name = rel.rpartition("/")
        if name in ("cpu.cfs_quota_us", "cpu.max"):
            token = value.split()[0] if value.split() else "-1"
            quota = -1 if token in ("max", "-1") else int(token) if token.lstrip("-").isdigit() else -1
            plan = ResourcePlan.single([CgroupWrite(directory, CgroupResource.CPU_CFS_QUOTA, quota, owner="cleanup",
                                                    reason="restore the BE tier quota")], cacheable=False)
        elif name == "cpuset.cpus":
            hier = executor.layout.hierarchy_root("cpuset")
            if not value.strip() and executor.layout.writes_v2:
                # v2, the tier inherited its parent's CPUs: first widen everything top-down to that set (the
                # kernel will not empty a cpuset whose cgroup has tasks; those keep the set they would inherit),
                # then empty what it takes, bottom-up.
                wide = read_text(os.path.join(hier, os.path.dirname(directory), "cpuset.cpus.effective")) or ""
                if wide.strip():
                    executor.apply(_cpuset_plan(hier, directory, wide.strip()))
            plan = _cpuset_plan(hier, directory, value)
        else:
            out.append(f"skipped   {key}: unknown file")
            continue
        report = executor.apply(plan)
        if report.ok:
            changed = sum(1 for r in report.results if not r.skipped)
            out.append(f"restored  {subsystem}:{directory}/{name} = {value}" + (f" ({changed} cgroups written)" if changed else " (already)"))
            originals.forget("cgroup", key)
        else:
            failed += 1
            out.append(f"FAILED    {subsystem}:{directory}/{name} = {value}: {report.errors[0].error}")
    return failed


def _oom_score_restores(settings: Settings, originals: NodeOriginals, out: list[str]) -> list[FileWrite]:
    """OOMScoreAdj's recorded scores, for the processes that still run: a process that exited (or whose pid
    another process now has, told by its start time) cannot be given its score back; it is said and forgotten."""
    recorded = originals.section(ORIGINALS_SECTION)
    live: dict[str, str] = {}
    for key, value in sorted(recorded.items()):
        parsed = split_process_key(key)
        if parsed is not None and read_start_ticks(settings.proc_root, parsed[0]) == parsed[1]:
            live[key] = value
            continue
        out.append(f"gone      oom_score_adj of process {key}: the process exited; nothing to restore")
        originals.forget(ORIGINALS_SECTION, key)
    return restore_writes(live, owner="cleanup", why="hookserver cleanup")


def _remove_tc(settings: Settings, originals: NodeOriginals, out: list[str]) -> int:
    """TCNetworkQoS's htb on each interface it changed: deleted (its classes and filters go with it), and the
    kernel puts its default qdisc back. An interface that is gone has nothing left to undo."""
    from hookserver.executor.netcmd import TcExecutor
    from hookserver.store import StateStore

    recorded = originals.section(TC_SECTION)
    tc = TcExecutor(store=StateStore(), originals=originals)
    failed = 0
    for interface, before in sorted(recorded.items()):
        result = tc.apply([NetCommand(("qdisc", "del", "dev", interface, "root"), owner="cleanup",
                                      reason="hookserver cleanup", original="restore",
                                      original_key=(TC_SECTION, interface))])[0]
        if result.ok:
            out.append(f"restored  tc root qdisc of {interface} (the htb removed; was {before})"
                       + (f" ({result.error})" if result.skipped else ""))
        else:
            failed += 1
            out.append(f"FAILED    tc root qdisc of {interface}: {result.error}")
    return failed


def clear_core_sched_cookies(settings: Settings, out: list[str], *, kernel: CoreSchedKernel | None = None) -> int:
    """Every process under the kubelet's pods dir (cpu hierarchy) that holds a core-scheduling cookie goes back
    to the default cookie (CoreSched gave them; the cookies live only as long as their processes). Silent where
    the kernel has no core scheduling: there is nothing to undo."""
    from hookserver.executor import build_executor
    from hookserver.store import StateStore
    from hookserver.system import SystemRoots
    from hookserver.system.coresched import LibcCoreSched, unavailable_reason
    from hookserver.system.cgroupnames import qos_dir, KubeQoS

    cookies = kernel or LibcCoreSched()
    if unavailable_reason(cookies, settings.sys_root).startswith("this kernel has no"):
        return 0
    roots = SystemRoots(proc=settings.proc_root, sys=settings.sys_root, cgroup=settings.cgroup.root)
    layout = build_executor(settings.cgroup, store=StateStore(), roots=roots).layout
    top = os.path.join(layout.hierarchy_root("cpu"), qos_dir(layout.driver, KubeQoS.GUARANTEED))
    held: list[int] = []
    for directory, _dirs, files in os.walk(top):
        if "cgroup.procs" not in files:
            continue
        try:
            with open(os.path.join(directory, "cgroup.procs"), "rb") as handle:
                pids = [int(t) for t in handle.read().split() if t.isdigit()]
        except OSError:
            continue
        for pid in pids:
            try:
                if cookies.get(pid) != 0:
                    held.append(pid)
            except OSError:
                continue
    if not held:
        return 0
    failed = cookies.clear(held)
    if failed:
        out.append(f"FAILED    core-sched cookies of {len(failed)} of {len(held)} processes: not reset (exited?)")
        return 1
    out.append(f"restored  core-sched cookies of {len(held)} pod processes (back to the default cookie)")
    return 0


def _withdraw_capacity(settings: Settings, out: list[str]) -> int:
    """The capacity offer: withdrawn from the Node (cluster mode) or its document removed (standalone)."""
    from hookserver.informer import resolve_mode

    mode = resolve_mode(settings, settings.informer)
    if mode == "standalone" or (mode == "kubelet" and not settings.kubeconfig and not os.environ.get(
            "KUBERNETES_SERVICE_HOST")):
        path = os.path.join(settings.state_dir, settings.capacity.status_file)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            out.append(f"FAILED    capacity document {path}: {exc.strerror or exc}")
            return 1
        out.append(f"withdrawn batch/mid capacity: removed {path}")
        return 0
    from hookserver.informer import NodeCapacityWriter
    from hookserver.informer.transport import ApiClientTransport, load_client_configuration

    try:
        transport = ApiClientTransport(load_client_configuration(settings.kubeconfig),
                                       connect_timeout_s=settings.informer.connect_timeout_s)
    except HookServerError as exc:
        out.append(f"FAILED    batch/mid capacity of node {settings.node_name}: cannot reach the apiserver: {exc}")
        return 1
    try:
        writer = NodeCapacityWriter(transport, node_name=settings.node_name,
                                    field_manager=settings.capacity.field_manager,
                                    timeout_s=settings.capacity.write_timeout_s)
        delivery = writer.withdraw()
    finally:
        transport.close()
    if delivery.result != "ok":
        out.append(f"FAILED    batch/mid capacity of node {settings.node_name}: {delivery.result}: {delivery.detail}")
        return 1
    left = ", ".join(f"{k}={v}" for k, v in sorted(delivery.node_values.items()))
    out.append(f"withdrawn batch/mid capacity of node {settings.node_name} (field manager "
               f"{settings.capacity.field_manager})" + (f"; still on the Node, owned by another writer: {left}"
                                                          if left else ""))
    return 0


def run_cleanup(settings: Settings, *, force: bool = False, stdout: TextIO | None = None) -> int:
    out_stream = stdout if stdout is not None else sys.stdout
    live = [p for p in (settings.hook.socket, settings.debug.socket) if p and socket_is_live(p)]
    if live and not force:
        print(f"hookserver cleanup: the agent is running (socket {live[0]} answers); stop it first, "
              "or pass --force", file=sys.stderr)
        return 2
    originals = NodeOriginals(settings.state_dir)
    lines: list[str] = []
    if originals.problem:
        lines.append(f"WARNING   {originals.problem}")
    from hookserver.executor.sysfiles import SystemFileExecutor
    from hookserver.store import StateStore

    files = SystemFileExecutor(
        {"proc_sys": os.path.join(settings.proc_root, "sys"), "sys": settings.sys_root,
         "resctrl": os.path.join(settings.sys_root, "fs", "resctrl"), "proc": settings.proc_root},
        store=StateStore(), originals=originals,
    )
    writes: list[FileWrite] = [
        FileWrite(NODE_SETTINGS[name][0], NODE_SETTINGS[name][1], value, compare="int",  # type: ignore[arg-type]
                  owner="cleanup", reason="hookserver cleanup", original="restore", original_key=("sysctl", name))
        for name, value in sorted(originals.section("sysctl").items()) if name in NODE_SETTINGS
    ]
    writes += [
        FileWrite("resctrl", group, op="rmdir", owner="cleanup", reason="hookserver cleanup", original="restore",
                  original_key=(section, group))
        for section in ("resctrl_groups", POD_GROUPS_SECTION) for group in sorted(originals.section(section))
    ]
    writes += _oom_score_restores(settings, originals, lines)
    failed = 0
    for result in files.apply(writes):
        w = result.write
        what = (f"resctrl group {w.path} removed" if w.root == "resctrl"
                else f"oom_score_adj of pid {w.path.split('/')[0]} = {w.value}" if w.root == "proc"
                else f"sysctl {w.original_key[1]} = {w.value}")
        if result.ok:
            lines.append(f"restored  {what}" + (" (already)" if result.skipped else f" (was {result.previous})" if result.previous else ""))
        else:
            failed += 1
            lines.append(f"FAILED    {what}: {result.error}")
    failed += _restore_units(settings, originals, lines)
    try:
        failed += _restore_cgroups(settings, originals, lines)
    except HookServerError as exc:
        failed += 1
        lines.append(f"FAILED    BE tier: {exc}")
    failed += _remove_tc(settings, originals, lines)
    try:
        failed += clear_core_sched_cookies(settings, lines)
    except HookServerError as exc:
        failed += 1
        lines.append(f"FAILED    core-sched cookies: {exc}")
    failed += _withdraw_capacity(settings, lines)
    if not lines:
        lines.append(f"nothing to restore (no originals recorded in {settings.state_dir})")
    for line in lines:
        print(line, file=out_stream)
    return 1 if failed else 0
