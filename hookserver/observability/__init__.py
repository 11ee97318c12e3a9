"""Observability (a leaf every layer may use): Prometheus metrics, health state and the HTTP endpoint."""

from hookserver.observability.health import HealthState, Readiness
from hookserver.observability.http import MetricsHttpServer
from hookserver.observability.metrics import HookMetrics

__all__ = ["HealthState", "HookMetrics", "MetricsHttpServer", "Readiness"]
