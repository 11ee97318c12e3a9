"""The `nri:` settings: the NRI plugin's socket, name, index and reconnect backoff. A leaf pydantic module
the plugin reads and `hookserver.config` collects."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["NriSettings"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NriSettings(_Frozen):
    enabled: bool = True
    socket: str = "/var/run/nri/nri.sock"
    plugin_name: str = "hookserver"
    plugin_idx: str = "00"
    connect_timeout_s: float = Field(default=6.0, gt=0)
    backoff_initial_s: float = Field(default=1.0, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)

    @field_validator("plugin_idx")
    @classmethod
    def _two_digits(cls, value: str) -> str:
        if len(value) != 2 or not value.isdigit():
            raise ValueError(f"plugin index must be two digits, got {value!r}")
        return value

    @model_validator(mode="after")
    def _backoff_order(self) -> NriSettings:
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                f"backoff_max_s ({self.backoff_max_s}) must be >= backoff_initial_s ({self.backoff_initial_s})"
            )
        return self
