"""Kubernetes label selectors (`matchLabels` + `matchExpressions`), as node strategies use them.

Semantics follow metav1.LabelSelectorAsSelector: every matchLabels pair and every expression must hold.
Operators: In and NotIn need values; Exists and DoesNotExist take none. NotIn and DoesNotExist hold for
a node that lacks the key. An empty selector is "empty": Koordinator skips such node strategies rather
than letting them match every node, and so do we (`is_empty`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["LabelSelector", "LabelSelectorRequirement"]


class LabelSelectorRequirement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value (key {self.key!r})")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values (key {self.key!r})")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


class LabelSelector(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: tuple[LabelSelectorRequirement, ...] = Field(default=(), alias="matchExpressions")

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)
