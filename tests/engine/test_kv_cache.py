"""The paged KV cache's two attention paths: with the engine's kernels every token of a step (decodes
and prefill chunks alike) is one row of `llm::paged_decode_attention`, its context cut causally by
its own length; without them, SDPA per prefill chunk. Both must give the same attention."""

from __future__ import annotations

import torch

from engine.config import LlamaConfig
from engine.kv_cache import PagedKVCache, PrefillSpan, StepLayout, _token_rows

HQ, HKV, D, BS = 6, 2, 64, 4


def small_cache() -> PagedKVCache:
    cfg = LlamaConfig(
        vocab_size=32, hidden_size=HQ * D, intermediate_size=8, num_layers=1, num_heads=HQ,
        num_kv_heads=HKV, head_dim=D, rms_norm_eps=1e-5, rope_theta=1e4, max_position_embeddings=64,
        tie_word_embeddings=True, eos_token_ids=(0,),
    )  # fmt: skip
    cache = PagedKVCache(cfg, num_blocks=12, block_size=BS, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    cache.k.copy_(torch.randn(cache.k.shape, generator=gen))
    cache.v.copy_(torch.randn(cache.v.shape, generator=gen))
    return cache


def mixed_step() -> StepLayout:
    """Token 0: a decode at context 6 (blocks 3, 5); tokens 1-5: a new 5-token prompt (blocks 0, 1);
    tokens 6-8: a 3-token chunk after a 7-token cached prefix, context 10 (blocks 7, 8, 2)."""
    return StepLayout(
        slot_mapping=torch.arange(9, dtype=torch.int64),  # not read by attention itself
        decode_token_index=torch.tensor([0]),
        decode_tables=torch.tensor([[3, 5]]),
        decode_lens=torch.tensor([6]),
        prefills=(
            PrefillSpan(1, 5, 5, torch.tensor([0, 1])),
            PrefillSpan(6, 3, 10, torch.tensor([7, 8, 2])),
        ),
    )


def test_each_token_of_a_step_is_a_row_with_its_causal_context() -> None:
    tables, lens = _token_rows(mixed_step(), 9)
    assert lens.tolist() == [6, 1, 2, 3, 4, 5, 8, 9, 10]
    assert tables.tolist() == [[3, 5, 0]] + [[0, 1, 0]] * 5 + [[7, 8, 2]] * 3


def test_a_decode_only_step_passes_its_tables_as_they_are() -> None:
    layout = StepLayout(
        slot_mapping=torch.tensor([0, 1]),
        decode_token_index=torch.tensor([0, 1]),
        decode_tables=torch.tensor([[3, 5], [1, 0]]),
        decode_lens=torch.tensor([6, 2]),
        prefills=(),
    )
    tables, lens = _token_rows(layout, 2)
    assert tables is layout.decode_tables and lens is layout.decode_lens


def test_the_kernel_rows_attend_as_sdpa_does_over_decodes_new_prompts_and_chunks_after_a_prefix() -> None:
    cache, layout = small_cache(), mixed_step()
    q = torch.randn(9, HQ, D, generator=torch.Generator().manual_seed(1))
    eager = PagedKVCache._attend(q, cache.k[0], cache.v[0], layout, None)
    tables, lens = _token_rows(layout, 9)
    kernel = torch.ops.llm.paged_decode_attention(q, cache.k[0], cache.v[0], tables, lens)
    torch.testing.assert_close(kernel, eager, rtol=1e-5, atol=1e-5)
