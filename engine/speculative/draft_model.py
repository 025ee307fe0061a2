"""Drafts from a second, cheaper model of the same tokenizer (the entry's int4 version, or another
served version): k tokens decoded ahead on the draft, batched over the sequences that speculate.

The draft keeps its own paged KV cache with as many blocks as the target's and reads and writes it
through the target's block tables: a draft's keys and values live in the same block ids as the
target's for the same positions, so drafts take no block from the pool beyond what verification
allocates (their tokens' slots), and freeing a sequence's blocks frees its draft KV too. Each
sequence tracks how far its draft KV is computed in this residency
(`SeqSpeculation.draft_computed`); the
first draft of a residency computes the context, later ones only the tokens accepted since.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from engine.kv_cache import PagedKVCache
from engine.model import LlamaForCausalLM
from engine.runner import ModelRunner
from engine.sampler import SamplingError, distribution
from engine.scheduler_output import ScheduledChunk, SchedulerOutput
from engine.sequence import Sequence as EngineSeq
from engine.speculative.speculation_cost import SeqSpeculation


@dataclass(slots=True, frozen=True)
class Drafted:
    tokens: tuple[int, ...]  # the proposals, in order
    probs: (
        torch.Tensor | None
    )  # [len(tokens), vocab] the draft's distribution of each (sampling); None: greedy


class DraftModel:
    def __init__(
        self, model: LlamaForCausalLM, num_blocks: int, block_size: int, kv_dtype: torch.dtype
    ) -> None:
        self.model = model
        self.runner = ModelRunner(model, PagedKVCache(model.config, num_blocks, block_size, kv_dtype))

    def propose(
        self, seqs: Sequence[EngineSeq], ks: Sequence[int], block_table: Callable[[str], list[int]]
    ) -> list[Drafted]:
        """ks[i] tokens after seqs[i]'s known ones (their slots allocated: positions up to
        len(token_ids) + k - 2 are written). Greedy sequences take the draft's argmax; sampled
        ones draw from the draft's distribution under their own sampling settings."""
        drafts: list[list[int]] = [[] for _ in seqs]
        probs: list[list[torch.Tensor]] = [[] for _ in seqs]
        live = list(range(len(seqs)))
        for step in range(max(ks, default=0)):
            live = [i for i in live if ks[i] > step]
            if not live:
                break
            chunks = [self._chunk(seqs[i], tuple(drafts[i])) for i in live]
            logits = self.runner.execute(SchedulerOutput(tuple(chunks), ()), block_table)  # [B, vocab]
            for row, i in enumerate(live):
                seq = seqs[i]
                state(seq).draft_computed = chunks[row].start + chunks[row].num_tokens
                token, p = self._pick(seq, logits[row])
                drafts[i].append(token)
                if p is not None:
                    probs[i].append(p)
        return [Drafted(tuple(d), torch.stack(p) if p else None) for d, p in zip(drafts, probs, strict=True)]

    @staticmethod
    def accepted(seq: EngineSeq, valid: int) -> None:
        """Only the first `valid` positions of the sequence's draft KV stand (the rest held drafts
        the target rejected)."""
        s = state(seq)
        s.draft_computed = min(s.draft_computed, valid)

    def _chunk(self, seq: EngineSeq, drafted: tuple[int, ...]) -> ScheduledChunk:
        end = len(seq.token_ids) + len(drafted)  # the tokens known so far, drafts included
        start = min(state(seq).draft_computed, end - 1)
        return ScheduledChunk(seq, start, end - start, sample=True, draft=drafted)

    @staticmethod
    def _pick(seq: EngineSeq, row: torch.Tensor) -> tuple[int, torch.Tensor | None]:
        params = seq.request.sampling
        if params.greedy or seq.generator is None:
            return int(torch.argmax(row)), None
        try:
            p = distribution(row, params)
        except SamplingError:  # a certain draft then: one-hot on the draft's best token
            p = torch.zeros_like(row)
            p[int(torch.argmax(row))] = 1.0
        return int(torch.multinomial(p, 1, generator=seq.generator)), p


def state(seq: EngineSeq) -> SeqSpeculation:
    """The sequence's speculation state, new for each residency (a preempted sequence's KV, its
    draft's too, is recomputed)."""
    current = seq.speculation
    if not isinstance(current, SeqSpeculation):
        current = seq.speculation = SeqSpeculation(seq.num_preemptions)
    elif current.residency != seq.num_preemptions:
        current.residency, current.draft_computed = seq.num_preemptions, 0
    return current
