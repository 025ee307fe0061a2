"""Runs one scheduled step through the model: flat token batch in, logits of sampled rows out."""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.kv_cache import PagedKVCache, PrefillSpan, StepLayout
from engine.model import LlamaForCausalLM
from engine.scheduler_output import SchedulerOutput


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, cache: PagedKVCache) -> None:
        self.model = model
        self.cache = cache

    @torch.inference_mode()
    def execute(self, step: SchedulerOutput, block_table: Callable[[str], list[int]]) -> torch.Tensor:
        """Logits [S, vocab] (fp32) for the chunks with `sample`, in chunk order: one row each, or
        `num_logits` rows (a verified draft: ScheduledChunk.verify), in token order."""
        bs = self.cache.block_size
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        decode_index: list[int] = []
        decode_tables: list[list[int]] = []
        decode_lens: list[int] = []
        prefills: list[PrefillSpan] = []
        sample_rows: list[int] = []
        for chunk in step.chunks:
            seq, start, n = chunk.seq, chunk.start, chunk.num_tokens
            table = block_table(seq.id)
            token_start = len(ids)
            ids.extend(chunk.tokens())
            positions.extend(range(start, start + n))
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, start + n))
            ctx = start + n
            used_blocks = table[: -(-ctx // bs)]
            if n == 1:
                decode_index.append(token_start)
                decode_tables.append(used_blocks)
                decode_lens.append(ctx)
            else:
                prefills.append(
                    PrefillSpan(token_start, n, ctx, torch.tensor(used_blocks, dtype=torch.int64))
                )
            sample_rows.extend(range(token_start + n - chunk.num_logits, token_start + n))
        width = max((len(t) for t in decode_tables), default=0)
        layout = StepLayout(
            slot_mapping=torch.tensor(slots, dtype=torch.int64),
            decode_token_index=torch.tensor(decode_index, dtype=torch.int64),
            decode_tables=torch.tensor([t + [0] * (width - len(t)) for t in decode_tables], dtype=torch.int64)
            if decode_tables
            else torch.zeros((0, 0), dtype=torch.int64),
            decode_lens=torch.tensor(decode_lens, dtype=torch.int64),
            prefills=tuple(prefills),
        )
        self.cache.begin_step(layout)
        # the rows the last layer runs (every row's key and value are stored): all of a decode-only step
        keep = None if len(sample_rows) == len(ids) else torch.tensor(sample_rows, dtype=torch.int64)
        hidden = self.model(torch.tensor(ids), torch.tensor(positions), self.cache, keep)
        if not sample_rows:
            return torch.empty((0, self.model.config.vocab_size))
        return self.model.compute_logits(hidden)
