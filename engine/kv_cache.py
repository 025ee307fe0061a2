"""Paged KV storage and the attention that reads through block tables.

    k, v: [layers, num_blocks, block_size, Hkv, D]      token at position p of a sequence lives in
                                                          block table[p // block_size], slot p % block_size

Each step the runner calls `begin_step(StepLayout)`; then every layer's `attend()` scatters this
step's keys/values into their slots and computes attention: all single-token decodes in one batched
call (keys gathered block-wise, padding masked), each prefill chunk in its own causal call. With the
engine's kernels loaded (engine/kernels.py), `attend_qkv()` does the same from the layer's fused
q|k|v projection: one kernel rotates q and k and writes k and v into their slots, and decodes read
their context through the block tables in place; `stack_inputs()` hands the same to the kernel
that runs every layer of a step in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.config import LlamaConfig, native_bf16


@dataclass(slots=True, frozen=True)
class PrefillSpan:
    token_start: int  # index of the chunk's first token in the step's flat token dimension
    num_tokens: int  # chunk length
    context_len: int  # tokens the chunk attends over (cached prefix + chunk)
    blocks: torch.Tensor  # [ceil(context_len / block_size)] block ids, int64


@dataclass(slots=True, frozen=True)
class StepLayout:
    slot_mapping: torch.Tensor  # [T] flat cache slot of every token of the step, int64
    decode_token_index: torch.Tensor  # [Bd] positions of decode tokens in the flat dimension
    decode_tables: torch.Tensor  # [Bd, max_blocks] padded block tables of decode sequences
    decode_lens: torch.Tensor  # [Bd] context length of each decode (its keys, this token's included)
    prefills: tuple[PrefillSpan, ...]


@dataclass(slots=True, frozen=True)
class StackInputs:
    k_caches: list[torch.Tensor]  # per layer [num_blocks, block_size, Hkv, D]
    v_caches: list[torch.Tensor]
    slots: torch.Tensor  # [T] flat cache slot of every token, int64
    tables: torch.Tensor  # [T, W] each token's block table, int64
    lens: torch.Tensor  # [T] keys each token sees (its own included), int64


class PagedKVCache:
    def __init__(self, cfg: LlamaConfig, num_blocks: int, block_size: int, dtype: torch.dtype) -> None:
        shape = (cfg.num_layers, num_blocks, block_size, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype)
        self.v = torch.zeros(shape, dtype=dtype)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.num_heads, self.num_kv_heads = cfg.num_heads, cfg.num_kv_heads
        # Eager prefill attention (without the kernels) runs in the cache's dtype when it is bf16
        # and the CPU computes bf16 natively (its keys and values are read as stored; SDPA in bf16
        # took half the time of fp32 on 128-token chunks, Sapphire Rapids); otherwise in q's dtype.
        self.prefill_dtype: torch.dtype | None = (
            torch.bfloat16 if dtype == torch.bfloat16 and native_bf16() else None
        )
        self._layout: StepLayout | None = None
        self._layers = (list(self.k.unbind(0)), list(self.v.unbind(0)))  # each layer's, as views

    @staticmethod
    def bytes_per_block(cfg: LlamaConfig, block_size: int, dtype: torch.dtype) -> int:
        elem = torch.empty((), dtype=dtype).element_size()
        return 2 * cfg.num_layers * block_size * cfg.num_kv_heads * cfg.head_dim * elem

    def begin_step(self, layout: StepLayout) -> None:
        self._layout = layout
        self._token_rows: tuple[torch.Tensor, torch.Tensor] | None = None

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        layout = self._layout
        assert layout is not None, "begin_step() first"
        k_cache, v_cache = self.k[layer], self.v[layer]  # [N, bs, Hkv, D]
        hkv, d = k.shape[1], k.shape[2]
        k_cache.view(-1, hkv, d).index_copy_(0, layout.slot_mapping, k.to(k_cache.dtype))
        v_cache.view(-1, hkv, d).index_copy_(0, layout.slot_mapping, v.to(v_cache.dtype))
        return self._attend(q, k_cache, v_cache, layout, self.prefill_dtype)

    def attend_qkv(
        self, layer: int, qkv: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor
    ) -> torch.Tensor:
        """qkv [T, (Hq + 2 Hkv) * D] fp32 (not yet rotated), cos/signed_sin [T, D] -> attention
        output [T, Hq, D]; this step's k and v are stored. Needs the engine's kernels."""
        layout = self._layout
        assert layout is not None, "begin_step() first"
        k_cache, v_cache = self.k[layer], self.v[layer]  # [N, bs, Hkv, D]
        q = torch.ops.llm.rope_store(
            qkv, cos, signed_sin, k_cache, v_cache, layout.slot_mapping, self.num_heads, self.num_kv_heads
        )
        if self._token_rows is None:  # once a step, for every layer
            self._token_rows = _token_rows(layout, q.shape[0])
        tables, lens = self._token_rows
        out: torch.Tensor = torch.ops.llm.paged_decode_attention(q, k_cache, v_cache, tables, lens)
        return out

    def stack_inputs(self, tokens: int) -> StackInputs:
        """What the kernels' `llm::decoder_stack` (engine/csrc/stack.cpp) reads and writes for this
        step's `tokens` tokens: every layer's caches, the tokens' slots, block tables and lengths."""
        layout = self._layout
        assert layout is not None, "begin_step() first"
        if self._token_rows is None:
            self._token_rows = _token_rows(layout, tokens)
        tables, lens = self._token_rows
        return StackInputs(self._layers[0], self._layers[1], layout.slot_mapping, tables, lens)

    @staticmethod
    def _attend(
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        layout: StepLayout,
        prefill_dtype: torch.dtype | None,
    ) -> torch.Tensor:
        """Attention of this step's queries q [T, Hq, D] over the stored keys and values; prefill
        chunks in `prefill_dtype` (None: q's)."""
        hkv, d = k_cache.shape[2], k_cache.shape[3]
        bd = layout.decode_token_index.shape[0]
        if bd and not layout.prefills:  # decodes only: the step's tokens are the decodes, in order
            return _decode(q, k_cache, v_cache, layout)
        out = torch.empty_like(q)  # [T, Hq, D]
        if bd:
            qd = q.index_select(0, layout.decode_token_index)
            out.index_copy_(0, layout.decode_token_index, _decode(qd, k_cache, v_cache, layout))
        dt = prefill_dtype or q.dtype
        for span in layout.prefills:
            s, n, ctx = span.token_start, span.num_tokens, span.context_len
            qp = q[s : s + n].transpose(0, 1).unsqueeze(0).to(dt)  # [1, Hq, n, D]
            keys = (  # [1, Hkv, ctx, D] in dt (read as stored when dt is the cache dtype)
                _gather(k_cache, span.blocks).view(-1, hkv, d)[:ctx].to(dt).transpose(0, 1)[None]
            )
            vals = _gather(v_cache, span.blocks).view(-1, hkv, d)[:ctx].to(dt).transpose(0, 1)[None]
            if ctx == n:
                op = F.scaled_dot_product_attention(qp, keys, vals, is_causal=True, enable_gqa=True)
            else:  # query i sits at position ctx - n + i and sees keys 0..ctx - n + i
                rows = torch.arange(ctx - n, ctx)[:, None]
                mask = rows >= torch.arange(ctx)[None, :]
                op = F.scaled_dot_product_attention(qp, keys, vals, attn_mask=mask, enable_gqa=True)
            out[s : s + n] = op[0].transpose(0, 1)
        return out


def _decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, layout: StepLayout
) -> torch.Tensor:
    """q [Bd, Hq, D] of single-token decodes -> attention output [Bd, Hq, D] (eager PyTorch)."""
    bd, hkv, d = q.shape[0], k_cache.shape[2], k_cache.shape[3]
    tables = layout.decode_tables.reshape(-1)
    keys = _gather(k_cache, tables).view(bd, -1, hkv, d).to(q.dtype)  # [Bd, L, Hkv, D]
    vals = _gather(v_cache, tables).view(bd, -1, hkv, d).to(q.dtype)
    mask: torch.Tensor | None = None
    if bd == 1:  # one sequence: cut its keys instead of masking the padding
        ctx = int(layout.decode_lens[0])
        keys, vals = keys[:, :ctx], vals[:, :ctx]
    else:  # [Bd, 1, 1, L]: True where a key is valid
        mask = (torch.arange(keys.shape[1])[None, :] < layout.decode_lens[:, None])[:, None, None, :]
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2), keys.transpose(1, 2), vals.transpose(1, 2), attn_mask=mask, enable_gqa=True
    )
    return out.squeeze(2)


def _token_rows(layout: StepLayout, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every token of the step as one row of the paged attention kernel: its sequence's block
    table [T, W] and the keys it sees [T] (a prefill chunk's token i at position ctx - n + i sees
    ctx - n + i + 1: the causal mask, with no mask tensor). Measured on 2-core AMD EPYC (int4, KV
    bf16): 4 x 128-token prefill, 84 ms in SDPA on its one torch thread -> 34 ms here on the pool;
    one 1,536-token prompt, 1,456 -> 747 ms."""
    if not layout.prefills:  # decodes only: the step's tokens are the decodes, in order
        return layout.decode_tables, layout.decode_lens
    width = max(int(s.blocks.shape[0]) for s in layout.prefills)
    width = max(width, layout.decode_tables.shape[1])
    tables = torch.zeros((tokens, width), dtype=torch.int64)
    lens = torch.empty(tokens, dtype=torch.int64)
    if layout.decode_token_index.shape[0]:
        tables[layout.decode_token_index, : layout.decode_tables.shape[1]] = layout.decode_tables
        lens[layout.decode_token_index] = layout.decode_lens
    for span in layout.prefills:
        s, n, ctx = span.token_start, span.num_tokens, span.context_len
        tables[s : s + n, : span.blocks.shape[0]] = span.blocks
        lens[s : s + n] = torch.arange(ctx - n + 1, ctx + 1)
    return tables, lens


def _gather(cache: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """cache [N, bs, Hkv, D], blocks [n] -> [n, bs * Hkv * D]: one contiguous row copy per block."""
    return cache.view(cache.shape[0], -1).index_select(0, blocks)
