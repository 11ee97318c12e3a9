"""The machinery every QoS reconciler runs in, and nothing that is one.

`reconciler.py` is the base class and its verdicts; `plan.py` what a planner returns; `runner.py` the round
(snapshot, gates, plan, carry out, audit); `evictions.py` the guard every eviction passes and
`evict_round.py` the round across eviction modes; `knobs.py` one owner per kernel knob; `metrics.py` and
`debug.py` what Prometheus and `hookctl qos` see; `resctrl_groups.py` the L3 mask and MB formulas the class- and
pod-level resctrl reconcilers share. A reconciler imports from here; nothing here imports a
reconciler (the list of them is `qos/registry.py`).
"""
