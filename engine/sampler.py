"""Token sampling: greedy, temperature, top-k, top-p, with a per-sequence seeded generator.

Each sequence draws from its own `torch.Generator`, so the same seed and input give the same
output whatever else shares the batch.
"""

from __future__ import annotations

import secrets

import torch

from contracts.sampling import TOP_K_OFF, TOP_P_OFF
from engine.sequence import SamplingParams


def make_generator(params: SamplingParams) -> torch.Generator | None:
    if params.greedy:
        return None
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    gen = torch.Generator()
    gen.manual_seed(seed & 0xFFFF_FFFF_FFFF_FFFF)
    return gen


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """logits: [vocab] fp32 -> the next token id."""
    if params.greedy or generator is None:
        return int(torch.argmax(logits))
    scaled = logits / params.temperature
    if params.top_k != TOP_K_OFF and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < TOP_P_OFF:
        sorted_logits, order = torch.sort(scaled, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        # drop a token once the mass before it already reaches top_p; the best token always stays
        drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))
