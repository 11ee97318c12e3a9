"""Informer settings: which source, how to reach it, how often to resync, how to back off.

Collected into `hookserver.config.Settings.informer`. Defaults follow koordlet's states informer
(reference §7: kubelet sync every 10 s, 3 s timeout, read-only port 10255) and client-go's reflector
(watch timeouts of 5–10 min, exponential backoff with jitter, capped at 30 s, reset after 2 healthy minutes).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_SLO_CONFIGMAP", "InformerSettings", "KubeletSettings"]

DEFAULT_SLO_CONFIGMAP = "koordinator-system/slo-controller-config"
# A namespace is a DNS label, a ConfigMap name a DNS subdomain (apimachinery's validation).
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class KubeletSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    # 10255 is the read-only port (http, no auth); 10250 is the secure port (https + bearer token).
    port: int = Field(default=10255, ge=1, le=65535)
    scheme: Literal["http", "https"] = "http"
    token_file: str = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    # auto: send the bearer token on https only (the read-only port ignores it, and plain http would leak
    # it); token: always; none: never.
    auth: Literal["auto", "token", "none"] = "auto"
    ca_file: str = ""
    insecure_skip_verify: bool = False
    sync_interval_s: float = Field(default=10.0, gt=0)
    timeout_s: float = Field(default=3.0, gt=0)
    max_response_bytes: int = Field(default=64 << 20, ge=1 << 10)


class InformerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # auto: standalone when Settings.standalone, else apiserver when a kubeconfig or in-cluster
    # credentials exist, else standalone.
    source: Literal["auto", "apiserver", "kubelet", "standalone"] = "auto"
    # The Node, NodeSLO and NodeMetric come from the apiserver in apiserver and kubelet modes (when it is
    # reachable); these switch the custom resources off for clusters without Koordinator's CRDs.
    watch_nodeslo: bool = True
    watch_nodemetric: bool = True
    # koordinator's slo-controller-config ConfigMap, `<namespace>/<name>` ("" switches the source off):
    # watched by name in apiserver mode (and kubelet mode with credentials) for the colocation-config and,
    # when no NodeSLO object exists, the NodeSLO rendered here. Not readable (403) means defaults, not an outage.
    slo_configmap: str = DEFAULT_SLO_CONFIGMAP
    # A relist every resync period, from the apiserver's watch cache; 0 (the default) disables it. client-go's
    # resync re-delivers its own cache to handlers without a request; here handlers write straight into the
    # store, so there is nothing to re-deliver, and a healthy watch misses nothing (a gap shows as 410).
    resync_period_s: float = Field(default=0.0, ge=0)
    # Server-side watch timeout; each watch picks a random value in [min, 2*min) like client-go.
    watch_timeout_s: float = Field(default=300.0, gt=0)
    list_timeout_s: float = Field(default=60.0, gt=0)
    # Also the wait for a watch's response headers (kube-apiserver answers at once; at most 3 s when it
    # waits for its cache to reach the requested resourceVersion).
    connect_timeout_s: float = Field(default=5.0, gt=0)
    # A watch that brings no byte for this long is checked, not closed: if the apiserver answered anything
    # else in that time (a report, another watch) or answers a GET /version within connect_timeout_s, the
    # watch stays open; else it is dropped as an outage. A quiet watch is normal: kube-apiserver 1.20 sends
    # nothing until timeoutSeconds, 1.27+ a bookmark about once a minute; 90 s lets one bookmark be late
    # before a check. This bounds how long a black-holed connection (no RST, no FIN, a proxy still ACKing)
    # goes unnoticed to this + connect_timeout_s. 0 disables it (reads then time out at timeoutSeconds + 30 s).
    watch_idle_timeout_s: float = Field(default=90.0, ge=0)
    # Before its very first list the agent waits a random part of this window (one draw per node, shared by
    # its resources), so a DaemonSet rollout or a cluster-wide agent restart does not list in one second.
    # Delays readiness by as much; up to 300 s.
    first_list_spread_s: float = Field(default=5.0, ge=0, le=300)
    # A relist forced by a 410 (the watch's resourceVersion expired) waits for this node's next point in this
    # window, fixed on the clock (spread.py): after an apiserver restart every node reconnects within seconds,
    # and the apiserver expires every node's watches in waves, so without a spread they would relist together.
    # The nodes listing in one second are then binomial(nodes, 1 s / window): with 45 s, 500 nodes give 11 a
    # second on average and more than 25 (5 %) in some second of the window with probability 0.35 %
    # (45 x P[bin > 25] = 45 x 7.7e-5; 2 % with 40 s, 56 % with 30 s), while a node is fresh within its last
    # 410 + 45 s (the waves of a restart end within about 10 s of the apiserver answering). The fraction
    # evens out as the cluster grows: 1,000 nodes stay under 5 % with 35 s, 5,000 with 25 s; 200 nodes would
    # need about 70 s (and the apiserver hardly notices 10 lists a second).
    relist_spread_s: float = Field(default=45.0, ge=0, le=300)
    # Idle keep-alive connections kept per apiserver. Each open watch holds one (5 at most) and the writers
    # (NodeMetric status, Node capacity, NodeMetric spec, evictions, the liveness probe) take one each; a
    # smaller pool discards connections that come back to it and opens new ones (TLS handshakes) later.
    pool_maxsize: int = Field(default=16, ge=1, le=1024)
    # TCP keepalive on the apiserver sockets: a peer that stops ACKing (a dead node route, a dropped NAT
    # entry) fails the socket after idle + interval * count seconds (30 s), also on pooled connections.
    # Ignored when the kubeconfig's client configuration already sets socket options.
    tcp_keepalive: bool = True
    tcp_keepalive_idle_s: int = Field(default=15, ge=1, le=32767)
    tcp_keepalive_interval_s: int = Field(default=5, ge=1, le=32767)
    tcp_keepalive_count: int = Field(default=3, ge=1, le=127)
    # Go-style limit on the first list (resourceVersion 0), which the watch cache ignores and an apiserver without
    # one pages by; a relist at a resourceVersion sends none (0 = never).
    list_page_size: int = Field(default=500, ge=0)
    # Retry delays: initial x factor^n up to max, each x (1 +- jitter); client-go's reflector uses 0.8 s,
    # x2, 30 s. Jitter 0.5 (client-go: +0..100 %) so the nodes' retries do not march in lockstep (with
    # +-20 % the nodes of a restart came back within a few seconds of each other). The growth resets only
    # when no retry was needed for backoff_reset_s (client-go: 2 minutes), which must outlast the longest delay.
    backoff_initial_s: float = Field(default=0.8, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    backoff_factor: float = Field(default=2.0, ge=1.0)
    backoff_jitter: float = Field(default=0.5, ge=0.0, le=1.0)
    backoff_reset_s: float = Field(default=120.0, gt=0)
    # A JSON event line longer than this is refused (and the watch restarted) instead of read into memory.
    max_event_bytes: int = Field(default=16 << 20, ge=1 << 10)
    # Standalone: how often to look at --slo-file for a change (mtime, size, inode).
    slo_file_poll_s: float = Field(default=2.0, gt=0)
    # Standalone: labels of this node, for matching ConfigMap nodeStrategies (the host has no Node object).
    node_labels: dict[str, str] = Field(default_factory=dict)
    kubelet: KubeletSettings = KubeletSettings()

    @field_validator("slo_configmap")
    @classmethod
    def _namespace_slash_name(cls, value: str) -> str:
        if value == "":
            return value
        namespace, _, name = value.partition("/")
        if not (_NAMESPACE.fullmatch(namespace) and _NAME.fullmatch(name)):
            raise ValueError(
                f"expected <namespace>/<name> of a ConfigMap (e.g. {DEFAULT_SLO_CONFIGMAP}), or \"\" to switch the "
                f"source off; got {value!r}"
            )
        return value

    @property
    def slo_configmap_ref(self) -> tuple[str, str] | None:
        """(namespace, name) of the slo-controller-config ConfigMap, None when the source is off."""
        if not self.slo_configmap:
            return None
        namespace, _, name = self.slo_configmap.partition("/")
        return namespace, name

    @model_validator(mode="after")
    def _backoff_order(self) -> InformerSettings:
        if self.backoff_initial_s > self.backoff_max_s:
            raise ValueError(
                f"backoff_initial_s ({self.backoff_initial_s}) must not exceed backoff_max_s ({self.backoff_max_s})"
            )
        longest = self.backoff_max_s * (1 + self.backoff_jitter)
        if self.backoff_reset_s <= longest:
            raise ValueError(
                f"backoff_reset_s ({self.backoff_reset_s}) must exceed the longest retry delay, backoff_max_s x "
                f"(1 + backoff_jitter) = {longest:g}: else the backoff resets in the middle of an outage"
            )
        return self
