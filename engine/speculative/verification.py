"""Verification of drafted tokens: the target's logits over a sequence's last token and its k draft
tokens (one step, `ScheduledChunk.verify`) decide which drafts stand. The rule keeps every output
exactly what the target alone would produce:

    row i (i = 0..k) is the target's next-token distribution p_i after the last token and drafts
    d_1..d_i.  Greedy: emit d_1..d_m while d_{i+1} == argmax p_i, then argmax p_m (the target's own
    next token): token for token the target's greedy output.  Sampling (Leviathan et al. 2023,
    Chen et al. 2023): accept d_{i+1} with probability min(1, p_i(d) / q_i(d)), q_i the draft's
    distribution (one-hot for a deterministic draft such as prompt lookup); on the first rejection
    draw from the residual norm(max(p_i - q_i, 0)) and stop; all accepted: draw from p_k. Each
    emitted token is then distributed as p given the tokens before it.

A constrained sequence's rows are masked by its grammar in the state after d_1..d_i (the matcher
consumes the drafts, then rolls them back), so drafts and verification obey the grammar alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.constraints import Masks
from engine.sampler import SamplingError, distribution
from engine.sequence import SamplingParams, TokenLogprob


@dataclass(slots=True, frozen=True)
class Verdict:
    tokens: tuple[int, ...]  # emitted: the accepted drafts, then the target's own token
    accepted: int  # drafts accepted (len(tokens) - 1)


def grammar_rows(matcher: Any, draft: Sequence[int], logits: torch.Tensor) -> None:
    """logits [k + 1, vocab]: row i masked, in place, to what the grammar allows after draft[:i].
    The drafts must be valid for the matcher (validate_tokens); it is left as it was."""
    for i in range(len(draft) + 1):
        bits = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8)
        allowed = torch.from_numpy(np.unpackbits(bits, bitorder="little").astype(np.bool_))
        Masks.apply(logits, [i], allowed[None, :])
        if i < len(draft) and not matcher.consume_token(draft[i]):
            raise AssertionError("a draft token the matcher had validated was refused")
    if draft:
        matcher.rollback(len(draft))


def verify(
    logits: torch.Tensor,
    draft: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None,
    draft_probs: torch.Tensor | None = None,
) -> Verdict:
    """logits: [k + 1, vocab] fp32, the target's rows for the last token and each draft token;
    draft_probs: [k, vocab], the draft's distribution of each drafted token (None: each draft was
    certain, as prompt lookup's are). SamplingError when a row cannot be sampled."""
    k = len(draft)
    bad = torch.isnan(logits) | torch.isposinf(logits)
    if bool(bad.any()) or not bool(torch.isfinite(logits).any(dim=-1).all()):
        raise SamplingError("logits are not finite")
    if params.greedy or generator is None:
        best = torch.argmax(logits, dim=-1).tolist()  # [k + 1]
        m = 0
        while m < k and draft[m] == best[m]:
            m += 1
        return Verdict((*draft[:m], best[m]), m)
    for i in range(k):
        p = distribution(logits[i], params)  # [vocab]
        d = draft[i]
        q_d = 1.0 if draft_probs is None else float(draft_probs[i, d])
        u = float(torch.rand((), generator=generator))
        if q_d > 0.0 and u * q_d < float(p[d]):  # u < p(d) / q(d)
            continue
        if draft_probs is None:
            residual = p.clone()
            residual[d] = 0.0
        else:
            residual = torch.clamp(p - draft_probs[i], min=0.0)
        total = float(residual.sum())
        if not total > 0.0:  # p == q up to rounding: the rejection had no mass left to move
            residual, total = p, 1.0
        token = int(torch.multinomial(residual / total, 1, generator=generator))
        return Verdict((*draft[:i], token), i)
    token = int(torch.multinomial(distribution(logits[k], params), 1, generator=generator))
    return Verdict((*draft, token), k)


def logprobs_of(raw: torch.Tensor, tokens: Sequence[int], top: int) -> tuple[TokenLogprob, ...]:
    """raw: the target's unmasked logits rows [>= len(tokens), vocab] -> each emitted token's."""
    from engine.sampler import token_logprob

    rows = torch.log_softmax(raw[: len(tokens)].float(), dim=-1)
    return tuple(token_logprob(rows[i], t, top) for i, t in enumerate(tokens))
