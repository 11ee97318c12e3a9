"""Isolation beyond CPU time and memory limits (issue 38): reconcilers that act on what the kernel keeps per
process or per pod rather than per cgroup knob. Same layer as the other reconciler rooms (above
`qos.framework`, below `qos.registry`); each module is one koordlet feature:

    oom_score_adj.py   OOMScoreAdj: the pod annotations' oom_score_adj on every process of its containers
    pod_resctrl.py     PodResctrl (koordlet's Resctrl hook): a resctrl group per annotated pod
    network_qos.py     TCNetworkQoS: egress bandwidth per QoS class, an htb tree on the node's interface
    core_sched.py      CoreSched: core-scheduling cookies per pod group
"""

from qos.isolation.core_sched import CoreSched
from qos.isolation.network_qos import TCNetworkQoS
from qos.isolation.oom_score_adj import OOMScoreAdj
from qos.isolation.pod_resctrl import PodResctrl

__all__ = ["CoreSched", "OOMScoreAdj", "PodResctrl", "TCNetworkQoS"]
