"""Speculative decoding in the engine: each step, decoding sequences may carry k drafted tokens
that the target verifies in the same step (engine/speculative/verification.py says why the outputs are exact).

    expand(step)   before the model runs: per decoding sequence, k (fixed, or chosen from the
                   measured cost: engine/speculative/speculation_cost.py), slots for k more tokens, and the
                   drafts (prompt lookup: ngram.py; a draft model: draft_model.py, both in
                   engine/speculative/);
                   its chunk becomes last token + drafts, verified
    verify(step, logits)  after: each verified chunk's emitted tokens, and the plain rows' logits
    reclaim(step)  after the scheduler's update: the blocks of rejected drafts' slots are freed

Memory: a draft's slots come out of the sequence's own reservation (k never takes it past prompt +
max output tokens) or, under max_utilization, out of free blocks only (never preempting another
sequence: k shrinks to what is free); `reclaim` gives back what the rejected drafts held.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

from engine.kv_cache_manager import KVCacheManager
from engine.scheduler_output import ScheduledChunk, SchedulerOutput
from engine.sequence import SeqStatus, TokenLogprob
from engine.speculative import ngram
from engine.speculative.draft_model import Drafted, DraftModel, state
from engine.speculative.speculation_cost import BATCH_LIMIT, SpeculationCost
from engine.speculative.verification import Verdict, grammar_rows, logprobs_of, verify

METHODS = ("none", "draft", "ngram")
MAX_AUTO_TOKENS = 8  # the most drafts a step chooses on its own (speculative_tokens = 0)
DRAFT_RELATIVE_PRIOR = 0.3  # a draft forward / a plain target step, until measured
ACCEPTANCE_BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)  # upper bounds of the acceptance histogram


@dataclass(slots=True, frozen=True)
class SpeculativeConfig:
    method: str = "none"  # "none", "draft" (a second model) or "ngram" (prompt lookup)
    num_tokens: int = 0  # drafts a step; 0: chosen each step from the measured cost

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method must be one of {METHODS}, not {self.method!r}")
        if self.num_tokens < 0:
            raise ValueError("speculative tokens must be at least 0")


@dataclass(slots=True)
class SpeculationStats:
    """Cumulative: draft work, which no bill counts (only emitted tokens are billed)."""

    drafted: int = 0  # draft tokens verified
    accepted: int = 0  # of them, emitted
    verify_steps: int = 0  # steps that verified drafts
    verify_s: float = 0.0  # their model time (the target's verify step)
    draft_s: float = 0.0  # time drafting
    # per verified chunk, accepted / drafted, counted by the first bucket bound it does not exceed
    acceptance: list[int] = field(default_factory=lambda: [0] * len(ACCEPTANCE_BUCKETS))


@dataclass(slots=True, frozen=True)
class Verified:
    tokens: dict[str, tuple[int, ...]]  # sequence id -> tokens emitted
    logprobs: dict[str, tuple[TokenLogprob, ...]]  # of those that asked
    failed: dict[str, str]  # sequence id -> why it could not go on (an exception type name)
    plain_rows: list[int]  # the logits rows of the step's other sampled chunks, in order


class Speculator:
    def __init__(self, config: SpeculativeConfig, kv: KVCacheManager, draft: DraftModel | None) -> None:
        if (config.method == "draft") != (draft is not None):
            raise ValueError("the draft method needs a draft model, and only it")
        self.config = config
        self.kv = kv
        self.draft = draft
        self.cost = SpeculationCost(DRAFT_RELATIVE_PRIOR if draft is not None else 0.0)
        self.stats = SpeculationStats()
        self._drafts: dict[str, Drafted] = {}
        self._planned: list[ScheduledChunk] = []  # this step's decodes given slots for drafts

    def expand(self, step: SchedulerOutput) -> SchedulerOutput:
        """The step with drafts on the decodes that speculate (the same step when none does)."""
        self._drafts = {}
        decodes = [
            c for c in step.chunks if c.sample and c.start == len(c.seq.token_ids) - 1 and c.num_tokens == 1
        ]
        auto = self.config.num_tokens == 0
        if auto and (len(decodes) < len(step.chunks) or len(decodes) > BATCH_LIMIT):
            return step  # compute-bound: a prefill in the step, or many decodes
        plan = [(c, k) for c in decodes if (k := self._tokens(c, auto)) > 0]
        self._planned = [c for c, _ in plan]
        if not plan:
            return step
        started = time.perf_counter()
        if self.draft is not None:
            seqs = [c.seq for c, _ in plan]
            proposed = self.draft.propose(seqs, [k for _, k in plan], self.kv.block_table)
            self.cost.observe_draft(max(k for _, k in plan), time.perf_counter() - started)
        else:
            proposed = [Drafted(ngram.propose(c.seq.token_ids, k), None) for c, k in plan]
        for (c, _), d in zip(plan, proposed, strict=True):
            d = _valid_for_grammar(c, d)
            if d.tokens:
                self._drafts[c.seq.id] = d
        self.stats.draft_s += time.perf_counter() - started
        return dataclasses.replace(step, chunks=tuple(self._with_draft(c) for c in step.chunks))

    def _tokens(self, c: ScheduledChunk, auto: bool) -> int:
        """Drafts for this decode: within its output limit and the slots it can have."""
        seq = c.seq
        limit = seq.request.max_output_tokens - seq.num_output_tokens - 1
        params = seq.request.sampling
        if auto and not params.greedy and params.seed is not None:
            return 0  # a seeded draw repeats only where speculation does: fixed k, or none
        k = min(limit, self.config.num_tokens or self.cost.choose(state(seq).acceptance, MAX_AUTO_TOKENS))
        if k <= 0:
            return 0
        if not self.kv.allocate_slots(seq.id, c.start + 1 + k):  # never preempts: what is free
            k = min(k, len(self.kv.block_table(seq.id)) * self.kv.block_size - c.start - 1)
        return max(k, 0)

    def _with_draft(self, c: ScheduledChunk) -> ScheduledChunk:
        d = self._drafts.get(c.seq.id)
        if d is None:
            return c
        return dataclasses.replace(c, num_tokens=1 + len(d.tokens), draft=d.tokens, verify=True)

    def verify(self, step: SchedulerOutput, logits: torch.Tensor, model_s: float) -> Verified:
        """logits: the step's rows (runner.execute) -> the verified chunks' tokens; model_s: the
        step's model time."""
        out = Verified({}, {}, {}, [])
        row = 0
        verified = False
        for c in step.chunks:
            n = c.num_logits
            if n and not c.verify:
                out.plain_rows.append(row)
            elif n:
                verified = True
                self._verify_chunk(c, logits[row : row + n], out)
            row += n
        if verified:
            longest = max(len(c.draft) for c in step.chunks) + 1
            self.cost.observe_verify(longest, model_s)
            self.stats.verify_steps += 1
            self.stats.verify_s += model_s
        elif step.chunks and all(c.num_tokens == 1 for c in step.chunks):
            self.cost.observe_plain(model_s)
        return out

    def _verify_chunk(self, c: ScheduledChunk, rows: torch.Tensor, out: Verified) -> None:
        seq, d = c.seq, self._drafts[c.seq.id]
        raw = rows.clone() if seq.request.logprobs else rows
        try:
            if seq.matcher is not None:
                grammar_rows(seq.matcher, d.tokens, rows)
            verdict: Verdict = verify(rows, d.tokens, seq.request.sampling, seq.generator, d.probs)
            if seq.matcher is not None and not seq.matcher.consume_tokens(list(verdict.tokens)):
                raise AssertionError("the matcher refused tokens drawn under its own masks")
        except Exception as e:  # only this sequence's values were involved: it alone fails
            out.failed[seq.id] = type(e).__name__
            return
        out.tokens[seq.id] = verdict.tokens
        if seq.request.logprobs:
            out.logprobs[seq.id] = logprobs_of(raw, verdict.tokens, seq.request.top_logprobs)
        state(seq).record(len(d.tokens), verdict.accepted)
        self.stats.drafted += len(d.tokens)
        self.stats.accepted += verdict.accepted
        rate = verdict.accepted / len(d.tokens)
        self.stats.acceptance[next(i for i, b in enumerate(ACCEPTANCE_BUCKETS) if rate <= b)] += 1
        if self.draft is not None:
            self.draft.accepted(seq, c.start + 1 + verdict.accepted)

    def reclaim(self) -> None:
        """After the scheduler's update: frees the slots past the tokens of each sequence that was
        given slots for drafts (those of rejected drafts, or of drafts never proposed)."""
        for c in self._planned:
            if c.seq.status is SeqStatus.RUNNING:
                self.kv.trim(c.seq.id, len(c.seq.token_ids))
        self._planned = []


def _valid_for_grammar(c: ScheduledChunk, d: Drafted) -> Drafted:
    """The draft cut at its first token the sequence's grammar refuses (unconstrained: as is)."""
    matcher = c.seq.matcher
    if matcher is None or not d.tokens:
        return d
    n = int(matcher.validate_tokens(list(d.tokens)))
    return Drafted(d.tokens[:n], None if d.probs is None else d.probs[:n])
