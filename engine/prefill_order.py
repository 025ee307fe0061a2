"""The order in which prompts are prefilled, and which prompts are short (engine/scheduler.py
builds each step's candidates; this module only orders them). No torch, no clock, no I/O.

    next_prefill   by tier, then the prompt's virtual finish time (`finish_tag`), then the shortest
                   remaining prompt, then arrival; plain arrival order when fair share is off.
                   `short_only`: a short prompt of the first tier only, a step's first pick, so no
                   short prompt waits behind long ones (its own salt's included) and a salt's
                   stream of short prompts takes that one place
    finish_tag     the weighted prefill service of the prompt's cache salt (engine/fair_share.py)
                   once the rest of the prompt is charged to it: weighted fair queuing with a whole
                   prompt as the packet. A first token comes only when the whole prompt is
                   prefilled, so two documents sharing the steps chunk by chunk both finish late;
                   by finish tag the one that would finish first goes on to its end. The tag is
                   fixed when the prompt's first chunk is scheduled (`Sequence.finish_tag`; a
                   preempted sequence starts over): the salt's other prompts, served meanwhile,
                   do not push a document in service behind one that has not started. A salt's
                   later prompts see all of its service, so in tag order a salt gets ahead by one
                   prompt at most (the step's first pick, for a short prompt, aside)
    urgent         prompt-token equivalents of short interactive prompts still to prefill: what a
                   step's budget grows to hurry (engine/step_budget.py `hurry_budget`)
    due            the same prompts' charge left and the seconds to the earliest of their
                   deadlines (engine/step_budget.py `due_budget`)
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence as Seq

from contracts.tier import Tier
from engine.fair_share import FairShare
from engine.sequence import Sequence
from engine.step_budget import PREFILL_DEADLINE_S, StepCost, charge_of

# A prompt of at most this many tokens is short: the first pick of every step. Interactive prompts
# are tens to hundreds of tokens; documents, thousands. A budget measured on 2 cores is 16-32
# tokens a step beside interactive decodes, so "fits the step whole" would leave almost every
# prompt behind the documents.
SHORT_PROMPT_TOKENS = 512


def is_short(seq: Sequence) -> bool:
    return seq.num_prompt_tokens <= SHORT_PROMPT_TOKENS


def next_prefill(
    candidates: Seq[Sequence], fair: FairShare | None, short_only: bool, cost: StepCost | None = None
) -> Sequence | None:
    """The candidate to prefill a chunk of next (the module docstring); `fair` None: arrival order;
    `cost` None: a chunk is charged its tokens (a fixed budget)."""
    if candidates and short_only:
        tier = min(s.request.tier for s in candidates)
        candidates = [s for s in candidates if s.request.tier == tier and is_short(s)]
    if not candidates:
        return None
    if fair is None:
        return min(candidates, key=lambda s: s.arrival)
    return min(  # ties: the shortest remaining prompt first
        candidates, key=lambda s: (s.request.tier, finish_tag(s, fair, cost), s.num_uncomputed, s.arrival)
    )


def finish_tag(seq: Sequence, fair: FairShare, cost: StepCost | None) -> float:
    """The salt's weighted service once the rest of this prompt is charged to it, or the tag fixed
    at the prompt's first chunk (module docstring)."""
    if seq.finish_tag is not None:
        return seq.finish_tag
    rest = charge_of(cost, seq.num_computed_tokens, seq.num_uncomputed)
    return fair.served(seq.request.cache_salt) + rest / seq.request.weight


def urgent(cost: StepCost, prefilling: Iterable[Sequence]) -> float:
    """Prompt-token equivalents (attention charged) of short interactive prompts left to prefill."""
    return sum(_left(cost, s) for s in _first_token_waits(prefilling))


def due(cost: StepCost, prefilling: Iterable[Sequence], now: float) -> tuple[float, float] | None:
    """(charge left, seconds to the earliest deadline) of the short interactive prompts with a
    deadline, PREFILL_DEADLINE_S after the engine took them: those with a known `admitted_s` that
    were never preempted (a preempted one recomputes what it already answered). None: none."""
    timed = [
        (s.admitted_s, s)
        for s in _first_token_waits(prefilling)
        if s.admitted_s is not None and not s.num_preemptions
    ]
    if not timed:
        return None
    earliest = min(at for at, _ in timed)
    return sum(_left(cost, s) for _, s in timed), earliest + PREFILL_DEADLINE_S - now


def _first_token_waits(prefilling: Iterable[Sequence]) -> list[Sequence]:
    return [s for s in prefilling if s.request.tier == Tier.INTERACTIVE and is_short(s)]


def _left(cost: StepCost, seq: Sequence) -> float:
    return cost.chunk_charge(seq.num_computed_tokens, seq.num_uncomputed)
