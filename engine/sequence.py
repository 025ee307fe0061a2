"""A request inside the engine, and the request/result value objects at the engine's boundary.

No torch at run time (a sequence's generator is only typed as one), so the scheduler, which works
on sequences, imports no torch either.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contracts.sampling import GREEDY_BELOW_TEMPERATURE, TOP_K_OFF, TOP_P_OFF
from contracts.tier import Tier

if TYPE_CHECKING:
    import torch


class FinishReason(enum.Enum):
    STOP_TOKEN = "stop_token"  # produced one of the request's stop token ids (end of sequence)
    LENGTH = "length"  # reached max_output_tokens
    ABORTED = "aborted"  # aborted by the driver (client cancellation)
    ERROR = "error"  # this request alone could not go on (its logits could not be sampled)


class SeqStatus(enum.IntEnum):
    """WAITING -> RUNNING -> FINISHED; a preempted sequence goes back to WAITING and recomputes."""

    WAITING = 0
    RUNNING = 1
    FINISHED = 2


@dataclass(slots=True, frozen=True)
class SamplingParams:
    temperature: float = 0.0  # below contracts.sampling.GREEDY_BELOW_TEMPERATURE (0 too) is greedy
    top_k: int = TOP_K_OFF  # keep the k most likely tokens
    top_p: float = TOP_P_OFF  # nucleus mass in (0, 1]
    seed: int | None = None  # None draws a fresh random seed

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW_TEMPERATURE


@dataclass(slots=True, frozen=True)
class EngineRequest:
    request_id: str
    prompt_ids: tuple[int, ...]
    max_output_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop_token_ids: frozenset[int] = frozenset()  # empty: never stop early (ignore EOS)
    cache_salt: str = ""  # server-controlled prefix-cache scope (tenant or trust group)
    tier: Tier = Tier.INTERACTIVE  # lower is scheduled first
    weight: float = 1.0  # the salt's weighted-fair share of prefill
    guide: tuple[str, str] | None = None  # structured output: (guide type, guide), contracts/guides.py
    logprobs: bool = False  # report each new token's log-probability (StepOutput.logprobs)
    top_logprobs: int = 0  # ... and this many most likely alternatives (0..MAX_TOP_LOGPROBS)


@dataclass(slots=True, frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model: the log-softmax of its logits before
    any sampling setting or structured-output mask (so, as OpenAI reports them)."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob) of the most likely tokens, best first


@dataclass(slots=True, frozen=True)
class StepOutput:
    request_id: str
    new_token_ids: tuple[int, ...]  # tokens produced for this request in this step
    num_prompt_tokens: int
    num_cached_tokens: int  # prompt tokens served from the prefix cache at admission
    num_output_tokens: int  # cumulative
    finish_reason: FinishReason | None  # set on the request's last output
    error: str | None = None  # FinishReason.ERROR: why, as an exception type name (never request data)
    logprobs: tuple[TokenLogprob, ...] = ()  # one per new token, when the request asked for them


@dataclass(slots=True, eq=False)
class Sequence:
    request: EngineRequest
    arrival: int  # admission order
    generator: torch.Generator | None
    token_ids: list[int]  # prompt, then every generated token
    num_computed_tokens: int = 0  # tokens whose KV is in the cache
    num_cached_tokens: int = 0  # of the prompt, found in the prefix cache at first scheduling
    status: SeqStatus = SeqStatus.WAITING
    matched_prefix: bool = False  # prefix blocks referenced for the current residency
    num_preemptions: int = 0
    finish_reason: FinishReason | None = None
    finish_tag: float | None = None  # its prompt's prefill order, fixed at its first chunk (prefill_order.py)
    admitted_s: float | None = None  # the engine clock at add_request, kept if preempted; None: no deadline
    matcher: Any = None  # structured output: its grammar matcher (engine/constraints.py), else None
    speculation: Any = (
        None  # speculative decoding: its SeqSpeculation (engine/speculative/speculation_cost.py)
    )

    @property
    def id(self) -> str:
        return self.request.request_id

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.request.prompt_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def num_uncomputed(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    def finished_by(self, token: int) -> FinishReason | None:
        """Why the sequence ends with `token` (just appended), or None when it goes on."""
        if token in self.request.stop_token_ids:
            return FinishReason.STOP_TOKEN
        if self.num_output_tokens >= self.request.max_output_tokens:
            return FinishReason.LENGTH
        return None
