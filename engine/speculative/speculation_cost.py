"""Whether a step speculates, and how far: measured step times and each sequence's measured
acceptance decide. Pure Python: no torch, no clock (the engine passes the seconds it measured).

With per-token acceptance a (a draft token stands with probability a given the ones before it
stood), k drafts emit on average E(k) = (1 - a^(k+1)) / (1 - a) tokens for one verify step of
k + 1 tokens plus k draft forwards, against one token for a plain decode step:

    speedup(k) = E(k) * T_plain / (T_verify(k + 1) + k * T_draft)

The step speculates with the k (up to its limit) of the best speedup, and not at all unless that
beats 1 by MARGIN. T_verify(n) is the target's step time at n tokens a sequence (measured per n,
else extrapolated), T_draft a draft forward's (0 for prompt lookup). Under batch load (more
decoding sequences than BATCH_LIMIT, or a prefill chunk in the step: compute-bound steps) the
step does not speculate at all.
"""

from __future__ import annotations

from dataclasses import dataclass

MARGIN = 1.1  # the predicted speedup a step must beat to speculate
BATCH_LIMIT = 4  # decoding sequences above which a step is compute-bound and never speculates
EMA = 0.2  # weight of a new timing
DECAY = 0.9  # weight of a sequence's past drafts in its acceptance
PRIOR_HITS, PRIOR_TRIES = 3.0, 4.0  # a new sequence's acceptance: 0.75, soon outweighed
EXTRA_TOKEN_PRIOR = 0.15  # T_verify(n) / T_plain - 1 per extra token before any is measured
PROBE_EVERY = 64  # while speculation does not pay, every this many decisions try k = PROBE_TOKENS
PROBE_TOKENS = 2  # (timings and acceptance change: a burst of load passes, a text turns repetitive)


@dataclass(slots=True)
class SeqSpeculation:
    """One sequence's speculation: its draft KV (engine/speculative/draft_model.py) and acceptance."""

    residency: int  # the sequence's num_preemptions when `draft_computed` was last valid
    draft_computed: int = 0  # positions whose draft KV is stored
    hits: float = PRIOR_HITS  # decayed drafts accepted
    tries: float = PRIOR_TRIES  # decayed drafts tested (accepted + the first rejected)

    @property
    def acceptance(self) -> float:
        return self.hits / self.tries

    def record(self, drafted: int, accepted: int) -> None:
        tested = accepted + (1 if accepted < drafted else 0)
        self.hits = self.hits * DECAY + accepted
        self.tries = self.tries * DECAY + tested


def expected_tokens(acceptance: float, k: int) -> float:
    """Tokens a verify step of k drafts emits on average (the target's own token included)."""
    if acceptance >= 1.0:
        return float(k + 1)
    return (1.0 - acceptance ** (k + 1)) / (1.0 - acceptance)


class SpeculationCost:
    """Timings measured by the engine, as exponential moving averages, in seconds."""

    def __init__(self, draft_relative: float) -> None:
        """draft_relative: a draft forward's time as a fraction of a plain step's, until measured
        (0 for prompt lookup, which runs no model)."""
        self.plain_s: float | None = None  # a decode step of one token a sequence
        self.verify_s: dict[int, float] = {}  # tokens a sequence -> its step's time
        self.draft_s: float | None = None  # one draft forward
        self._draft_relative = draft_relative
        self._declined = 0  # decisions not to speculate since the last probe

    def observe_plain(self, seconds: float) -> None:
        self.plain_s = _ema(self.plain_s, seconds)

    def observe_verify(self, tokens: int, seconds: float) -> None:
        self.verify_s[tokens] = _ema(self.verify_s.get(tokens), seconds)

    def observe_draft(self, forwards: int, seconds: float) -> None:
        if forwards:
            self.draft_s = _ema(self.draft_s, seconds / forwards)

    def choose(self, acceptance: float, limit: int) -> int:
        """The k (0..limit) of the best predicted speedup; 0 unless it beats MARGIN."""
        plain = self.plain_s
        if plain is None:  # a plain step first, to compare with
            return 0
        if not self.verify_s:  # then a verify step, to measure
            return min(limit, PROBE_TOKENS)
        draft = self.draft_s if self.draft_s is not None else plain * self._draft_relative
        best_k, best = 0, MARGIN
        for k in range(1, limit + 1):
            speedup = expected_tokens(acceptance, k) * plain / (self._verify(k + 1, plain) + k * draft)
            if speedup > best:
                best_k, best = k, speedup
        if best_k == 0:
            self._declined += 1
            if self._declined >= PROBE_EVERY:
                self._declined = 0
                return min(limit, PROBE_TOKENS)
        return best_k

    def _verify(self, tokens: int, plain: float) -> float:
        if tokens in self.verify_s:
            return self.verify_s[tokens]
        measured = sorted(self.verify_s.items())
        if measured:  # extrapolate from the nearest measured size, per extra token
            n, t = min(measured, key=lambda item: abs(item[0] - tokens))
            per_token = max(t - plain, 0.0) / (n - 1) if n > 1 else plain * EXTRA_TOKEN_PRIOR
            return t + per_token * (tokens - n)
        return plain * (1.0 + EXTRA_TOKEN_PRIOR * (tokens - 1))


def _ema(old: float | None, new: float) -> float:
    return new if old is None else old * (1.0 - EMA) + new * EMA
