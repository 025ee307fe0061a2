"""Quality measures for a model version against a reference: greedy agreement and perplexity.

Used by the quantized versions' quality gate (tests/engine/test_quantized.py) and its benchmark
report (`python -m bench quality`). Pure functions over a loaded model; no clock, no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence as Seq

import torch
import torch.nn.functional as F

from engine.config import LlamaConfig
from engine.engine import Engine, EngineConfig, EngineRequest
from engine.model import LlamaForCausalLM, apply_rotary


def greedy_continuations(
    model: LlamaForCausalLM,
    prompts: Seq[Seq[int]],
    num_tokens: int,
    dtype: torch.dtype,
    kv_dtype: torch.dtype | None = None,
) -> list[list[int]]:
    """Exactly `num_tokens` greedy tokens after each prompt (end of sequence ignored), batched."""
    config = EngineConfig(dtype=dtype, kv_dtype=kv_dtype, max_num_batched_tokens=256)
    blocks = sum(-(-(len(p) + num_tokens) // config.block_size) for p in prompts)
    engine = Engine(model, dataclasses.replace(config, num_blocks=blocks))
    for i, ids in enumerate(prompts):
        engine.add_request(EngineRequest(f"p{i}", tuple(ids), num_tokens))
    out: dict[str, list[int]] = {f"p{i}": [] for i in range(len(prompts))}
    while engine.has_unfinished():
        for step in engine.step():
            out[step.request_id].extend(step.new_token_ids)
    return [out[f"p{i}"] for i in range(len(prompts))]


def agreement(reference: Seq[Seq[int]], candidate: Seq[Seq[int]]) -> float:
    """The fraction of prompts whose continuations are identical."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError("agreement needs two equally long, non-empty lists of continuations")
    return sum(list(r) == list(c) for r, c in zip(reference, candidate, strict=True)) / len(reference)


class _CausalWindow:
    """A KV 'cache' for one fresh window: every token attends to the window's earlier tokens."""

    def __init__(self, cfg: LlamaConfig) -> None:
        self.cfg = cfg

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # [T, H, D] -> [1, H, T, D]
        qh, kh, vh = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
        return out[0].transpose(0, 1)

    def attend_qkv(
        self, layer: int, qkv: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor
    ) -> torch.Tensor:
        t, hq, hkv, d = qkv.shape[0], self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim
        heads = qkv.view(t, hq + 2 * hkv, d)
        q, k, v = heads[:, :hq], heads[:, hq : hq + hkv], heads[:, hq + hkv :]
        return self.attend(layer, apply_rotary(q, cos, signed_sin), apply_rotary(k, cos, signed_sin), v)

    def stack_inputs(self, tokens: int) -> None:
        return None  # not the paged cache: the layers run one by one


@torch.inference_mode()
def perplexity(model: LlamaForCausalLM, ids: Seq[int], window: int = 512) -> float:
    """exp(mean negative log-likelihood) of `ids`, scored in non-overlapping windows of `window`
    tokens (each window's first token is context only)."""
    nll, count = 0.0, 0
    for start in range(0, len(ids) - 1, window):
        chunk = torch.tensor(ids[start : start + window])
        if chunk.numel() < 2:
            break
        hidden = model(chunk, torch.arange(chunk.numel()), _CausalWindow(model.config))
        logits = model.compute_logits(hidden[:-1])  # [n-1, vocab] fp32
        nll += float(F.cross_entropy(logits, chunk[1:], reduction="sum"))
        count += chunk.numel() - 1
    return math.exp(nll / count)
