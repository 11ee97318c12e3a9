"""Flight recorder settings (`recorder:` in the config file; README "Configuration").

The recorder keeps what the planners and the predictor read, one frame every `interval_s` (plus every round
that evicted), in `<state_dir>/<file>`. `retention_s` and `max_mib` bound it: whichever is reached first drops
the oldest frames. A day of a 200-pod node at the default 10 s is 68 MiB (68.1 MiB measured with its
containers, `make bench`'s recorder row).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["RecorderSettings"]


class RecorderSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    interval_s: float = Field(default=10.0, ge=1.0, le=3600.0)
    retention_s: float = Field(default=24 * 3600.0, gt=0)
    max_mib: float = Field(default=100.0, gt=0)
    file: str = "flight-recorder.sqlite"

    @field_validator("file")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value or "/" in value or value in (".", "..") or "\0" in value:
            raise ValueError(f"must be a plain file name under state_dir, got {value!r}")
        return value
