"""`kubectl hookserver ...`: ask the hookserver agent on a node through the apiserver (a kubectl plugin).

Operators live in kubectl, not on nodes. The plugin finds the node (a pod's `spec.nodeName` for `explain`),
the agent pod on that node (label `app=hookserver` in the agent's namespace), and runs `hookctl` in the
agent's container through the apiserver's pod `exec` subresource, so the answer is exactly what `hookctl`
prints on the node.

Why exec, not the pods/proxy subresource to an HTTP endpoint: exec needs `create pods/exec`, which any
cluster admin (and `kubectl exec`) already has; it reaches the agent through the kubelet, which the apiserver
always reaches (pods/proxy needs apiserver-to-pod networking, missing on many managed control planes); and
the agent keeps no debug listener beyond its unix socket (the debug API stays off the network). The image
ships `hookctl`, and the DaemonSet's `HOOKCTL_SOCKET` points it at the agent's debug socket.

Only this package and the informer import `kubernetes`: the plugin is a client, not part of the agent.
"""

from hookserver.kubectl.cluster import AgentNotFound, AgentPod, Cluster, ExecResult

__all__ = ["AgentNotFound", "AgentPod", "Cluster", "ExecResult"]
