"""Token sampling: greedy, temperature, top-k, top-p, with a per-sequence seeded generator.

Each sequence draws from its own `torch.Generator`, so the same seed and input give the same
output whatever else shares the batch. A row whose values cannot be sampled (NaN or +inf logits,
no finite logit, no probability mass) fails only its own sequence: `sample_batch` reports it in
`Sampled.failed` and draws every other row as usual.

`sample_step` is a step's whole sampling: the log-probabilities its rows asked for (taken from the
model's logits, before any mask), the structured-output masks applied to the constrained rows
(engine/constraints.py), the draw, and each constrained row's matcher told its token.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence as Seq
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from contracts.sampling import TOP_K_OFF, TOP_P_OFF
from engine import kernels
from engine.constraints import Masks
from engine.sequence import SamplingParams, Sequence, TokenLogprob


class SamplingError(Exception):
    """This row's next token cannot be drawn: the values are not a distribution."""


@dataclass(slots=True, frozen=True)
class Sampled:
    tokens: dict[str, int]  # sequence id -> its next token
    failed: dict[str, str]  # sequence id -> why no token could be drawn (an exception type name)
    logprobs: dict[str, TokenLogprob] = field(default_factory=dict)  # of the rows that asked


class GrammarRefused(Exception):
    """A constrained row's matcher refused the token drawn under its own mask (a grammar engine fault)."""


def sample_step(seqs: Seq[Sequence], logits: torch.Tensor, masks: Future[torch.Tensor] | None) -> Sampled:
    """logits: [S, vocab] fp32, row i for seqs[i]; masks: the constrained rows' allowed tokens, in
    row order (Masks.start), or None when no row is constrained."""
    asked = [i for i, seq in enumerate(seqs) if seq.request.logprobs]
    model_logprobs = torch.log_softmax(logits[asked].float(), dim=-1) if asked else None  # [A, vocab]
    if masks is not None:
        Masks.apply(logits, [i for i, seq in enumerate(seqs) if seq.matcher is not None], masks.result())
    sampled = sample_batch(seqs, logits)
    for seq in seqs:
        token = sampled.tokens.get(seq.id)
        if seq.matcher is not None and token is not None and not seq.matcher.consume_token(token):
            del sampled.tokens[seq.id]
            sampled.failed[seq.id] = GrammarRefused.__name__
    for row, i in enumerate(asked):
        seq = seqs[i]
        token = sampled.tokens.get(seq.id)
        if token is not None and model_logprobs is not None:
            sampled.logprobs[seq.id] = token_logprob(model_logprobs[row], token, seq.request.top_logprobs)
    return sampled


def token_logprob(logprobs: torch.Tensor, token: int, top: int) -> TokenLogprob:
    """logprobs: [vocab], a row's log-softmax -> the token's, with the `top` most likely tokens."""
    best: tuple[tuple[int, float], ...] = ()
    if top > 0:
        values, ids = torch.topk(logprobs, min(top, logprobs.shape[-1]))
        best = tuple(zip(ids.tolist(), values.tolist(), strict=True))
    return TokenLogprob(token, float(logprobs[token]), best)


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
    return int(torch.multinomial(distribution(logits, params), 1, generator=generator))


def distribution(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """logits: [vocab] fp32 (usable) -> the probabilities [vocab] a sampled draw takes its token
    from, after temperature, top-k and top-p; SamplingError when no mass is left."""
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
    return probs


def _usable_rows(logits: torch.Tensor) -> torch.Tensor:
    """[S, vocab] -> [S] bool: no NaN, no +inf, and at least one finite logit."""
    bad = torch.isnan(logits) | torch.isposinf(logits)
    return ~bad.any(dim=-1) & torch.isfinite(logits).any(dim=-1)
