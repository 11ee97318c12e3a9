"""SLO layer (beside the store, below hooks | qos | informer): the NodeSLO model and its inputs. No I/O
except `read_slo_file`, which reads the one file a user names.

`NodeSLOSpec` is what the store holds as the effective NodeSLO (`store.set_node_slo(spec, sources)`).
`parse_slo_document` / `read_slo_file` accept a slo-controller-config ConfigMap, a NodeSLO object or a
bare spec, and `SLODocument.resolve(node_labels)` gives the effective spec plus where each part came from.
"""

from hookserver.slo.configmap import CONFIGMAP_KEYS, ResolvedSLO, SLOConfigMap, parse_slo_configmap
from hookserver.slo.document import (
    MAX_SLO_FILE_BYTES,
    SLODocument,
    default_slo,
    parse_slo_document,
    parse_slo_text,
    read_slo_file,
    spec_from_json,
)
from hookserver.slo.merge import merge_json
from hookserver.slo.model import (
    PARTS,
    CgroupPath,
    CPUBurstStrategy,
    HostApplicationSpec,
    NodeSLOSpec,
    SystemStrategy,
)
from hookserver.slo.nodemetric import NodeMetricSpec
from hookserver.slo.qos import (
    CPUQOS,
    BlkIOQOS,
    MemoryQOS,
    NetworkQOS,
    ResctrlQOS,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceQOSStrategy,
    class_defaults,
)
from hookserver.slo.selector import LabelSelector, LabelSelectorRequirement
from hookserver.slo.threshold import ResourceThresholdStrategy

__all__ = [
    "CONFIGMAP_KEYS",
    "CPUQOS",
    "MAX_SLO_FILE_BYTES",
    "PARTS",
    "BlkIOQOS",
    "CPUBurstStrategy",
    "CgroupPath",
    "HostApplicationSpec",
    "LabelSelector",
    "LabelSelectorRequirement",
    "MemoryQOS",
    "NetworkQOS",
    "NodeMetricSpec",
    "NodeSLOSpec",
    "ResctrlQOS",
    "ResolvedSLO",
    "ResourceQOS",
    "ResourceQOSPolicies",
    "ResourceQOSStrategy",
    "ResourceThresholdStrategy",
    "SLOConfigMap",
    "SLODocument",
    "SystemStrategy",
    "class_defaults",
    "default_slo",
    "merge_json",
    "parse_slo_configmap",
    "parse_slo_document",
    "parse_slo_text",
    "read_slo_file",
    "spec_from_json",
]
