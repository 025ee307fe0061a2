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

class PushModelVersionRequest(_message.Message):
    __slots__ = ("manifest", "chunk", "alias", "canary_percent")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    CANARY_PERCENT_FIELD_NUMBER: _ClassVar[int]
    manifest: bytes
    chunk: ArtifactChunk
    alias: str
    canary_percent: int
    def __init__(self, manifest: _Optional[bytes] = ..., chunk: _Optional[_Union[ArtifactChunk, _Mapping]] = ..., alias: _Optional[str] = ..., canary_percent: _Optional[int] = ...) -> None: ...

class ArtifactChunk(_message.Message):
    __slots__ = ("file", "offset", "data")
    FILE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    file: str
    offset: int
    data: bytes
    def __init__(self, file: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PushModelVersionResponse(_message.Message):
    __slots__ = ("version", "already_present", "route")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ALREADY_PRESENT_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    version: _models_pb2.ModelVersion
    already_present: bool
    route: _models_pb2.AliasRoute
    def __init__(self, version: _Optional[_Union[_models_pb2.ModelVersion, _Mapping]] = ..., already_present: _Optional[bool] = ..., route: _Optional[_Union[_models_pb2.AliasRoute, _Mapping]] = ...) -> None: ...

class FetchArtifactFileRequest(_message.Message):
    __slots__ = ("version_id", "file", "offset")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    file: str
    offset: int
    def __init__(self, version_id: _Optional[str] = ..., file: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class PromoteVersionRequest(_message.Message):
    __slots__ = ("alias", "version_id")
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    alias: str
    version_id: str
    def __init__(self, alias: _Optional[str] = ..., version_id: _Optional[str] = ...) -> None: ...

class RollbackAliasRequest(_message.Message):
    __slots__ = ("alias",)
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    alias: str
    def __init__(self, alias: _Optional[str] = ...) -> None: ...

class RetireVersionRequest(_message.Message):
    __slots__ = ("version_id", "delete_files")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    DELETE_FILES_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    delete_files: bool
    def __init__(self, version_id: _Optional[str] = ..., delete_files: _Optional[bool] = ...) -> None: ...

class ListModelChangesRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListModelChangesResponse(_message.Message):
    __slots__ = ("changes",)
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[ModelChange]
    def __init__(self, changes: _Optional[_Iterable[_Union[ModelChange, _Mapping]]] = ...) -> None: ...

class ModelChange(_message.Message):
    __slots__ = ("at_unix_ms", "actor", "action", "alias", "version_id", "before", "after")
    AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    at_unix_ms: int
    actor: str
    action: str
    alias: str
    version_id: str
    before: _models_pb2.AliasRoute
    after: _models_pb2.AliasRoute
    def __init__(self, at_unix_ms: _Optional[int] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., alias: _Optional[str] = ..., version_id: _Optional[str] = ..., before: _Optional[_Union[_models_pb2.AliasRoute, _Mapping]] = ..., after: _Optional[_Union[_models_pb2.AliasRoute, _Mapping]] = ...) -> None: ...
