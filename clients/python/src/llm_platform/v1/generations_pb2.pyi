from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIER_UNSPECIFIED: _ClassVar[Tier]
    INTERACTIVE: _ClassVar[Tier]
    BATCH: _ClassVar[Tier]
TIER_UNSPECIFIED: Tier
INTERACTIVE: Tier
BATCH: Tier

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ChatMessages(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ("temperature", "top_p", "top_k", "seed", "stop", "ignore_eos")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    top_k: int
    seed: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    ignore_eos: bool
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., seed: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., ignore_eos: _Optional[bool] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("request_id", "model", "prompt", "messages", "max_output_tokens", "sampling", "tier", "constraint", "logprobs", "top_logprobs")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model: str
    prompt: str
    messages: ChatMessages
    max_output_tokens: int
    sampling: SamplingParams
    tier: Tier
    constraint: OutputConstraint
    logprobs: bool
    top_logprobs: int
    def __init__(self, request_id: _Optional[str] = ..., model: _Optional[str] = ..., prompt: _Optional[str] = ..., messages: _Optional[_Union[ChatMessages, _Mapping]] = ..., max_output_tokens: _Optional[int] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., tier: _Optional[_Union[Tier, str]] = ..., constraint: _Optional[_Union[OutputConstraint, _Mapping]] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ...) -> None: ...

class OutputConstraint(_message.Message):
    __slots__ = ("json_schema", "json_object", "regex", "choice", "lark_grammar", "gbnf_grammar")
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    JSON_OBJECT_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    LARK_GRAMMAR_FIELD_NUMBER: _ClassVar[int]
    GBNF_GRAMMAR_FIELD_NUMBER: _ClassVar[int]
    json_schema: str
    json_object: bool
    regex: str
    choice: ChoiceConstraint
    lark_grammar: str
    gbnf_grammar: str
    def __init__(self, json_schema: _Optional[str] = ..., json_object: _Optional[bool] = ..., regex: _Optional[str] = ..., choice: _Optional[_Union[ChoiceConstraint, _Mapping]] = ..., lark_grammar: _Optional[str] = ..., gbnf_grammar: _Optional[str] = ...) -> None: ...

class ChoiceConstraint(_message.Message):
    __slots__ = ("choices",)
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    choices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, choices: _Optional[_Iterable[str]] = ...) -> None: ...

class ConverseRequest(_message.Message):
    __slots__ = ("start", "cancel", "ack")
    START_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    start: GenerateRequest
    cancel: str
    ack: Ack
    def __init__(self, start: _Optional[_Union[GenerateRequest, _Mapping]] = ..., cancel: _Optional[str] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("generation_id", "sequence")
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    sequence: int
    def __init__(self, generation_id: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("generation_id", "after_sequence")
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    after_sequence: int
    def __init__(self, generation_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class GetGenerationRequest(_message.Message):
    __slots__ = ("generation_id", "request_id")
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    request_id: str
    def __init__(self, generation_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelGenerationRequest(_message.Message):
    __slots__ = ("generation_id",)
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    def __init__(self, generation_id: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("input_tokens", "cached_input_tokens", "output_tokens", "delivered_output_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    delivered_output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., delivered_output_tokens: _Optional[int] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ("generation_id", "request_id", "state", "model_version", "finish_reason", "epoch", "usage", "usage_final", "queue_position", "predicted_wait_ms")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATE_UNSPECIFIED: _ClassVar[Generation.State]
        QUEUED: _ClassVar[Generation.State]
        RUNNING: _ClassVar[Generation.State]
        COMPLETED: _ClassVar[Generation.State]
        CANCELED: _ClassVar[Generation.State]
        INTERRUPTED: _ClassVar[Generation.State]
        FAILED: _ClassVar[Generation.State]
    STATE_UNSPECIFIED: Generation.State
    QUEUED: Generation.State
    RUNNING: Generation.State
    COMPLETED: Generation.State
    CANCELED: Generation.State
    INTERRUPTED: Generation.State
    FAILED: Generation.State
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FINAL_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    request_id: str
    state: Generation.State
    model_version: str
    finish_reason: Finished.Reason
    epoch: int
    usage: TokenUsage
    usage_final: bool
    queue_position: int
    predicted_wait_ms: int
    def __init__(self, generation_id: _Optional[str] = ..., request_id: _Optional[str] = ..., state: _Optional[_Union[Generation.State, str]] = ..., model_version: _Optional[str] = ..., finish_reason: _Optional[_Union[Finished.Reason, str]] = ..., epoch: _Optional[int] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., usage_final: _Optional[bool] = ..., queue_position: _Optional[int] = ..., predicted_wait_ms: _Optional[int] = ...) -> None: ...

class GenerationEvent(_message.Message):
    __slots__ = ("generation_id", "epoch", "sequence", "started", "delta", "usage", "finished", "rejected")
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    epoch: int
    sequence: int
    started: Started
    delta: Delta
    usage: UsageUpdate
    finished: Finished
    rejected: Rejected
    def __init__(self, generation_id: _Optional[str] = ..., epoch: _Optional[int] = ..., sequence: _Optional[int] = ..., started: _Optional[_Union[Started, _Mapping]] = ..., delta: _Optional[_Union[Delta, _Mapping]] = ..., usage: _Optional[_Union[UsageUpdate, _Mapping]] = ..., finished: _Optional[_Union[Finished, _Mapping]] = ..., rejected: _Optional[_Union[Rejected, _Mapping]] = ...) -> None: ...

class Rejected(_message.Message):
    __slots__ = ("request_id", "status")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    status: _status_pb2.Status
    def __init__(self, request_id: _Optional[str] = ..., status: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class Started(_message.Message):
    __slots__ = ("model_version", "input_tokens", "cached_input_tokens", "request_id", "quantization")
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    model_version: str
    input_tokens: int
    cached_input_tokens: int
    request_id: str
    quantization: str
    def __init__(self, model_version: _Optional[str] = ..., input_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., request_id: _Optional[str] = ..., quantization: _Optional[str] = ...) -> None: ...

class Delta(_message.Message):
    __slots__ = ("text", "token_ids", "logprobs")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    text: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedCompositeFieldContainer[TokenLogprob]
    def __init__(self, text: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[_Union[TokenLogprob, _Mapping]]] = ...) -> None: ...

class TokenLogprob(_message.Message):
    __slots__ = ("token_id", "token", "bytes", "logprob", "top_logprobs")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    token_id: int
    token: str
    bytes: bytes
    logprob: float
    top_logprobs: _containers.RepeatedCompositeFieldContainer[TopLogprob]
    def __init__(self, token_id: _Optional[int] = ..., token: _Optional[str] = ..., bytes: _Optional[bytes] = ..., logprob: _Optional[float] = ..., top_logprobs: _Optional[_Iterable[_Union[TopLogprob, _Mapping]]] = ...) -> None: ...

class TopLogprob(_message.Message):
    __slots__ = ("token_id", "token", "bytes", "logprob")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    token_id: int
    token: str
    bytes: bytes
    logprob: float
    def __init__(self, token_id: _Optional[int] = ..., token: _Optional[str] = ..., bytes: _Optional[bytes] = ..., logprob: _Optional[float] = ...) -> None: ...

class UsageUpdate(_message.Message):
    __slots__ = ("usage",)
    USAGE_FIELD_NUMBER: _ClassVar[int]
    usage: TokenUsage
    def __init__(self, usage: _Optional[_Union[TokenUsage, _Mapping]] = ...) -> None: ...

class Finished(_message.Message):
    __slots__ = ("reason", "usage", "usage_final")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[Finished.Reason]
        COMPLETED: _ClassVar[Finished.Reason]
        OUTPUT_LIMIT: _ClassVar[Finished.Reason]
        STOP_SEQUENCE: _ClassVar[Finished.Reason]
        CANCELED: _ClassVar[Finished.Reason]
        INTERRUPTED: _ClassVar[Finished.Reason]
        DEADLINE_EXCEEDED: _ClassVar[Finished.Reason]
        FAILED: _ClassVar[Finished.Reason]
    REASON_UNSPECIFIED: Finished.Reason
    COMPLETED: Finished.Reason
    OUTPUT_LIMIT: Finished.Reason
    STOP_SEQUENCE: Finished.Reason
    CANCELED: Finished.Reason
    INTERRUPTED: Finished.Reason
    DEADLINE_EXCEEDED: Finished.Reason
    FAILED: Finished.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FINAL_FIELD_NUMBER: _ClassVar[int]
    reason: Finished.Reason
    usage: TokenUsage
    usage_final: bool
    def __init__(self, reason: _Optional[_Union[Finished.Reason, str]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., usage_final: _Optional[bool] = ...) -> None: ...
