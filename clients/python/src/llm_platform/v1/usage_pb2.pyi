import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UsageBucket(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    USAGE_BUCKET_UNSPECIFIED: _ClassVar[UsageBucket]
    USAGE_BUCKET_DAY: _ClassVar[UsageBucket]
    USAGE_BUCKET_HOUR: _ClassVar[UsageBucket]
USAGE_BUCKET_UNSPECIFIED: UsageBucket
USAGE_BUCKET_DAY: UsageBucket
USAGE_BUCKET_HOUR: UsageBucket

class GetUsageRequest(_message.Message):
    __slots__ = ("tenant", "window_start", "window_end")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    window_start: _timestamp_pb2.Timestamp
    window_end: _timestamp_pb2.Timestamp
    def __init__(self, tenant: _Optional[str] = ..., window_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("tenant", "input_tokens", "cached_input_tokens", "output_tokens", "interrupted_output_tokens", "unbilled_estimate_tokens", "generations", "spend_micros")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UNBILLED_ESTIMATE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    SPEND_MICROS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    interrupted_output_tokens: int
    unbilled_estimate_tokens: int
    generations: int
    spend_micros: int
    def __init__(self, tenant: _Optional[str] = ..., input_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., interrupted_output_tokens: _Optional[int] = ..., unbilled_estimate_tokens: _Optional[int] = ..., generations: _Optional[int] = ..., spend_micros: _Optional[int] = ...) -> None: ...

class ExportUsageRequest(_message.Message):
    __slots__ = ("tenant", "window_start", "window_end", "bucket")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    window_start: _timestamp_pb2.Timestamp
    window_end: _timestamp_pb2.Timestamp
    bucket: UsageBucket
    def __init__(self, tenant: _Optional[str] = ..., window_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., bucket: _Optional[_Union[UsageBucket, str]] = ...) -> None: ...

class UsageRow(_message.Message):
    __slots__ = ("tenant", "api_key_id", "model_version", "adapter", "period_start", "input_tokens", "cached_input_tokens", "output_tokens", "requests", "spend_micros")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SPEND_MICROS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    api_key_id: str
    model_version: str
    adapter: str
    period_start: _timestamp_pb2.Timestamp
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    requests: int
    spend_micros: int
    def __init__(self, tenant: _Optional[str] = ..., api_key_id: _Optional[str] = ..., model_version: _Optional[str] = ..., adapter: _Optional[str] = ..., period_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., input_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., requests: _Optional[int] = ..., spend_micros: _Optional[int] = ...) -> None: ...
