"""`kubectl hookserver ...`: ask the hookserver agent on a node through the apiserver (a kubectl plugin).

Operators live in kubectl, not on nodes. The plugin finds the node (a pod's `spec.nodeName` for `explain`),
the agent pod on that node (label `app=hookserver` in the agent's namespace), and asks it through the apiserver:

1. pod `exec` running `hookctl` in the agent's container (the default): the answer is exactly what `hookctl`
   prints on the node, every hookctl command works, and it needs `create pods/exec`, which any cluster admin
   (and `kubectl exec`) has. The apiserver reaches the agent through the kubelet.
2. the `pods/proxy` subresource to the agent's metrics port, `GET /debug/v1/<View>` (the debug API's read-only
   views as JSON, `debug.http_views`), rendered here by hookctl's own renderers: used when exec is impossible
   because the apiserver cannot reach or authenticate to the kubelet (a control plane without kubelet client
   credentials, as the kube-e2e harness's). It needs `get pods/proxy` (also an admin's) and an apiserver-to-pod
   route; the views are those that take scalar arguments (not `qos plan`, not raw `hookctl` commands).

`--via auto` (default) tries exec, then proxy; `--via exec|proxy` picks one. Exec first because it needs no
network path to the pod and no listener beyond the agent's unix socket.

Only this package and the informer import `kubernetes`: the plugin is a client, not part of the agent.
"""

from hookserver.kubectl.cluster import AgentNotFound, AgentPod, Cluster, ExecResult

__all__ = ["AgentNotFound", "AgentPod", "Cluster", "ExecResult"]
