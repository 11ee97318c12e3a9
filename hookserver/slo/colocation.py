"""`colocation-config`: koord-manager's colocation strategy, resolved for one node, and the NodeMetric spec from it.

The key sits in the same `slo-controller-config` ConfigMap as the NodeSLO parts. koord-manager reads it to
create every node's NodeMetric and to turn NodeMetric into `kubernetes.io/batch-*` / `mid-*` on the Node;
hookserver reads it to do both for its own node when no koord-manager runs (hookserver.capacity).

Shape (`apis/configuration/slo_controller_config.go`): the cluster strategy's fields inline, plus
`nodeConfigs: [{name, nodeSelector, <strategy fields>}]`. Every field has koordinator's default
(`DefaultColocationStrategy`); fields koordinator leaves nil (`midReclaimMode`, `batch*ThresholdPercent`)
stay None. A node's effective strategy, as `GetNodeColocationStrategy` and `UpdateColocationStrategyForNode`
build it:

1. defaults < the cluster strategy;
2. < the FIRST `nodeConfigs` entry whose nodeSelector matches the node's labels (its fields over the cluster's);
3. < the node's `node.koordinator.sh/colocation-strategy` annotation (JSON of a strategy);
4. < the node labels `node.koordinator.sh/{cpu,memory}-reclaim-ratio` and
   `node.koordinator.sh/mid-static-{cpu,memory}-reserved-ratio` (a ratio; percent = int(ratio * 100)).

Colocation is on for the node only when both the cluster strategy and the node's merged strategy say
`enable: true` (`isColocationCfgDisabled`). Validation takes exactly the ranges koord-manager's webhook takes
(`validate:` tags: `metricAggregateDurationSeconds >= 1`, reclaim percents `>= 0` with no upper bound,
`resourceDiffThreshold` in (0, 1], mid percents in [0, 100], ...; docs/operations.md has the field-by-field
table), plus an empty nodeSelector (the webhook refuses it too). What koordinator accepts but treats in a way
a reader may not expect is used as koord-manager uses it and named in `notes` (`unusual_settings`): a reclaim
percent above 100 (a negative safety margin: more batch than the margin formula would offer), a calculate
policy koord-manager does not know for that resource (computed as `usage`), an unknown midReclaimMode
(dynamic). A bad field anywhere fails the whole document with one line per problem, so a typo never
half-applies; node-level annotation or label overrides that do not parse are ignored with a note, as
koordinator does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from annotated_types import Le
from pydantic import AfterValidator, Field, Strict, ValidationError

from hookserver.errors import InputError
from hookserver.kubewire import format_go_duration, parse_go_duration
from hookserver.slo._base import SLOModel, canonical_json
from hookserver.slo.merge import merge_json
from hookserver.slo.selector import LabelSelector
from hookserver.slo.validation import problems_of

__all__ = [
    "ANNOTATION_COLOCATION_STRATEGY",
    "BatchPolicy",
    "COLOCATION_KEY",
    "LABEL_RATIO_OVERRIDES",
    "ColocationConfig",
    "ColocationStrategy",
    "MetricAggregatePolicy",
    "ResolvedColocation",
    "default_colocation",
    "node_metric_spec",
    "parse_colocation_config",
]

COLOCATION_KEY = "colocation-config"
ANNOTATION_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
# Node label (a ratio, e.g. "0.5") -> the strategy field it overrides (as percent), in koordinator's order.
LABEL_RATIO_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("node.koordinator.sh/cpu-reclaim-ratio", "cpuReclaimThresholdPercent"),
    ("node.koordinator.sh/memory-reclaim-ratio", "memoryReclaimThresholdPercent"),
    ("node.koordinator.sh/mid-static-cpu-reserved-ratio", "midStaticCPUReservedPercent"),
    ("node.koordinator.sh/mid-static-memory-reserved-ratio", "midStaticMemoryReservedPercent"),
)
_PROFILE_KEYS = ("name", "nodeSelector")


def _positive_go_duration(text: str) -> str:
    try:
        seconds = parse_go_duration(text)
    except InputError:
        raise ValueError("not a Go duration (use e.g. 5m, 1h30m, 90s)") from None
    if seconds <= 0:
        raise ValueError("must be a positive duration")
    return text


# Go's encoding/json refuses a string for a bool or an int64 and a fraction for an int64: koord-manager then
# keeps its previous config. Pydantic's lax mode would take "true" and "60", so a config the cluster
# rejects would switch colocation on here; strict scalars refuse what Go refuses (an int is still a float).
_Bool = Annotated[bool, Strict()]
# Go's int64: a JSON number beyond it is refused by encoding/json, so it is here too.
_INT64_MAX = 2**63 - 1
_Int = Annotated[int, Strict()]
_Int64 = Annotated[int, Strict(), Le(_INT64_MAX)]  # for the fields without an upper bound of their own
_Float = Annotated[float, Strict()]
_Str = Annotated[str, Strict()]
_GoDuration = Annotated[str, Strict(), AfterValidator(_positive_go_duration)]

BatchPolicy = Literal["usage", "request", "maxUsageRequest"]
_MEMORY_COLLECT_POLICIES = frozenset({"usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache"})


class MetricAggregatePolicy(SLOModel):
    """`metricAggregatePolicy.durations`: Go durations ("5m"), each positive; a bad one is named by index."""

    durations: tuple[_GoDuration, ...] = ("5m", "10m", "30m")


class ColocationStrategy(SLOModel):
    """Every field of koordinator's ColocationStrategy, with its default (`DefaultColocationStrategy`)."""

    enable: _Bool = False
    metric_aggregate_duration_seconds: _Int64 = Field(default=300, ge=1, alias="metricAggregateDurationSeconds")
    metric_report_interval_seconds: _Int64 = Field(default=60, ge=1, alias="metricReportIntervalSeconds")
    metric_aggregate_policy: MetricAggregatePolicy = Field(
        default_factory=MetricAggregatePolicy, alias="metricAggregatePolicy"
    )
    # koordinator: any non-empty string (`IsColocationStrategyValid`); one it does not know collects without
    # page cache, as the default does.
    metric_memory_collect_policy: _Str = Field(
        default="usageWithoutPageCache", min_length=1, alias="metricMemoryCollectPolicy"
    )
    # koordinator: `min=0`, no upper bound; above 100 the safety margin is negative (unusual_settings).
    cpu_reclaim_threshold_percent: _Int64 = Field(default=60, ge=0, alias="cpuReclaimThresholdPercent")
    # koordinator: any string. batch-cpu knows maxUsageRequest and computes everything else as usage.
    cpu_calculate_policy: _Str = Field(default="usage", alias="cpuCalculatePolicy")
    memory_reclaim_threshold_percent: _Int64 = Field(default=65, ge=0, alias="memoryReclaimThresholdPercent")
    # koordinator: any string. batch-memory knows request and maxUsageRequest, everything else is usage.
    memory_calculate_policy: _Str = Field(default="usage", alias="memoryCalculatePolicy")
    degrade_time_minutes: _Int64 = Field(default=15, ge=1, alias="degradeTimeMinutes")
    update_time_threshold_seconds: _Int64 = Field(default=300, ge=1, alias="updateTimeThresholdSeconds")
    resource_diff_threshold: _Float = Field(default=0.1, gt=0, le=1, alias="resourceDiffThreshold")
    # koordinator: `validate:"omitempty"`, any string; only "static" changes the formula (else dynamic).
    mid_reclaim_mode: _Str | None = Field(default=None, alias="midReclaimMode")
    mid_cpu_threshold_percent: _Int = Field(default=100, ge=0, le=100, alias="midCPUThresholdPercent")
    mid_memory_threshold_percent: _Int = Field(default=100, ge=0, le=100, alias="midMemoryThresholdPercent")
    mid_unallocated_percent: _Int = Field(default=0, ge=0, le=100, alias="midUnallocatedPercent")
    mid_static_cpu_reserved_percent: _Int = Field(default=0, ge=0, le=100, alias="midStaticCPUReservedPercent")
    mid_static_memory_reserved_percent: _Int = Field(default=0, ge=0, le=100, alias="midStaticMemoryReservedPercent")
    batch_cpu_threshold_percent: _Int64 | None = Field(default=None, ge=0, alias="batchCPUThresholdPercent")
    batch_memory_threshold_percent: _Int64 | None = Field(default=None, ge=0, alias="batchMemoryThresholdPercent")

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON, every field (defaults included; unset optional fields omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def batch_cpu_policy(self) -> BatchPolicy:
        """The policy batch-cpu is computed with: koord-manager's batchresource tests only for maxUsageRequest
        and computes anything else (`request` included) by usage (`plugins/util/util.go`)."""
        return "maxUsageRequest" if self.cpu_calculate_policy == "maxUsageRequest" else "usage"

    def batch_memory_policy(self) -> BatchPolicy:
        """The policy batch-memory is computed with: request and maxUsageRequest as written, anything else usage."""
        if self.memory_calculate_policy == "request":
            return "request"
        return "maxUsageRequest" if self.memory_calculate_policy == "maxUsageRequest" else "usage"

    def unusual_settings(self) -> tuple[str, ...]:
        """Values koordinator accepts and hookserver therefore uses, but that do something a reader of the
        config may not expect: each named once in the log and in `hookctl capacity`, never refused."""
        notes: list[str] = []
        for wire, pct in (("cpuReclaimThresholdPercent", self.cpu_reclaim_threshold_percent),
                          ("memoryReclaimThresholdPercent", self.memory_reclaim_threshold_percent)):
            if pct > 100:
                notes.append(f"{wire} {pct} is above 100: the safety margin is negative ({100 - pct} % of "
                             "capacity), so batch may be offered beyond what the margin formula leaves; used as "
                             "koord-manager uses it")
        for wire, written, used in (("cpuCalculatePolicy", self.cpu_calculate_policy, self.batch_cpu_policy()),
                                    ("memoryCalculatePolicy", self.memory_calculate_policy,
                                     self.batch_memory_policy())):
            if written != used:
                notes.append(f"{wire} {written!r} is not a policy koord-manager computes for this resource: "
                             f"computed as {used!r}, as koord-manager does")
        if self.mid_reclaim_mode not in (None, "static"):
            notes.append(f"midReclaimMode {self.mid_reclaim_mode!r} is not one koord-manager knows: mid "
                         "resources are computed dynamically, as with no mode")
        if self.metric_memory_collect_policy not in _MEMORY_COLLECT_POLICIES:
            notes.append(f"metricMemoryCollectPolicy {self.metric_memory_collect_policy!r} is not one koordlet "
                         "knows: memory usage is collected without page cache")
        return tuple(notes)


_DEFAULT_STRATEGY = ColocationStrategy()


@dataclass(frozen=True, slots=True)
class ResolvedColocation:
    """The effective strategy of one node, whether colocation is on there, and how it was put together."""

    strategy: ColocationStrategy
    enabled: bool
    layers: tuple[str, ...]  # where each layer came from, lowest first
    # node-level overrides that were ignored, and why; then the strategy's unusual_settings()
    notes: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "layers": list(self.layers), "notes": list(self.notes),
                "strategy": self.strategy.to_json()}


def default_colocation(origin: str = "default") -> ResolvedColocation:
    """No colocation-config anywhere: koordinator's defaults, colocation off."""
    return ResolvedColocation(strategy=_DEFAULT_STRATEGY, enabled=False, layers=(origin,))


@dataclass(frozen=True, slots=True)
class _NodeConfig:
    label: str  # "nodeConfigs[anolis]" or "nodeConfigs[2]"
    selector: LabelSelector
    merged: dict[str, Any]  # canonical JSON of cluster < this entry (already validated)


@dataclass(frozen=True, slots=True)
class ColocationConfig:
    """A parsed, validated `colocation-config`, not yet tied to a node."""

    origin: str
    cluster: dict[str, Any]  # canonical JSON of the cluster strategy (what the document says)
    nodes: tuple[_NodeConfig, ...] = field(default=())

    def resolve(self, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> ResolvedColocation:
        """The node's effective strategy (module docstring, steps 1-4)."""
        layers = [f"{self.origin}: {COLOCATION_KEY} cluster"]
        cluster_enabled = ColocationStrategy.model_validate(self.cluster).enable
        merged = self.cluster
        for node in self.nodes:
            if not node.selector.is_empty() and node.selector.matches(labels):
                merged = node.merged
                layers.append(f"{COLOCATION_KEY} {node.label}")
                break
        strategy, notes = _node_overrides(ColocationStrategy.model_validate(merged), merged, labels,
                                          annotations or {}, layers)
        return ResolvedColocation(strategy=strategy, enabled=cluster_enabled and strategy.enable,
                                  layers=tuple(layers), notes=(*notes, *strategy.unusual_settings()))


def _node_overrides(
    strategy: ColocationStrategy, merged: dict[str, Any], labels: Mapping[str, str],
    annotations: Mapping[str, str], layers: list[str],
) -> tuple[ColocationStrategy, list[str]]:
    notes: list[str] = []
    raw = annotations.get(ANNOTATION_COLOCATION_STRATEGY)
    if raw:
        override = _annotation_strategy(raw, notes)
        if override is not None:
            candidate = merge_json(merged, override)
            try:
                strategy = ColocationStrategy.model_validate(candidate)
                merged = candidate
                layers.append(f"node annotation {ANNOTATION_COLOCATION_STRATEGY}")
            except ValidationError as exc:
                notes.append(f"annotation {ANNOTATION_COLOCATION_STRATEGY} ignored: "
                             + "; ".join(problems_of(exc, "")))
    for label, wire in LABEL_RATIO_OVERRIDES:
        text = labels.get(label)
        if text is None:
            continue
        percent, problem = _ratio_percent(text)
        if percent is not None:
            candidate = merge_json(merged, {wire: percent})
            try:
                strategy = ColocationStrategy.model_validate(candidate)
            except ValidationError as exc:
                problem = f"{wire} " + "; ".join(e["msg"] for e in exc.errors(include_url=False))
            else:
                merged = candidate
                layers.append(f"node label {label}={text}")
                continue
        # One label at a time: a bad one is named and skipped, the others still apply.
        notes.append(f"label {label}={text!r} ignored: {problem}")
    return strategy, notes


def _ratio_percent(text: str) -> tuple[int | None, str]:
    """koordinator's `int64(strconv.ParseFloat(v) * 100)`, or None and why not. Python's float() also takes
    underscores and spaces, which Go refuses; a non-finite ratio has no percent (int() would raise)."""
    try:
        if "_" in text or text != text.strip():
            raise ValueError(text)
        ratio = float(text)
    except ValueError:
        return None, "not a number"
    if not math.isfinite(ratio * 100):
        return None, "not a finite number"
    if ratio < 0:
        return None, "must not be negative"
    if ratio * 100 > _INT64_MAX:
        return None, "out of range (above int64 as a percent)"
    return int(ratio * 100), ""


def _annotation_strategy(raw: str, notes: list[str]) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        notes.append(f"annotation {ANNOTATION_COLOCATION_STRATEGY} ignored: not JSON: {exc}")
        return None
    if not isinstance(value, Mapping):
        notes.append(f"annotation {ANNOTATION_COLOCATION_STRATEGY} ignored: not a JSON object")
        return None
    return dict(canonical_json(ColocationStrategy, value))


def parse_colocation_config(doc: Mapping[str, Any], *, origin: str, problems: list[str]) -> ColocationConfig | None:
    """Validate a decoded `colocation-config` value. Problems (one per bad field, with its path) are appended,
    all of them: a bad cluster field does not hide a bad nodeConfigs entry. None when there was any."""
    before = len(problems)
    (raw_nodes,), body = _take_keys(doc, ("nodeConfigs",))
    cluster = canonical_json(ColocationStrategy, body)
    cluster_ok = _validate(cluster, COLOCATION_KEY, problems) is not None
    if raw_nodes is None:
        raw_nodes = []
    if not isinstance(raw_nodes, list):
        problems.append(f"{COLOCATION_KEY}.nodeConfigs: must be a list, got {type(raw_nodes).__name__}")
        raw_nodes = []
    nodes: list[_NodeConfig] = []
    for index, raw in enumerate(raw_nodes):
        node = _node_config(raw, index, cluster, problems)
        if node is not None and cluster_ok:
            nodes.append(node)
    if len(problems) > before:
        return None
    return ColocationConfig(origin=origin, cluster=cluster, nodes=tuple(nodes))


def _node_config(raw: Any, index: int, cluster: dict[str, Any], problems: list[str]) -> _NodeConfig | None:
    """One `nodeConfigs` entry: `{name, nodeSelector, <strategy fields>}`. Its own fields are validated alone
    (every check is per field), so its problems are reported once, under its path, whatever the cluster's."""
    where = f"{COLOCATION_KEY}.nodeConfigs[{index}]"
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, got {type(raw).__name__}")
        return None
    (name, raw_selector), body = _take_keys(raw, _PROFILE_KEYS)
    label = f"nodeConfigs[{name}]" if isinstance(name, str) and name else f"nodeConfigs[{index}]"
    entry = canonical_json(ColocationStrategy, body)
    entry_ok = _validate(entry, where, problems) is not None
    try:
        selector = LabelSelector.model_validate(raw_selector or {})
    except ValidationError as exc:
        problems.extend(problems_of(exc, f"{where}.nodeSelector"))
        return None
    if selector.is_empty():
        problems.append(f"{where}.nodeSelector: must not be empty (it would match no node; "
                        "koord-manager's webhook refuses it too)")
        return None
    if not entry_ok:
        return None
    return _NodeConfig(label=label, selector=selector, merged=merge_json(cluster, entry))


def _take_keys(raw: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The values of `keys` (matched as Go's encoding/json matches them: the exact spelling, else any case;
    None when absent) and the rest of `raw`. `NodeConfigs` or `NodeSelector` must neither be lost nor
    become an unknown strategy field."""
    folded = {key.lower(): key for key in keys}
    found: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for raw_key, value in raw.items():
        key = folded.get(str(raw_key).lower())
        if key is None:
            rest[str(raw_key)] = value
        elif raw_key == key or key not in found:
            found[key] = value
    return tuple(found.get(key) for key in keys), rest


def _validate(data: dict[str, Any], where: str, problems: list[str]) -> ColocationStrategy | None:
    try:
        return ColocationStrategy.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_of(exc, where))
        return None


def node_metric_spec(resolved: ResolvedColocation) -> dict[str, Any]:
    """The NodeMetric spec koord-manager renders for the node (`collect_policy.go`): the strategy's collect
    policy when colocation is on there, the defaults otherwise. Durations as `metav1.Duration` prints them."""
    s = resolved.strategy if resolved.enabled else _DEFAULT_STRATEGY
    durations = [format_go_duration(parse_go_duration(d)) for d in s.metric_aggregate_policy.durations]
    return {"metricCollectPolicy": {
        "aggregateDurationSeconds": s.metric_aggregate_duration_seconds,
        "reportIntervalSeconds": s.metric_report_interval_seconds,
        "nodeAggregatePolicy": {"durations": durations},
        "nodeMemoryCollectPolicy": s.metric_memory_collect_policy,
    }}
