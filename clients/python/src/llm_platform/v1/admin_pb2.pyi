from llm_platform.v1 import models_pb2 as _models_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterModelVersionRequest(_message.Message):
    __slots__ = ("name", "artifact_uri", "manifest_sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_URI_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    artifact_uri: str
    manifest_sha256: str
    def __init__(self, name: _Optional[str] = ..., artifact_uri: _Optional[str] = ..., manifest_sha256: _Optional[str] = ...) -> None: ...

class SetAliasRouteRequest(_message.Message):
    __slots__ = ("route",)
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    route: _models_pb2.AliasRoute
    def __init__(self, route: _Optional[_Union[_models_pb2.AliasRoute, _Mapping]] = ...) -> None: ...

class DrainWorkerRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class UndrainWorkerRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[Worker]
    def __init__(self, workers: _Optional[_Iterable[_Union[Worker, _Mapping]]] = ...) -> None: ...

class Worker(_message.Message):
    __slots__ = ("worker_id", "address", "loaded_versions", "healthy", "draining", "free_kv_blocks", "last_heartbeat_unix_ms")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOADED_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    FREE_KV_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    address: str
    loaded_versions: _containers.RepeatedScalarFieldContainer[str]
    healthy: bool
    draining: bool
    free_kv_blocks: int
    last_heartbeat_unix_ms: int
    def __init__(self, worker_id: _Optional[str] = ..., address: _Optional[str] = ..., loaded_versions: _Optional[_Iterable[str]] = ..., healthy: _Optional[bool] = ..., draining: _Optional[bool] = ..., free_kv_blocks: _Optional[int] = ..., last_heartbeat_unix_ms: _Optional[int] = ...) -> None: ...
