"""Token sampling: greedy, temperature, top-k, top-p, with a per-sequence seeded generator.

Each sequence draws from its own `torch.Generator`, so the same seed and input give the same
output whatever else shares the batch. A row whose values cannot be sampled (NaN or +inf logits,
no finite logit, no probability mass) fails only its own sequence: `sample_batch` reports it in
`Sampled.failed` and draws every other row as usual.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import torch

from contracts.sampling import TOP_K_OFF, TOP_P_OFF
from engine import kernels
from engine.sequence import SamplingParams, Sequence


class SamplingError(Exception):
    """This row's next token cannot be drawn: the values are not a distribution."""


@dataclass(slots=True, frozen=True)
class Sampled:
    tokens: dict[str, int]  # sequence id -> its next token
    failed: dict[str, str]  # sequence id -> why no token could be drawn (an exception type name)


def make_generator(params: SamplingParams) -> torch.Generator | None:
    if params.greedy:
        return None
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    gen = torch.Generator()
    gen.manual_seed(seed & 0xFFFF_FFFF_FFFF_FFFF)
    return gen


def sample_batch(seqs: Seq[Sequence], logits: torch.Tensor) -> Sampled:
    """logits: [S, vocab] fp32, row i for seqs[i] -> each sequence's next token, or why it has none."""
    tokens: dict[str, int] = {}
    failed: dict[str, str] = {}
    if not seqs:
        return Sampled(tokens, failed)
    if kernels.loaded():  # one pass over each row (engine/csrc/sampling.cpp)
        best, ok = torch.ops.llm.argmax_usable(logits.float().contiguous())
        greedy, usable = best.tolist(), ok.tolist()  # [S], [S]
    else:
        usable = _usable_rows(logits).tolist()
        greedy = torch.argmax(logits, dim=-1).tolist()
    for i, seq in enumerate(seqs):
        params = seq.request.sampling
        try:
            if not usable[i]:
                raise SamplingError("logits are not finite")
            tokens[seq.id] = greedy[i] if params.greedy else sample(logits[i], params, seq.generator)
        except Exception as e:  # only this row's values and generator were involved: it alone fails
            failed[seq.id] = type(e).__name__
    return Sampled(tokens, failed)


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """logits: [vocab] fp32 -> the next token id; SamplingError when the row cannot be sampled.
    -inf marks a token that can never be drawn; NaN or +inf anywhere makes the row unusable."""
    if not bool(_usable_rows(logits[None, :])[0]):
        raise SamplingError("logits are not finite")
    if params.greedy or generator is None:
        return int(torch.argmax(logits))
    # Shifted so that the best logit is exactly 0: dividing by any temperature leaves it 0 and every
    # other logit <= 0 (at worst -inf), so softmax never sees +inf or inf - inf.
    scaled = (logits - logits.max()) / params.temperature
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
    if not bool(torch.isfinite(probs).all()) or not float(probs.sum()) > 0.0:
        raise SamplingError("no probability mass to draw from")
    return int(torch.multinomial(probs, 1, generator=generator))


def _usable_rows(logits: torch.Tensor) -> torch.Tensor:
    """[S, vocab] -> [S] bool: no NaN, no +inf, and at least one finite logit."""
    bad = torch.isnan(logits) | torch.isposinf(logits)
    return ~bad.any(dim=-1) & torch.isfinite(logits).any(dim=-1)
