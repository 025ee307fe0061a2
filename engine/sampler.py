"""Token sampling: greedy, temperature, top-k, top-p, with a per-sequence seeded generator.

Each sequence draws from its own `torch.Generator`, so the same seed and input give the same
output whatever else shares the batch.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch


@dataclass(slots=True, frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 is greedy
    top_k: int | None = None  # keep the k most likely tokens; None is off
    top_p: float = 1.0  # nucleus mass in (0, 1]; 1 is off
    seed: int | None = None  # None draws a fresh random seed

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


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
    if params.top_k is not None and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        # drop a token once the mass before it already reaches top_p; the best token always stays
        drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))
