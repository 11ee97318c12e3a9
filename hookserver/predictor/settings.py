"""Predictor settings, with koordlet's defaults (reference §6, `prediction-*` flags).

Collected into `hookserver.config.Settings.predictor`. Durations are seconds. Checkpoints live under
`<state_dir>/<checkpoint_subdir>`; the standalone NodeMetric status document under `<state_dir>/<status_file>`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PredictorSettings"]


class PredictorSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    training_interval_s: float = Field(default=60.0, gt=0, le=3600)
    cold_start_duration_s: float = Field(default=24 * 3600.0, ge=0)
    safety_margin_percent: int = Field(default=10, ge=0, le=1000)
    cpu_half_life_s: float = Field(default=12 * 3600.0, gt=0)
    memory_half_life_s: float = Field(default=24 * 3600.0, gt=0)
    model_expiration_s: float = Field(default=30 * 60.0, gt=0)
    gc_interval_s: float = Field(default=60.0, gt=0)
    # A checkpoint round every `checkpoint_round_s`: at most `checkpoint_max_per_step` models, oldest
    # checkpoint first, each at most every `checkpoint_interval_s` (a model never checkpointed goes next round).
    checkpoint_round_s: float = Field(default=60.0, gt=0)
    checkpoint_interval_s: float = Field(default=600.0, ge=0)
    checkpoint_max_per_step: int = Field(default=12, ge=1)
    checkpoint_subdir: str = "predictor"
    # koordlet's checkpoint directory (its -prediction-checkpoint-filepath; `<uid>` files, no suffix). Read at
    # start for models hookserver has no checkpoint of its own for; never written, never cleaned. "" = don't.
    koordlet_checkpoint_dir: str = "/prediction-checkpoints"
    # NodeMetric status: report every spec.metricCollectPolicy.reportIntervalSeconds (koordlet floors it at
    # 30 s and the aggregate window at 60 s). `report_enabled: false` keeps the predictor but reports nothing.
    report_enabled: bool = True
    # Used while no NodeMetric spec is known (standalone mode, or before koord-manager creates the object).
    default_report_interval_s: float = Field(default=60.0, gt=0)
    default_aggregate_duration_s: float = Field(default=300.0, gt=0)
    min_report_interval_s: float = Field(default=30.0, gt=0)
    min_aggregate_duration_s: float = Field(default=60.0, gt=0)
    status_file: str = "nodemetric.json"

    @field_validator("checkpoint_subdir", "status_file")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value or "/" in value or value in (".", "..") or "\0" in value:
            raise ValueError(f"must be a plain file or directory name under state_dir, got {value!r}")
        return value
