"""Eviction reconcilers, koordlet's cpuevict and memoryevict: `cpu.py` and `memory.py` are the reconcilers,
`modes.py` their koordlet modes (satisfaction, allocatable, usage thresholds), `order.py` the candidates'
order (eviction policy and priority annotations) and `resource_evictor.py` what both share: ask each mode
whose gate is on, then one round across modes (`qos.framework.evict_round`)."""
