"""Typed generation events: one small frozen dataclass per kind of `llm.v1.GenerationEvent`, each
keeping the raw message (`raw`) for anything not lifted out."""

from __future__ import annotations

from dataclasses import dataclass

from llm_platform.v1 import generations_pb2 as pb


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    delivered_output_tokens: int

    @classmethod
    def of(cls, usage: pb.TokenUsage) -> Usage:
        return cls(
            usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.delivered_output_tokens
        )


@dataclass(frozen=True)
class Event:
    generation_id: str
    epoch: int
    sequence: int  # 1, 2, ... within a generation, across reconnects
    raw: pb.GenerationEvent


@dataclass(frozen=True)
class Started(Event):
    model_version: str  # the pinned immutable version, "name@version"
    input_tokens: int
    cached_input_tokens: int
    request_id: str


@dataclass(frozen=True)
class Delta(Event):
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[pb.TokenLogprob, ...] = ()  # one per token id, when the request asked for them


@dataclass(frozen=True)
class UsageUpdate(Event):
    usage: Usage


@dataclass(frozen=True)
class Finished(Event):
    reason: str  # COMPLETED, OUTPUT_LIMIT, STOP_SEQUENCE, CANCELED, INTERRUPTED, DEADLINE_EXCEEDED, FAILED
    usage: Usage
    usage_final: bool  # False: the last recorded watermark of an interrupted attempt


def event_of(raw: pb.GenerationEvent) -> Event:
    head = (raw.generation_id, raw.epoch, raw.sequence, raw)
    kind = raw.WhichOneof("event")
    if kind == "started":
        s = raw.started
        return Started(*head, s.model_version, s.input_tokens, s.cached_input_tokens, s.request_id)
    if kind == "delta":
        return Delta(*head, raw.delta.text, tuple(raw.delta.token_ids), tuple(raw.delta.logprobs))
    if kind == "usage":
        return UsageUpdate(*head, Usage.of(raw.usage.usage))
    if kind == "finished":
        f = raw.finished
        return Finished(*head, pb.Finished.Reason.Name(f.reason), Usage.of(f.usage), f.usage_final)
    return Event(*head)  # a kind this SDK version does not know yet
