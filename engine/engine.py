"""The engine: accepts requests of token ids, runs steps, emits new tokens per request.

The driver (the Triton model) calls `add_request()` / `abort()` between steps and `step()` while
`has_unfinished()`. A step is three lines: schedule, run the model, update. `schedule_s` adds up the
time of the first and the last (the scheduler's part of every step, for the worker's metrics).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from contracts.capacity import DEFAULT_BLOCK_SIZE, DEFAULT_KV_CACHE_BLOCKS, DEFAULT_MAX_NUM_SEQS
from contracts.guides import MAX_TOP_LOGPROBS, GuideError
from contracts.sampling import TOP_K_OFF
from engine.block_pool import BlockPool
from engine.constraints import Grammars, Masks
from engine.kv_cache import PagedKVCache
from engine.kv_cache_manager import KVCacheManager
from engine.model import LlamaForCausalLM
from engine.runner import ModelRunner
from engine.sampler import make_generator, sample_step
from engine.scheduler import GUARANTEED_NO_EVICT, CapacityError, Scheduler
from engine.scheduler_output import SchedulerOutput
from engine.sequence import EngineRequest, FinishReason, SamplingParams, Sequence, StepOutput, TokenLogprob
from engine.speculative.draft_model import DraftModel
from engine.speculative.speculation import SpeculativeConfig, Speculator
from engine.step_budget import StepCost

__all__ = [
    "CapacityError",
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineRequest",
    "FinishReason",
    "SamplingParams",
    "StepOutput",
    "TokenLogprob",
]


class EngineError(Exception):
    """A request the engine can never serve (malformed, too long for its context, duplicate id)."""


@dataclass(slots=True, frozen=True)
class EngineConfig:
    num_blocks: int = DEFAULT_KV_CACHE_BLOCKS  # KV pool size in blocks
    block_size: int = DEFAULT_BLOCK_SIZE  # tokens per KV block
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS  # running sequences per step
    max_num_batched_tokens: int = 64  # prompt tokens a step may prefill; 0: sized each step from step_cost
    step_cost: StepCost | None = None  # the measured step cost (engine/cost_model.py)
    policy: str = GUARANTEED_NO_EVICT
    fair_share: bool = True  # prefill in weighted fair order across cache salts; False: arrival order
    dtype: torch.dtype = torch.float32  # activations and float weights
    kv_dtype: torch.dtype | None = None  # the KV cache's; None: `dtype`
    compatibility_key: str = ""  # the model version's; part of every prefix-cache key
    # drafts verified each step (engine/speculative/speculation.py); the default speculates not at all
    speculative: SpeculativeConfig = field(default_factory=SpeculativeConfig)


@dataclass(slots=True, frozen=True)
class Stats:
    blocks_used: int
    blocks_free: int
    blocks_cached: int
    running: int
    waiting: int
    preemptions: int  # cumulative
    prefix_query_tokens: int  # cumulative prompt tokens looked up in the prefix cache
    prefix_hit_tokens: int  # cumulative prompt tokens found there
    last_batch_tokens: int
    # speculative decoding, cumulative (engine/speculative/speculation.py SpeculationStats; 0 when off): draft
    # work is metrics only, bills count emitted tokens
    speculative_drafted: int = 0
    speculative_accepted: int = 0
    speculative_draft_s: float = 0.0
    speculative_verify_s: float = 0.0
    speculative_acceptance: tuple[int, ...] = ()  # verified drafts by acceptance rate bucket


class Engine:
    def __init__(
        self,
        model: LlamaForCausalLM,
        config: EngineConfig = EngineConfig(),
        clock: Callable[[], float] = time.monotonic,
        grammars: Grammars | None = None,
        draft_model: LlamaForCausalLM | None = None,
    ) -> None:
        """`clock`: seconds, for short prompts' prefill deadlines (engine/step_budget.py).
        `grammars`: the model tokenizer's compiled guides; None serves no structured output.
        `draft_model`: the drafts' model of the "draft" speculative method (the same tokenizer)."""
        self.model = model
        self.grammars = grammars
        self._masks = Masks()
        self._clock = clock
        self.config = config
        self.context_length = model.config.max_position_embeddings
        self.vocab_size = model.config.vocab_size
        self.kv = KVCacheManager(BlockPool(config.num_blocks), config.block_size, config.compatibility_key)
        self.scheduler = Scheduler(
            self.kv,
            config.max_num_seqs,
            config.max_num_batched_tokens,
            config.policy,
            config.fair_share,
            config.step_cost,
        )
        kv_dtype = config.kv_dtype or config.dtype
        cache = PagedKVCache(model.config, config.num_blocks, config.block_size, kv_dtype)
        self.runner = ModelRunner(model, cache)
        self.speculator: Speculator | None = None
        if config.speculative.method != "none":
            draft = None
            if draft_model is not None:
                draft = DraftModel(draft_model, config.num_blocks, config.block_size, kv_dtype)
            self.speculator = Speculator(config.speculative, self.kv, draft)
        self._seqs: dict[str, Sequence] = {}
        self._aborted: list[Sequence] = []
        self._arrivals = itertools.count()
        self._prefix_query = 0
        self._prefix_hit = 0
        self._last_batch = 0
        self.schedule_s = 0.0  # cumulative: scheduler.schedule() and scheduler.update() of every step

    def add_request(self, request: EngineRequest) -> StepOutput:
        """Admits a request (CapacityError if it does not fit now); returns its admission record."""
        if request.request_id in self._seqs:
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
        if min(request.prompt_ids) < 0 or max(request.prompt_ids) >= self.vocab_size:
            raise EngineError("prompt token ids outside the vocabulary")
        sampling = request.sampling
        if sampling.top_k < 0:
            raise EngineError(f"top_k must be at least 0 ({TOP_K_OFF} is off)")
        if not (math.isfinite(sampling.temperature) and sampling.temperature >= 0.0):
            raise EngineError("temperature must be finite and at least 0")
        if not (math.isfinite(sampling.top_p) and 0.0 < sampling.top_p <= 1.0):
            raise EngineError("top_p must be in (0, 1]")
        if not 0 <= request.top_logprobs <= MAX_TOP_LOGPROBS:
            raise EngineError(f"top_logprobs must be 0 to {MAX_TOP_LOGPROBS}")
        seq = Sequence(
            request, next(self._arrivals), make_generator(request.sampling), list(request.prompt_ids)
        )
        if request.guide is not None:
            seq.matcher = self._matcher(request)
        seq.admitted_s = self._clock()
        self.scheduler.add(seq)
        self._seqs[request.request_id] = seq
        self._prefix_query += seq.num_prompt_tokens
        self._prefix_hit += seq.num_cached_tokens
        return self._output(seq, ())

    def _matcher(self, request: EngineRequest) -> object:
        """The grammar matcher of a constrained request; EngineError when it cannot have one."""
        assert request.guide is not None
        if self.grammars is None:
            raise EngineError("this engine serves no structured output")
        if not request.stop_token_ids:
            raise EngineError("a constrained generation needs its end-of-sequence token (not ignore_eos)")
        try:
            return self.grammars.matcher(*request.guide)
        except GuideError as e:
            raise EngineError(f"{e.kind}: {e}") from None

    def abort(self, request_id: str) -> None:
        """Stops a request at this step boundary; its last output reports ABORTED. Unknown ids are ignored."""
        seq = self._seqs.pop(request_id, None)
        if seq is not None:
            self.scheduler.abort(seq)
            self._aborted.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self._seqs or self._aborted)

    def step(self) -> list[StepOutput]:
        outputs = [self._output(seq, ()) for seq in self._aborted]
        self._aborted.clear()
        started = time.perf_counter()
        scheduled = self.scheduler.schedule(self._clock())
        self._last_batch = scheduled.num_batched_tokens
        self.schedule_s += time.perf_counter() - started
        if scheduled.chunks:
            outputs += self._run(scheduled)
        return outputs

    def _run(self, scheduled: SchedulerOutput) -> list[StepOutput]:
        """Runs a scheduled step on the model (with drafts when it speculates), samples, updates."""
        outputs: list[StepOutput] = []
        spec = self.speculator
        if spec is not None:
            scheduled = spec.expand(scheduled)
        rows = [c.seq for c in scheduled.chunks if c.sample and not c.verify]
        constrained = [(i, seq.matcher) for i, seq in enumerate(rows) if seq.matcher is not None]
        masks = self._masks.start(constrained, self.vocab_size)  # computed while the model runs
        started = time.perf_counter()
        logits = self.runner.execute(scheduled, self.kv.block_table)
        model_s = time.perf_counter() - started
        verified = None if spec is None else spec.verify(scheduled, logits, model_s)
        if verified is not None and len(verified.plain_rows) < logits.shape[0]:
            logits = logits[verified.plain_rows]
        sampled = sample_step(rows, logits, masks)
        started = time.perf_counter()
        tokens: dict[str, int | tuple[int, ...]] = dict(sampled.tokens)
        logprobs: dict[str, tuple[TokenLogprob, ...]] = {k: (v,) for k, v in sampled.logprobs.items()}
        failed = dict(sampled.failed)
        if verified is not None:
            tokens.update(verified.tokens)
            logprobs.update(verified.logprobs)
            failed.update(verified.failed)
        for seq_id, error in failed.items():  # each ends alone; the batch goes on
            seq = self._seqs.pop(seq_id)
            self.scheduler.finish(seq, FinishReason.ERROR)
            outputs.append(self._output(seq, (), error))
        before = {c.seq.id: len(c.seq.token_ids) for c in scheduled.chunks if c.sample}
        for seq in self.scheduler.update(scheduled, tokens):
            new = tuple(seq.token_ids[before[seq.id] :])
            outputs.append(self._output(seq, new, logprobs=logprobs.get(seq.id, ())[: len(new)]))
            if seq.finish_reason is not None:
                del self._seqs[seq.id]
        if spec is not None:
            spec.reclaim()
        self.schedule_s += time.perf_counter() - started
        return outputs

    @property
    def last_batch_tokens(self) -> int:
        """Tokens computed in the last step (cheap: no pool scan, unlike stats())."""
        return self._last_batch

    def prefix_keys(self, limit: int) -> list[bytes]:
        """Up to `limit` prefix-cache keys a new request could hit now, most useful first."""
        return self.kv.pool.recent_keys(limit)

    def stats(self) -> Stats:
        pool = self.kv.pool
        cached = pool.num_cached
        return Stats(
            blocks_used=pool.num_used,
            blocks_free=pool.num_free - cached,
            blocks_cached=cached,
            running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting),
            preemptions=self.scheduler.num_preemptions,
            prefix_query_tokens=self._prefix_query,
            prefix_hit_tokens=self._prefix_hit,
            last_batch_tokens=self._last_batch,
            **self._speculation_stats(),
        )

    def _speculation_stats(self) -> dict[str, Any]:
        if self.speculator is None:
            return {}
        s = self.speculator.stats
        return {
            "speculative_drafted": s.drafted,
            "speculative_accepted": s.accepted,
            "speculative_draft_s": s.draft_s,
            "speculative_verify_s": s.verify_s,
            "speculative_acceptance": tuple(s.acceptance),
        }

    @staticmethod
    def _output(
        seq: Sequence, new: tuple[int, ...], error: str | None = None, logprobs: tuple[TokenLogprob, ...] = ()
    ) -> StepOutput:
        return StepOutput(
            request_id=seq.id,
            new_token_ids=new,
            num_prompt_tokens=seq.num_prompt_tokens,
            num_cached_tokens=seq.num_cached_tokens,
            num_output_tokens=seq.num_output_tokens,
            finish_reason=seq.finish_reason,
            error=error,
            logprobs=logprobs,
        )
