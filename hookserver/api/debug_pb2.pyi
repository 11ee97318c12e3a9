from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PodsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class EventsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class WritesRequest(_message.Message):
    __slots__ = ("limit", "path_contains")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PATH_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    path_contains: str
    def __init__(self, limit: _Optional[int] = ..., path_contains: _Optional[str] = ...) -> None: ...

class SloRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopRequest(_message.Message):
    __slots__ = ("window_seconds",)
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    window_seconds: int
    def __init__(self, window_seconds: _Optional[int] = ...) -> None: ...

class MetricsRequest(_message.Message):
    __slots__ = ("query",)
    QUERY_FIELD_NUMBER: _ClassVar[int]
    query: str
    def __init__(self, query: _Optional[str] = ...) -> None: ...

class NriRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("namespace", "name", "priority", "node", "system")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    priority: str
    node: bool
    system: bool
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., priority: _Optional[str] = ..., node: _Optional[bool] = ..., system: _Optional[bool] = ...) -> None: ...

class ReclaimableRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NodeMetricRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CapacityRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QosRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QosPlanRequest(_message.Message):
    __slots__ = ("name", "slo_document", "slo_source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLO_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SLO_SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    slo_document: str
    slo_source: str
    def __init__(self, name: _Optional[str] = ..., slo_document: _Optional[str] = ..., slo_source: _Optional[str] = ...) -> None: ...

class VersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopologyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DevicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DebugReply(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...
