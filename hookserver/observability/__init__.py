"""Observability: Prometheus metrics and the /metrics, /healthz, /readyz HTTP endpoint."""

from hookserver.observability.metrics import HookMetrics

__all__ = ["HookMetrics"]
