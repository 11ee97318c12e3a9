"""CPU reconcilers: CPU suppress (`suppress.py`, koordlet's cpusuppress: the BE tier's cpuset or CFS quota,
with `cpuset_pick.py` choosing the CPUs) and CPU burst (`burst.py`, koordlet's cpuburst; `burst_metrics.py`
exports its state)."""
