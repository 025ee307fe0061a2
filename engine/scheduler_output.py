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


@dataclass(slots=True, frozen=True)
class SchedulerOutput:
    chunks: tuple[ScheduledChunk, ...]  # batch order: decodes first, then prefill chunks
    preempted: tuple[str, ...]  # sequence ids preempted this step (to recompute later)

    @property
    def num_batched_tokens(self) -> int:
        return sum(c.num_tokens for c in self.chunks)
