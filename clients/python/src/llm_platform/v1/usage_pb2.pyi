import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
    __slots__ = ("tenant", "input_tokens", "cached_input_tokens", "output_tokens", "interrupted_output_tokens", "unbilled_estimate_tokens", "generations")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UNBILLED_ESTIMATE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    interrupted_output_tokens: int
    unbilled_estimate_tokens: int
    generations: int
    def __init__(self, tenant: _Optional[str] = ..., input_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., interrupted_output_tokens: _Optional[int] = ..., unbilled_estimate_tokens: _Optional[int] = ..., generations: _Optional[int] = ...) -> None: ...
