"""apiserver faults: a second agent in apiserver mode (no --standalone) against the fake apiserver, through the
fault proxy. Each fault runs while pods are created through the agent's hook socket (the hot path must not
care) and pods are added to the fake (the informer must catch up once the fault is lifted, without a human).
"""

from __future__ import annotations

import time

from tests.informer.fake_apiserver import FakeApiServer, make_node, make_pod
from tests.soak.agent import Agent, AgentPaths, metric_sum
from tests.soak.apiproxy import FaultProxy
from tests.soak.campaign import Campaign
from tests.soak.report import Row
from tests.soak.traffic import ProxyClient

__all__ = ["apiserver_faults"]

NODE = "soak-node"
# Short client timeouts so "past every timeout" fits a ten-minute run; the agent's defaults are minutes.
API_ENV = {
    "HOOKSERVER_INFORMER__LIST_TIMEOUT_S": "3",
    "HOOKSERVER_INFORMER__WATCH_IDLE_TIMEOUT_S": "3",
    "HOOKSERVER_INFORMER__CONNECT_TIMEOUT_S": "2",
    "HOOKSERVER_INFORMER__BACKOFF_MAX_S": "2",
    "HOOKSERVER_INFORMER__WATCH_TIMEOUT_S": "20",
    # One agent: no cluster to spread, and a 410's relist waits for the node's point (up to the 45 s default),
    # longer than the 30 s the recovery check gives a pod added after the fault.
    "HOOKSERVER_INFORMER__RELIST_SPREAD_S": "5",
}
FAULTS = ("500", "429", "410", "cut", "slow", "blackhole")


def _known(agent: Agent, name: str) -> bool:
    """What `hookctl pods` answers, asked in-process (a hookctl child costs a second of interpreter start)."""
    return agent.knows_pod(name)


def apiserver_faults(c: Campaign, seconds_each: float) -> list[Row]:
    fake = FakeApiServer(bookmark_interval_s=1.0).start()
    proxy = FaultProxy(fake.port)
    fake.apply("nodes", make_node(NODE))
    for i in range(20):
        fake.apply("pods", make_pod(f"api-{i}", node=NODE, qos="BE"))
    paths = AgentPaths(c.base / "apimode")
    paths.base.mkdir(parents=True, exist_ok=True)
    kubeconfig = paths.base / "kubeconfig"
    fake.kubeconfig(str(kubeconfig))
    kubeconfig.write_text(kubeconfig.read_text().replace(fake.url, proxy.url))
    agent = Agent(paths, standalone=False, extra_args=("--kubeconfig", str(kubeconfig), "--no-nri"),
                  extra_env=API_ENV)
    rows: list[Row] = []
    try:
        agent.start(timeout=60)
        client = ProxyClient(paths.hook_socket)
        for fault in FAULTS:
            row = Row(f"apiserver {fault}" if fault not in ("cut", "slow") else
                      {"cut": "apiserver watch cut mid-event", "slow": "apiserver slow past timeouts"}[fault])
            started = time.monotonic()
            # Every fault starts on an informer that has synced and holds its watches open: one that starts
            # before the first list (delayed up to first_list_spread_s) or during a backoff meets no informer
            # request when the window is short (at SOAK_SCALE=0.3, 3 s: "3 faults, neither informer errors nor
            # relists moved"), and the check below would judge the scale, not the agent.
            unsettled = agent.wait_informer_settled(30.0)
            if unsettled:
                row.violations.append(f"the informer did not settle in 30 s before the fault: {unsettled}")
            row.notes.append(f"waited {time.monotonic() - started:.1f} s for the informer to settle before the fault")
            before = agent.metrics()
            if fault in ("500", "429"):
                proxy.set(fault)
            elif fault == "slow":
                proxy.set("slow", hold_s=10.0)
            elif fault == "blackhole":
                fake.black_hole(True)
            end = time.monotonic() + seconds_each
            k = 0
            while time.monotonic() < end:
                k += 1
                if fault == "410":
                    fake.compact()
                    fake.expire_watches("pods")
                    row.injected += 1
                elif fault == "cut":
                    fake.apply("pods", make_pod(f"cut-{k}-{time.monotonic_ns()}", node=NODE, qos="BE"))
                    proxy.cut()
                    row.injected += 1
                rel = c.tree.new_pod()
                row.answers.append(client.create(rel, f"api-{fault}-{k}"))
                c.tree.drop_pod(rel)
                sample = agent.sample()
                if sample is not None:
                    row.samples.append(sample)
                time.sleep(0.5)
            if fault in ("500", "429", "slow"):
                row.injected = max(row.injected, proxy.injected)
                proxy.injected = 0
            elif fault == "blackhole":
                row.injected = max(1, fake.held_requests)
            proxy.set("")
            fake.black_hole(False)
            after = agent.metrics()
            # Recovery without a human: a pod added after the fault is known within the backoff and a relist.
            marker = f"after-{fault}"
            fake.apply("pods", make_pod(marker, node=NODE, qos="BE"))
            t0 = time.monotonic()
            while not _known(agent, marker) and time.monotonic() - t0 < 30:
                time.sleep(0.5)
            if not _known(agent, marker):
                row.violations.append(f"a pod added after the fault was not seen in 30 s")
                row.lost.append("informer did not recover")
            else:
                row.notes.append(f"recovered: a new pod seen {time.monotonic() - t0:.1f} s after the fault")
            errors = metric_sum(after, "hookserver_informer_errors_total") - metric_sum(
                before, "hookserver_informer_errors_total")
            relists = metric_sum(after, "hookserver_informer_relists_total") - metric_sum(
                before, "hookserver_informer_relists_total")
            row.metric = f"informer errors +{errors:.0f}, relists +{relists:.0f}"
            if row.injected and errors == 0 and relists == 0:
                row.violations.append(f"{row.injected} faults, neither informer errors nor relists moved")
            row.seconds = time.monotonic() - started
            rows.append(row)
        client.close()
    finally:
        agent.stop()
        proxy.close()
        fake.stop()
    return rows
