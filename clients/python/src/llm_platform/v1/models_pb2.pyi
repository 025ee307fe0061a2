from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("versions", "aliases")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[ModelVersion]
    aliases: _containers.RepeatedCompositeFieldContainer[AliasRoute]
    def __init__(self, versions: _Optional[_Iterable[_Union[ModelVersion, _Mapping]]] = ..., aliases: _Optional[_Iterable[_Union[AliasRoute, _Mapping]]] = ...) -> None: ...

class ModelVersion(_message.Message):
    __slots__ = ("name", "version", "id", "context_length", "compatibility_key", "ready", "ready_workers", "weights_sha256", "tokenizer_sha256", "template_sha256", "quantization", "status", "size_bytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    COMPATIBILITY_KEY_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    READY_WORKERS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_SHA256_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_SHA256_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_SHA256_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    id: str
    context_length: int
    compatibility_key: str
    ready: bool
    ready_workers: int
    weights_sha256: str
    tokenizer_sha256: str
    template_sha256: str
    quantization: str
    status: str
    size_bytes: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., id: _Optional[str] = ..., context_length: _Optional[int] = ..., compatibility_key: _Optional[str] = ..., ready: _Optional[bool] = ..., ready_workers: _Optional[int] = ..., weights_sha256: _Optional[str] = ..., tokenizer_sha256: _Optional[str] = ..., template_sha256: _Optional[str] = ..., quantization: _Optional[str] = ..., status: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class AliasRoute(_message.Message):
    __slots__ = ("alias", "targets")
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    alias: str
    targets: _containers.RepeatedCompositeFieldContainer[WeightedVersion]
    def __init__(self, alias: _Optional[str] = ..., targets: _Optional[_Iterable[_Union[WeightedVersion, _Mapping]]] = ...) -> None: ...

class WeightedVersion(_message.Message):
    __slots__ = ("version_id", "weight")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    weight: int
    def __init__(self, version_id: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...
