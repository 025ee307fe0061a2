"""What one engine step runs: the boundary type between the scheduler (engine/scheduler.py), which
makes it, and the model runner (engine/runner.py), which executes it. No torch."""

from __future__ import annotations

from dataclasses import dataclass

from engine.sequence import Sequence


@dataclass(slots=True, frozen=True)
class ScheduledChunk:
    seq: Sequence
    start: int  # first token position computed in this step (== num_computed_tokens)
    num_tokens: int  # tokens computed in this step: 1 for a decode, up to the budget for prefill
    sample: bool  # the chunk reaches the last known token: sample the next one
    # speculative decoding (engine/speculative/speculation.py): tokens proposed after the
    # sequence's known ones;
    # the chunk computes positions start .. start + num_tokens - 1 of token_ids + draft
    draft: tuple[int, ...] = ()
    verify: bool = False  # logits of the last len(draft) + 1 rows (each draft token checked), not one

    def tokens(self) -> list[int]:
        """The ids this chunk computes: of the known tokens, then of the draft."""
        known = self.seq.token_ids
        ids = known[self.start : self.start + self.num_tokens]
        if len(ids) < self.num_tokens:
            skip = max(0, self.start - len(known))
            ids = ids + list(self.draft[skip : skip + self.num_tokens - len(ids)])
        return ids

    @property
    def num_logits(self) -> int:
        """Rows of logits this chunk asks for."""
        return (len(self.draft) + 1 if self.verify else 1) if self.sample else 0


@dataclass(slots=True, frozen=True)
class SchedulerOutput:
    chunks: tuple[ScheduledChunk, ...]  # batch order: decodes first, then prefill chunks
    preempted: tuple[str, ...]  # sequence ids preempted this step (to recompute later)

    @property
    def num_batched_tokens(self) -> int:
        return sum(c.num_tokens for c in self.chunks)
