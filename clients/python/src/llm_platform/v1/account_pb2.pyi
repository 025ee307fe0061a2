import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TenantSettings(_message.Message):
    __slots__ = ("weight", "max_concurrent_generations", "input_tokens_per_minute", "output_tokens_per_minute", "max_queued_tokens", "monthly_budget_micros", "allowed_models")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_BUDGET_MICROS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_MODELS_FIELD_NUMBER: _ClassVar[int]
    weight: float
    max_concurrent_generations: int
    input_tokens_per_minute: int
    output_tokens_per_minute: int
    max_queued_tokens: int
    monthly_budget_micros: int
    allowed_models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, weight: _Optional[float] = ..., max_concurrent_generations: _Optional[int] = ..., input_tokens_per_minute: _Optional[int] = ..., output_tokens_per_minute: _Optional[int] = ..., max_queued_tokens: _Optional[int] = ..., monthly_budget_micros: _Optional[int] = ..., allowed_models: _Optional[_Iterable[str]] = ...) -> None: ...

class MonthSpend(_message.Message):
    __slots__ = ("period_start", "reserved_micros", "spent_micros")
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    RESERVED_MICROS_FIELD_NUMBER: _ClassVar[int]
    SPENT_MICROS_FIELD_NUMBER: _ClassVar[int]
    period_start: _timestamp_pb2.Timestamp
    reserved_micros: int
    spent_micros: int
    def __init__(self, period_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reserved_micros: _Optional[int] = ..., spent_micros: _Optional[int] = ...) -> None: ...

class Tenant(_message.Message):
    __slots__ = ("id", "settings", "disabled", "created_at", "updated_at", "active_keys", "month")
    ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_KEYS_FIELD_NUMBER: _ClassVar[int]
    MONTH_FIELD_NUMBER: _ClassVar[int]
    id: str
    settings: TenantSettings
    disabled: bool
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    active_keys: int
    month: MonthSpend
    def __init__(self, id: _Optional[str] = ..., settings: _Optional[_Union[TenantSettings, _Mapping]] = ..., disabled: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active_keys: _Optional[int] = ..., month: _Optional[_Union[MonthSpend, _Mapping]] = ...) -> None: ...

class KeySettings(_message.Message):
    __slots__ = ("name", "scopes", "expires_at", "input_tokens_per_minute", "output_tokens_per_minute", "monthly_budget_micros")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_BUDGET_MICROS_FIELD_NUMBER: _ClassVar[int]
    name: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    expires_at: _timestamp_pb2.Timestamp
    input_tokens_per_minute: int
    output_tokens_per_minute: int
    monthly_budget_micros: int
    def __init__(self, name: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., input_tokens_per_minute: _Optional[int] = ..., output_tokens_per_minute: _Optional[int] = ..., monthly_budget_micros: _Optional[int] = ...) -> None: ...

class ApiKey(_message.Message):
    __slots__ = ("id", "tenant", "settings", "created_at", "revoked_at", "last_used_at", "previous_expires_at", "month")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    MONTH_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    settings: KeySettings
    created_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    last_used_at: _timestamp_pb2.Timestamp
    previous_expires_at: _timestamp_pb2.Timestamp
    month: MonthSpend
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., settings: _Optional[_Union[KeySettings, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., previous_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., month: _Optional[_Union[MonthSpend, _Mapping]] = ...) -> None: ...

class CreatedKey(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    secret: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class GetAccountRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AccountInfo(_message.Message):
    __slots__ = ("tenant", "key")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    key: ApiKey
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ...) -> None: ...

class CreateKeyRequest(_message.Message):
    __slots__ = ("settings", "expires_in")
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    settings: KeySettings
    expires_in: _duration_pb2.Duration
    def __init__(self, settings: _Optional[_Union[KeySettings, _Mapping]] = ..., expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RevokeKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...
