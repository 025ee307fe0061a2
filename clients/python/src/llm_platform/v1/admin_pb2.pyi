import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from llm_platform.v1 import account_pb2 as _account_pb2
from llm_platform.v1 import generations_pb2 as _generations_pb2
from llm_platform.v1 import models_pb2 as _models_pb2
from llm_platform.v1 import usage_pb2 as _usage_pb2
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

class CreateTenantRequest(_message.Message):
    __slots__ = ("tenant_id", "settings")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    settings: _account_pb2.TenantSettings
    def __init__(self, tenant_id: _Optional[str] = ..., settings: _Optional[_Union[_account_pb2.TenantSettings, _Mapping]] = ...) -> None: ...

class UpdateTenantRequest(_message.Message):
    __slots__ = ("tenant_id", "weight", "max_concurrent_generations", "input_tokens_per_minute", "output_tokens_per_minute", "max_queued_tokens", "monthly_budget_micros", "no_monthly_budget", "allowed_models", "disabled")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_BUDGET_MICROS_FIELD_NUMBER: _ClassVar[int]
    NO_MONTHLY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_MODELS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    weight: float
    max_concurrent_generations: int
    input_tokens_per_minute: int
    output_tokens_per_minute: int
    max_queued_tokens: int
    monthly_budget_micros: int
    no_monthly_budget: bool
    allowed_models: ModelList
    disabled: bool
    def __init__(self, tenant_id: _Optional[str] = ..., weight: _Optional[float] = ..., max_concurrent_generations: _Optional[int] = ..., input_tokens_per_minute: _Optional[int] = ..., output_tokens_per_minute: _Optional[int] = ..., max_queued_tokens: _Optional[int] = ..., monthly_budget_micros: _Optional[int] = ..., no_monthly_budget: _Optional[bool] = ..., allowed_models: _Optional[_Union[ModelList, _Mapping]] = ..., disabled: _Optional[bool] = ...) -> None: ...

class ModelList(_message.Message):
    __slots__ = ("aliases",)
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    aliases: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, aliases: _Optional[_Iterable[str]] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants",)
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[_account_pb2.Tenant]
    def __init__(self, tenants: _Optional[_Iterable[_Union[_account_pb2.Tenant, _Mapping]]] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("tenant_id", "settings", "expires_in")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    settings: _account_pb2.KeySettings
    expires_in: _duration_pb2.Duration
    def __init__(self, tenant_id: _Optional[str] = ..., settings: _Optional[_Union[_account_pb2.KeySettings, _Mapping]] = ..., expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class UpdateApiKeyRequest(_message.Message):
    __slots__ = ("key_id", "name", "scopes", "input_tokens_per_minute", "output_tokens_per_minute", "monthly_budget_micros", "clear")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_BUDGET_MICROS_FIELD_NUMBER: _ClassVar[int]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    name: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    input_tokens_per_minute: int
    output_tokens_per_minute: int
    monthly_budget_micros: int
    clear: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_id: _Optional[str] = ..., name: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., input_tokens_per_minute: _Optional[int] = ..., output_tokens_per_minute: _Optional[int] = ..., monthly_budget_micros: _Optional[int] = ..., clear: _Optional[_Iterable[str]] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RotateApiKeyRequest(_message.Message):
    __slots__ = ("key_id", "overlap")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    overlap: _duration_pb2.Duration
    def __init__(self, key_id: _Optional[str] = ..., overlap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ListTenantChangesRequest(_message.Message):
    __slots__ = ("tenant_id", "limit")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    limit: int
    def __init__(self, tenant_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListTenantChangesResponse(_message.Message):
    __slots__ = ("changes",)
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[TenantChange]
    def __init__(self, changes: _Optional[_Iterable[_Union[TenantChange, _Mapping]]] = ...) -> None: ...

class TenantChange(_message.Message):
    __slots__ = ("at", "actor", "action", "tenant", "key_id", "detail_json")
    AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_JSON_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    actor: str
    action: str
    tenant: str
    key_id: str
    detail_json: str
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., tenant: _Optional[str] = ..., key_id: _Optional[str] = ..., detail_json: _Optional[str] = ...) -> None: ...

class SetModelPriceRequest(_message.Message):
    __slots__ = ("model", "input_per_mtok", "cached_input_per_mtok", "output_per_mtok", "effective_at")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    model: str
    input_per_mtok: int
    cached_input_per_mtok: int
    output_per_mtok: int
    effective_at: _timestamp_pb2.Timestamp
    def __init__(self, model: _Optional[str] = ..., input_per_mtok: _Optional[int] = ..., cached_input_per_mtok: _Optional[int] = ..., output_per_mtok: _Optional[int] = ..., effective_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetModelPriceResponse(_message.Message):
    __slots__ = ("prices",)
    PRICES_FIELD_NUMBER: _ClassVar[int]
    prices: _containers.RepeatedCompositeFieldContainer[ModelPrice]
    def __init__(self, prices: _Optional[_Iterable[_Union[ModelPrice, _Mapping]]] = ...) -> None: ...

class ModelPrice(_message.Message):
    __slots__ = ("model_version", "input_per_mtok", "cached_input_per_mtok", "output_per_mtok", "effective_at", "set_at", "set_by")
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    SET_AT_FIELD_NUMBER: _ClassVar[int]
    SET_BY_FIELD_NUMBER: _ClassVar[int]
    model_version: str
    input_per_mtok: int
    cached_input_per_mtok: int
    output_per_mtok: int
    effective_at: _timestamp_pb2.Timestamp
    set_at: _timestamp_pb2.Timestamp
    set_by: str
    def __init__(self, model_version: _Optional[str] = ..., input_per_mtok: _Optional[int] = ..., cached_input_per_mtok: _Optional[int] = ..., output_per_mtok: _Optional[int] = ..., effective_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., set_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., set_by: _Optional[str] = ...) -> None: ...

class ListModelPricesRequest(_message.Message):
    __slots__ = ("model_version",)
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    model_version: str
    def __init__(self, model_version: _Optional[str] = ...) -> None: ...

class ListModelPricesResponse(_message.Message):
    __slots__ = ("prices",)
    PRICES_FIELD_NUMBER: _ClassVar[int]
    prices: _containers.RepeatedCompositeFieldContainer[ModelPrice]
    def __init__(self, prices: _Optional[_Iterable[_Union[ModelPrice, _Mapping]]] = ...) -> None: ...

class ListGenerationsRequest(_message.Message):
    __slots__ = ("states", "tenant_id", "limit")
    STATES_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[_generations_pb2.Generation.State]
    tenant_id: str
    limit: int
    def __init__(self, states: _Optional[_Iterable[_Union[_generations_pb2.Generation.State, str]]] = ..., tenant_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListGenerationsResponse(_message.Message):
    __slots__ = ("counts", "generations")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.ScalarMap[str, int]
    generations: _containers.RepeatedCompositeFieldContainer[GenerationSummary]
    def __init__(self, counts: _Optional[_Mapping[str, int]] = ..., generations: _Optional[_Iterable[_Union[GenerationSummary, _Mapping]]] = ...) -> None: ...

class GenerationSummary(_message.Message):
    __slots__ = ("generation_id", "tenant", "api_key_id", "model_version", "state", "created_at", "owner_frontend", "reserved_tokens")
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FRONTEND_FIELD_NUMBER: _ClassVar[int]
    RESERVED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    tenant: str
    api_key_id: str
    model_version: str
    state: _generations_pb2.Generation.State
    created_at: _timestamp_pb2.Timestamp
    owner_frontend: str
    reserved_tokens: int
    def __init__(self, generation_id: _Optional[str] = ..., tenant: _Optional[str] = ..., api_key_id: _Optional[str] = ..., model_version: _Optional[str] = ..., state: _Optional[_Union[_generations_pb2.Generation.State, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., owner_frontend: _Optional[str] = ..., reserved_tokens: _Optional[int] = ...) -> None: ...
