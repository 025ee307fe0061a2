"""How many prompt tokens a step may prefill, from a measured step cost (engine/cost_model.py
measures it when a worker loads the model; this module is pure: no torch, no clock).

A step runs every running sequence's next-token decode, then prefill chunks within the budget:

    t(step) ~= fixed + per_decode * decodes + per_prefill_token * prefill tokens

The budget keeps the interactive promise where it can be kept, and throughput where it cannot:
- interactive decodes in the step: the step stays within HEADROOM of the inter-token objective,
  or, when the decodes alone already take that long (a large batch), adds at most SLACK of them;
- no interactive decode (only batch-tier ones, or none): the step stays within IDLE_STEP_S, so
  a request that arrives meanwhile waits at most that long for its first chunk.
Always at least MIN_BUDGET (every prompt makes progress) and at most MAX_BUDGET, a multiple of
MULTIPLE tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

ITL_OBJECTIVE_S = 0.050  # the seed's interactive objective: p95 inter-token latency <= 50 ms
HEADROOM = 0.8  # of the objective, for the step itself (the rest: responses, the frontend)
SLACK = 0.5  # prefill added to a step whose decodes alone exceed the objective, as a share of them
IDLE_STEP_S = 0.25  # the longest step when nobody interactive is decoding
MIN_BUDGET, MAX_BUDGET, MULTIPLE = 16, 512, 16


@dataclass(slots=True, frozen=True)
class StepCost:
    fixed_s: float  # seconds per step whatever its size
    per_decode_s: float  # seconds per decoding sequence
    per_prefill_token_s: float  # seconds per prompt token prefilled

    def seconds(self, decodes: int, prefill_tokens: int) -> float:
        return self.fixed_s + self.per_decode_s * decodes + self.per_prefill_token_s * prefill_tokens


def prefill_budget(
    cost: StepCost, decodes: int, interactive: bool, itl_objective_s: float = ITL_OBJECTIVE_S
) -> int:
    """Prompt tokens this step may prefill beside `decodes` decodes (`interactive`: at least one
    of them is interactive-tier); see the module docstring."""
    decoding = cost.seconds(decodes, 0)
    if interactive:
        step = max(itl_objective_s * HEADROOM, decoding * (1 + SLACK))
    else:
        step = max(IDLE_STEP_S, decoding * (1 + SLACK))
    tokens = (step - decoding) / cost.per_prefill_token_s
    budget = int(tokens) // MULTIPLE * MULTIPLE
    return min(MAX_BUDGET, max(MIN_BUDGET, budget))
