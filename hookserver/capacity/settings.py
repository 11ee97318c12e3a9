"""Capacity publisher settings: who publishes batch/mid capacity, how often it is computed, and its guards.

Collected into `hookserver.config.Settings.capacity`. The cluster's own knobs (enable, thresholds, policies,
degrade time, write thresholds) are koordinator's `colocation-config`; these are the agent's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CapacitySettings"]


class CapacitySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Off: the agent never computes or writes capacity (hookctl capacity says so).
    enabled: bool = True
    # Who writes kubernetes.io/batch-* and mid-* into the Node: `auto` (default) publishes unless koord-manager
    # is seen (a NodeSLO object for this node, which only koord-manager renders, or another field manager
    # owning those fields), so swapping koordlet for hookserver changes nothing where koord-manager runs and
    # gives batch capacity where it does not; `agent` always (still never over another writer); `koord-manager`
    # never. Standalone mode always publishes to the state dir.
    publisher: Literal["auto", "agent", "koord-manager"] = "auto"
    # Server-side apply field manager of the Node status writes (and of the NodeMetric it creates).
    field_manager: str = Field(default="hookserver", min_length=1, max_length=128)
    # Field managers whose ownership of these fields is not a competing publisher and may be taken over
    # (force): the kubelet zeroes extended resources when a node is re-registered. Add a retired writer
    # here (e.g. koordinator-manager after removing koord-manager) to hand its fields to the agent; a manager
    # that takes them back more than `max_takeovers_per_hour` times is a live writer, and the agent yields.
    take_over_from: tuple[str, ...] = ("kubelet",)
    max_takeovers_per_hour: int = Field(default=3, ge=1)
    # How often the offer is recomputed from the agent's own fresh samples.
    interval_s: float = Field(default=10.0, gt=0, le=3600)
    # A short window beside the report window: usage counts as the larger of the two averages, so a step up
    # in usage shrinks the offer within about this long, while growth follows the slow report window.
    # 0 keeps koord-manager's report-window averages only.
    fast_window_s: float = Field(default=15.0, ge=0, le=3600)
    # Growth waits: the published target is the smallest offer computed over this long, so a drop goes out at
    # once and a rise only once it has lasted (bursty LS load keeps a steady, lower offer, not a write per
    # burst). 0 publishes every rise at once.
    grow_hold_s: float = Field(default=300.0, ge=0, le=86400)
    # After a start, the node's samples must cover this long before the first write (never publish a figure
    # computed from one or two samples).
    warmup_s: float = Field(default=30.0, ge=0, le=3600)
    # /healthz fails when a computation or write has not finished for this long: a hung publisher must be
    # restarted by the kubelet, or the last offer would outlive the agent's knowledge.
    hung_after_s: float = Field(default=120.0, gt=0)
    write_timeout_s: float = Field(default=10.0, gt=0, le=120)
    # Create this node's NodeMetric (spec from colocation-config) when colocation is on and it is missing,
    # and keep the spec in step; fields another manager owns are never rewritten.
    manage_nodemetric: bool = True
    # Standalone: the offer document, under state_dir.
    status_file: str = "capacity.json"

    @field_validator("take_over_from")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name or "/" in name:
                raise ValueError(f"take_over_from: a field manager name, got {name!r}")
        return value
