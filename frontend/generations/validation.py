"""Validation of GenerateRequest: every bad setting is INVALID_ARGUMENT with a precise reason.

The one place that checks client input; downstream code receives a `ValidatedRequest`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from contracts.guides import MAX_TOP_LOGPROBS
from contracts.sampling import GREEDY_BELOW_TEMPERATURE, TOP_K_OFF, TOP_P_OFF
from contracts.tier import Tier
from frontend.catalog.tokenization import ROLES, Message
from frontend.generations.constraints import guide_of
from frontend.refusals import InvalidRequest
from llm.v1 import generations_pb2 as pb

MAX_REQUEST_ID_CHARS = 128
MAX_STOP_STRINGS = 8
MAX_STOP_BYTES = 256
MAX_TEMPERATURE = 2.0


@dataclass(slots=True, frozen=True)
class RequestLimits:
    """Caps checked before any expensive work ([frontend] max_prompt_chars, max_messages)."""

    max_prompt_chars: int = 131_072  # prompt, or all message contents together
    max_messages: int = 1024


DEFAULT_LIMITS = RequestLimits()


@dataclass(slots=True, frozen=True)
class GenerationParams:
    max_output_tokens: int
    temperature: float = 0.0
    top_p: float = TOP_P_OFF
    top_k: int = TOP_K_OFF
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    guide: tuple[str, str] | None = None  # structured output: (guide type, guide), contracts/guides.py
    logprobs: bool = False  # each output token's log-probability in the deltas
    top_logprobs: int = 0  # ... with this many alternatives


@dataclass(slots=True, frozen=True)
class ValidatedRequest:
    request_id: str  # may be empty: the server assigns one
    model: str  # alias or name@version, not yet resolved
    prompt: str | None  # exactly one of prompt / messages is set
    messages: tuple[Message, ...] | None
    params: GenerationParams
    tier: Tier


def validate(req: pb.GenerateRequest, limits: RequestLimits = DEFAULT_LIMITS) -> ValidatedRequest:
    if len(req.request_id) > MAX_REQUEST_ID_CHARS:
        raise InvalidRequest(
            "INVALID_REQUEST_ID", f"request_id is longer than {MAX_REQUEST_ID_CHARS} characters"
        )
    if not req.model:
        raise InvalidRequest("MISSING_MODEL", "model is required (an alias or name@version)")
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    which = req.WhichOneof("input")
    if which == "prompt":
        if not req.prompt:
            raise InvalidRequest("EMPTY_INPUT", "prompt is empty")
        if len(req.prompt) > limits.max_prompt_chars:
            raise InvalidRequest(
                "INPUT_TOO_LONG", f"prompt is longer than {limits.max_prompt_chars} characters"
            )
        prompt = req.prompt
    elif which == "messages":
        if len(req.messages.messages) > limits.max_messages:
            raise InvalidRequest("TOO_MANY_MESSAGES", f"more than {limits.max_messages} messages")
        if sum(len(m.content) for m in req.messages.messages) > limits.max_prompt_chars:
            raise InvalidRequest(
                "INPUT_TOO_LONG", f"messages are longer than {limits.max_prompt_chars} characters"
            )
        messages = tuple(_message(i, m) for i, m in enumerate(req.messages.messages))
        if not messages:
            raise InvalidRequest("EMPTY_INPUT", "messages is empty")
    else:
        raise InvalidRequest("EMPTY_INPUT", "one of prompt or messages is required")
    try:
        tier = Tier(req.tier or Tier.INTERACTIVE)  # TIER_UNSPECIFIED is INTERACTIVE
    except ValueError:
        raise InvalidRequest("INVALID_TIER", f"unknown tier {req.tier}") from None
    return ValidatedRequest(
        request_id=req.request_id,
        model=req.model,
        prompt=prompt,
        messages=messages,
        params=_params(req),
        tier=tier,
    )


def _message(index: int, m: pb.ChatMessage) -> Message:
    if m.role not in ROLES:
        raise InvalidRequest("INVALID_MESSAGE", f"messages[{index}].role must be one of {', '.join(ROLES)}")
    return Message(m.role, m.content)


def _params(req: pb.GenerateRequest) -> GenerationParams:
    if req.max_output_tokens < 1:
        raise InvalidRequest("INVALID_MAX_OUTPUT_TOKENS", "max_output_tokens must be at least 1")
    s = req.sampling
    temperature = s.temperature if s.HasField("temperature") else 0.0
    top_p = s.top_p if s.HasField("top_p") else TOP_P_OFF
    top_k = s.top_k if s.HasField("top_k") else TOP_K_OFF
    if not math.isfinite(temperature) or not 0.0 <= temperature <= MAX_TEMPERATURE:
        raise _sampling("temperature", f"must be in [0, {MAX_TEMPERATURE}]")
    if temperature < GREEDY_BELOW_TEMPERATURE:
        # Tiny temperatures are greedy, not refused: argmax is the limit of sampling as T -> 0 and
        # below the floor the draw already is argmax, while dividing logits by them overflows
        # (contracts/sampling.py). Normalised here, so the payload hash sees the effective request.
        temperature = 0.0
    if not math.isfinite(top_p) or not 0.0 < top_p <= 1.0:
        raise _sampling("top_p", "must be in (0, 1]")
    if top_k < 0:
        raise _sampling("top_k", f"must be at least 0 ({TOP_K_OFF} is off)")
    if len(s.stop) > MAX_STOP_STRINGS:
        raise _sampling("stop", f"at most {MAX_STOP_STRINGS} stop strings")
    for stop in s.stop:
        if not 0 < len(stop.encode()) <= MAX_STOP_BYTES:
            raise _sampling("stop", f"each stop string must be 1..{MAX_STOP_BYTES} bytes")
    guide = guide_of(req.constraint) if req.HasField("constraint") else None
    if guide is not None and s.ignore_eos:
        raise InvalidRequest(
            "CONFLICTING_SETTINGS", "a constrained generation ends where its constraint does: not ignore_eos"
        )
    if not 0 <= req.top_logprobs <= MAX_TOP_LOGPROBS:
        raise InvalidRequest(
            "INVALID_LOGPROBS", f"top_logprobs must be 0..{MAX_TOP_LOGPROBS}", field="top_logprobs"
        )
    if req.top_logprobs and not req.logprobs:
        raise InvalidRequest("INVALID_LOGPROBS", "top_logprobs needs logprobs", field="top_logprobs")
    return GenerationParams(
        max_output_tokens=req.max_output_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=s.seed if s.HasField("seed") else None,
        stop=tuple(s.stop),
        ignore_eos=s.ignore_eos,
        guide=guide,
        logprobs=req.logprobs,
        top_logprobs=req.top_logprobs,
    )


def _sampling(field: str, rule: str) -> InvalidRequest:
    return InvalidRequest("INVALID_SAMPLING", f"sampling.{field} {rule}", field=field)


def check_for_version(params: GenerationParams, vocab_size: int) -> None:
    """Checks that depend on the pinned version."""
    if params.top_k > vocab_size:
        raise _sampling("top_k", f"must be at most the vocabulary size {vocab_size}")


def check_context(prompt_tokens: int, max_output_tokens: int, context_length: int) -> None:
    if prompt_tokens == 0:
        raise InvalidRequest("EMPTY_INPUT", "the input tokenizes to no tokens")
    if prompt_tokens + max_output_tokens > context_length:
        raise InvalidRequest(
            "CONTEXT_LENGTH_EXCEEDED",
            f"prompt ({prompt_tokens} tokens) + max_output_tokens ({max_output_tokens}) exceeds "
            f"the model's context of {context_length} tokens",
            prompt_tokens=str(prompt_tokens),
            context_length=str(context_length),
        )
