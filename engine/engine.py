"""The engine: accepts requests of token ids, runs steps, emits new tokens per request.

The loop a driver runs is `add_request()` / `abort()` between steps and `step()` while
`has_unfinished()`. This version runs one sequence at a time (FIFO) with a contiguous KV cache;
continuous batching over a paged cache replaces the internals behind the same interface.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

import torch

from engine.kv_cache import SequenceKVCache
from engine.model import LlamaForCausalLM
from engine.sampler import SamplingParams, make_generator, sample


class EngineError(Exception):
    """A request the engine cannot take (too long for its context, duplicate id)."""


class FinishReason(enum.Enum):
    STOP_TOKEN = "stop_token"  # produced one of the request's stop token ids (end of sequence)
    LENGTH = "length"  # reached max_output_tokens
    ABORTED = "aborted"  # aborted by the driver (client cancellation)


@dataclass(slots=True, frozen=True)
class EngineRequest:
    request_id: str
    prompt_ids: tuple[int, ...]
    max_output_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop_token_ids: frozenset[int] = frozenset()  # empty: never stop early (ignore EOS)


@dataclass(slots=True, frozen=True)
class StepOutput:
    request_id: str
    new_token_ids: tuple[int, ...]  # tokens produced for this request in this step
    num_prompt_tokens: int
    num_output_tokens: int  # cumulative
    finish_reason: FinishReason | None  # set on the request's last output


@dataclass(slots=True)
class _Sequence:
    request: EngineRequest
    generator: torch.Generator | None
    output_ids: list[int] = field(default_factory=list)
    cache: SequenceKVCache | None = None


class Engine:
    def __init__(self, model: LlamaForCausalLM, dtype: torch.dtype = torch.float32) -> None:
        self.model = model
        self.dtype = dtype
        self.context_length = model.config.max_position_embeddings
        self._waiting: deque[_Sequence] = deque()
        self._running: _Sequence | None = None
        self._aborted: list[_Sequence] = []
        self._ids: set[str] = set()

    def add_request(self, request: EngineRequest) -> None:
        if request.request_id in self._ids:
            raise EngineError(f"duplicate request id {request.request_id!r}")
        if not request.prompt_ids:
            raise EngineError("empty prompt")
        if request.max_output_tokens < 1:
            raise EngineError("max_output_tokens must be at least 1")
        if len(request.prompt_ids) + request.max_output_tokens > self.context_length:
            raise EngineError(
                f"prompt ({len(request.prompt_ids)}) + output ({request.max_output_tokens}) tokens "
                f"exceed the context length {self.context_length}"
            )
        self._ids.add(request.request_id)
        self._waiting.append(_Sequence(request, make_generator(request.sampling)))

    def abort(self, request_id: str) -> None:
        """Stops a request at this step boundary; its last output reports ABORTED. Unknown ids are ignored."""
        if self._running is not None and self._running.request.request_id == request_id:
            self._aborted.append(self._running)
            self._running = None
            return
        for seq in self._waiting:
            if seq.request.request_id == request_id:
                self._waiting.remove(seq)
                self._aborted.append(seq)
                return

    def has_unfinished(self) -> bool:
        return bool(self._waiting or self._running or self._aborted)

    def step(self) -> list[StepOutput]:
        outputs = [self._finish(seq, FinishReason.ABORTED, ()) for seq in self._aborted]
        self._aborted.clear()
        if self._running is None and self._waiting:
            self._running = self._waiting.popleft()
        seq = self._running
        if seq is None:
            return outputs
        token = self._run_one(seq)
        seq.output_ids.append(token)
        reason = None
        if token in seq.request.stop_token_ids:
            reason = FinishReason.STOP_TOKEN
        elif len(seq.output_ids) >= seq.request.max_output_tokens:
            reason = FinishReason.LENGTH
        if reason is None:
            outputs.append(self._output(seq, (token,), None))
        else:
            self._running = None
            outputs.append(self._finish(seq, reason, (token,)))
        return outputs

    @torch.inference_mode()
    def _run_one(self, seq: _Sequence) -> int:
        req = seq.request
        if seq.cache is None:  # prefill the whole prompt
            seq.cache = SequenceKVCache(
                self.model.config, len(req.prompt_ids) + req.max_output_tokens, self.dtype
            )
            tokens = list(req.prompt_ids)
        else:  # decode the last sampled token
            tokens = [seq.output_ids[-1]]
        start = seq.cache.num_cached
        seq.cache.begin_step(len(tokens))
        hidden = self.model(torch.tensor(tokens), torch.arange(start, start + len(tokens)), seq.cache)
        seq.cache.end_step()
        logits = self.model.compute_logits(hidden[-1:])[0]
        return sample(logits, req.sampling, seq.generator)

    def _output(self, seq: _Sequence, new: tuple[int, ...], reason: FinishReason | None) -> StepOutput:
        return StepOutput(
            request_id=seq.request.request_id,
            new_token_ids=new,
            num_prompt_tokens=len(seq.request.prompt_ids),
            num_output_tokens=len(seq.output_ids),
            finish_reason=reason,
        )

    def _finish(self, seq: _Sequence, reason: FinishReason, new: tuple[int, ...]) -> StepOutput:
        seq.cache = None  # frees its KV memory
        self._ids.discard(seq.request.request_id)
        return self._output(seq, new, reason)
