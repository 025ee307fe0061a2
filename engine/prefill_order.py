"""The order in which prompts are prefilled, and which prompts are short (engine/scheduler.py
builds each step's candidates; this module only orders them). No torch, no clock, no I/O.

    next_prefill   by tier, then the least weighted prefill service of the cache salt
                   (engine/fair_share.py), then the shortest remaining prompt, then arrival; plain
                   arrival order when fair share is off. `short_only`: a short prompt of the first
                   tier only, a step's first pick, so no short prompt waits behind long ones (its
                   own salt's included) and a salt's stream of short prompts takes that one place
    urgent         prompt-token equivalents of short interactive prompts still to prefill: what a
                   step's budget grows to hurry (engine/step_budget.py `hurry_budget`)
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence as Seq

from contracts.tier import Tier
from engine.fair_share import FairShare
from engine.sequence import Sequence
from engine.step_budget import StepCost

# A prompt of at most this many tokens is short: the first pick of every step. Interactive prompts
# are tens to hundreds of tokens; documents, thousands. A budget measured on 2 cores is 16-32
# tokens a step beside interactive decodes, so "fits the step whole" would leave almost every
# prompt behind the documents.
SHORT_PROMPT_TOKENS = 512


def is_short(seq: Sequence) -> bool:
    return seq.num_prompt_tokens <= SHORT_PROMPT_TOKENS


def next_prefill(candidates: Seq[Sequence], fair: FairShare | None, short_only: bool) -> Sequence | None:
    """The candidate to prefill a chunk of next (the module docstring); `fair` None: arrival order."""
    if candidates and short_only:
        tier = min(s.request.tier for s in candidates)
        candidates = [s for s in candidates if s.request.tier == tier and is_short(s)]
    if not candidates:
        return None
    if fair is None:
        return min(candidates, key=lambda s: s.arrival)
    return min(  # ties: the shortest remaining prompt first
        candidates,
        key=lambda s: (s.request.tier, fair.served(s.request.cache_salt), s.num_uncomputed, s.arrival),
    )


def urgent(cost: StepCost, prefilling: Iterable[Sequence]) -> float:
    """Prompt-token equivalents (attention charged) of short interactive prompts left to prefill."""
    return sum(
        cost.chunk_charge(s.num_computed_tokens, s.num_uncomputed)
        for s in prefilling
        if s.request.tier == Tier.INTERACTIVE and is_short(s)
    )
