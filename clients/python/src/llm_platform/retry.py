"""How one logical `generate()` call survives broken streams: the request id is drawn once, events
already delivered are never delivered again, and a transport failure (UNAVAILABLE with no ErrorInfo)
is retried a bounded number of times: by `Resume(generation_id, last sequence)` once the generation
is known, otherwise by `Generate` again under the same request id (the server re-attaches to the
generation it may already have recorded, so a retry never starts a second one)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from llm_platform.errors import ApiError
from llm_platform.events import Event, Finished, event_of
from llm_platform.v1 import generations_pb2 as pb

# chat messages: (role, content) pairs or {"role": ..., "content": ...} mappings
Messages = Sequence[tuple[str, str] | Mapping[str, str]]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5  # consecutive reconnects without a new event before giving up
    initial_backoff: float = 0.1  # seconds before the first reconnect
    max_backoff: float = 5.0
    multiplier: float = 2.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before reconnect `attempt` (1-based): exponential, jittered to [50%, 100%]."""
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return base * (0.5 + 0.5 * rng.random())


@dataclass
class Cursor:
    """Where a logical generate call stands."""

    request: pb.GenerateRequest  # request_id set: the idempotency key of every attempt
    policy: RetryPolicy
    rng: random.Random = field(default_factory=random.Random)
    generation_id: str = ""
    last_sequence: int = 0  # highest sequence delivered to the caller
    failures: int = 0  # transport failures since the last delivered event
    reconnects: int = 0  # every reconnect (Generate again or Resume) of this call
    finished: bool = False

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def resume_request(self) -> pb.ResumeRequest | None:
        """Resume once the generation is known; None means: call Generate (again)."""
        if not self.generation_id:
            return None
        return pb.ResumeRequest(generation_id=self.generation_id, after_sequence=self.last_sequence)

    def accept(self, raw: pb.GenerationEvent) -> Event | None:
        """The typed event to deliver, or None for one already delivered (a replay)."""
        if raw.sequence <= self.last_sequence:
            return None
        self.generation_id = raw.generation_id
        self.last_sequence = raw.sequence
        self.failures = 0
        event = event_of(raw)
        self.finished = isinstance(event, Finished)
        return event

    def retry_delay(self, error: ApiError) -> float | None:
        """Seconds to wait before reconnecting after `error`; None when it is not retried."""
        if not error.is_transport_failure or self.failures >= self.policy.max_attempts:
            return None
        self.failures += 1
        self.reconnects += 1
        return self.policy.backoff(self.failures, self.rng)


def new_request_id() -> str:
    return f"req-{uuid.uuid4().hex}"


def build_request(
    prompt: str | None,
    messages: Messages | None,
    *,
    model: str,
    max_output_tokens: int,
    request_id: str | None,
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    seed: int | None,
    stop: tuple[str, ...] | list[str],
    ignore_eos: bool,
    batch: bool,
    constraint: pb.OutputConstraint | None = None,
    logprobs: bool = False,
    top_logprobs: int = 0,
) -> pb.GenerateRequest:
    if (prompt is None) == (messages is None):
        raise ValueError("give exactly one of prompt or messages")
    sampling = pb.SamplingParams(stop=list(stop), ignore_eos=ignore_eos)
    if temperature is not None:
        sampling.temperature = temperature
    if top_p is not None:
        sampling.top_p = top_p
    if top_k is not None:
        sampling.top_k = top_k
    if seed is not None:
        sampling.seed = seed
    req = pb.GenerateRequest(
        request_id=request_id or new_request_id(),
        model=model,
        max_output_tokens=max_output_tokens,
        sampling=sampling,
        tier=pb.BATCH if batch else pb.TIER_UNSPECIFIED,
        constraint=constraint,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
    )
    if messages is not None:
        for m in messages:
            role, content = (m["role"], m["content"]) if isinstance(m, Mapping) else m
            req.messages.messages.add(role=role, content=content)
    else:
        req.prompt = prompt or ""
    return req
