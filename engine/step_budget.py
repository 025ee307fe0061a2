"""How many prompt tokens a step may prefill, from a measured step cost (engine/cost_model.py
measures it when a worker loads the model; this module is pure: no torch, no clock).

A step runs every running sequence's next-token decode, then prefill chunks within the budget:

    t(step) ~= fixed + per_decode * decodes + per_prefill_token * prefill tokens

The budget keeps the interactive promise where it can be kept, and throughput where it cannot:
- interactive decodes in the step: the step stays within HEADROOM of the inter-token objective,
  or, when the decodes alone already take that long (a large batch), adds at most SLACK of them;
- no interactive decode (only batch-tier ones, or none): the step stays within IDLE_STEP_S, so
  a request that arrives meanwhile waits at most that long for its first chunk;
- only batch-tier work in the engine (`batch_only`): within BATCH_STEP_S, a larger budget for
  throughput. The prompts are prefilled in fewer steps, so the decodes run at full batch sooner
  (offline 64 x 128/128 on 2 cores, side by side: 371 output tok/s at a measured 0.25 s step, 418
  at 512 tokens a step); an interactive request arriving meanwhile waits for at most that step.
Always at least MIN_BUDGET (every prompt makes progress) and at most MAX_BUDGET, a multiple of
MULTIPLE tokens; at most BATCH_MAX_BUDGET when only batch-tier work is in the engine, where a
fast host would otherwise stop at 3 prompts of 128 tokens a step (their attention is charged
too): the offline load through the platform on a 2-core Sapphire Rapids, 512 -> 1024, 768-783
-> 797-822 output tok/s over 5 and 3 runs.

A budget sized for the inter-token objective alone can starve a first token: beside interactive
decodes a step may prefill only 16-32 tokens on 2 cores, so a 450-token interactive prompt would
need 15-28 steps. While short interactive prompts wait (`urgent`: their prompt-token equivalents
left), the budget grows to what prefills them within TTFT_PREFILL_S (`hurry_budget`), the step
staying within HURRY_STEP of the inter-token objective: a few longer steps for the decodes, not a
missed first token. That plan is made afresh each step for what is left, so capped steps alone can
run a long prompt past its objective, and a prompt's steps shrink as it is prefilled. So each short
interactive prompt also has a deadline, PREFILL_DEADLINE_S after the engine took it: the budget
grows to what prefills every prompt due by the earliest deadline (`due_budget`), a step staying
within LATE_STEP objectives. On 2 Zen 3 cores (1.3 ms a prompt token), a 449-token
prompt beside a decode took 11 capped steps of 75 ms, and its first token came 0.88-1.10 s after it
was sent.

A chunk's attention grows with the context it attends over (its n queries each read start + n keys),
which a fit over short probes does not see: a 128-token chunk at position 1,500 costs several times
one at position 0. So the budget is spent in prompt-token equivalents, a chunk of n tokens from
position `start` costing n * (1 + (start + n) * per_attended_s / per_prefill_token_s)
(`chunk_charge`), and a chunk is cut to what is left (`chunk_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass

ITL_OBJECTIVE_S = 0.050  # the seed's interactive objective: p95 inter-token latency <= 50 ms
HEADROOM = 0.8  # of the objective, for the step itself (the rest: responses, the frontend)
SLACK = 0.5  # prefill added to a step whose decodes alone exceed the objective, as a share of them
IDLE_STEP_S = 0.25  # the longest step when nobody interactive is decoding
BATCH_STEP_S = 0.5  # the longest step when only batch-tier work is in the engine
# Of the seed's 1 s first-token objective, the share for the prefill itself. The rest goes to the
# frontend's admission, the step in flight when the prompt arrives, and the cost model's optimism:
# its probes run on an idle engine, while under load the frontend and tritonserver share the cores.
TTFT_PREFILL_S = 0.25
HURRY_STEP = 1.5  # the longest step while hurrying a prompt, in inter-token objectives
# A short interactive prompt's prefill is due this long after the engine took it; steps grow up to
# LATE_STEP objectives to make it. Of the 1 s first-token objective, the rest goes to the frontend,
# the step in flight when the prompt arrives and the model's optimism under load.
PREFILL_DEADLINE_S = 0.7
LATE_STEP = 2.0
MIN_BUDGET, MAX_BUDGET, MULTIPLE = 16, 512, 16
BATCH_MAX_BUDGET = 1024


@dataclass(slots=True, frozen=True)
class StepCost:
    fixed_s: float  # seconds per step whatever its size
    per_decode_s: float  # seconds per decoding sequence
    per_prefill_token_s: float  # seconds per prompt token prefilled
    per_attended_s: float = 0.0  # seconds per (prompt token, key it attends to) pair of a chunk

    def seconds(self, decodes: int, prefill_tokens: int) -> float:
        return self.fixed_s + self.per_decode_s * decodes + self.per_prefill_token_s * prefill_tokens

    def chunk_charge(self, start: int, n: int) -> float:
        """A chunk of n prompt tokens from position `start`, in prompt-token equivalents."""
        return n * (1.0 + (start + n) * self._attended_per_token())

    def chunk_tokens(self, start: int, want: int, left: float) -> int:
        """The most tokens, at most `want`, of a chunk from position `start` whose charge fits
        `left` prompt-token equivalents (0 when not even one does)."""
        lo, hi = 0, max(0, min(want, int(left)))  # the charge grows with n: bisect for the largest
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.chunk_charge(start, mid) <= left else (lo, mid - 1)
        return lo

    def _attended_per_token(self) -> float:
        return self.per_attended_s / self.per_prefill_token_s if self.per_prefill_token_s > 0 else 0.0


def prefill_budget(
    cost: StepCost,
    decodes: int,
    interactive: bool,
    itl_objective_s: float = ITL_OBJECTIVE_S,
    urgent: float = 0.0,
    batch_only: bool = False,
    due: tuple[float, float] | None = None,
) -> int:
    """Prompt tokens this step may prefill beside `decodes` decodes (`interactive`: at least one
    of them is interactive-tier; `urgent`: prompt-token equivalents of short interactive prompts
    still to prefill; `batch_only`: every sequence in the engine is batch-tier; `due`: the charge
    left of such prompts with a deadline and the seconds to the earliest one); see the module
    docstring."""
    decoding = cost.seconds(decodes, 0)
    if interactive:
        step = max(itl_objective_s * HEADROOM, decoding * (1 + SLACK))
    else:
        step = max(BATCH_STEP_S if batch_only else IDLE_STEP_S, decoding * (1 + SLACK))
    tokens = (step - decoding) / cost.per_prefill_token_s
    tokens = max(tokens, hurry_budget(cost, decodes, urgent, itl_objective_s))
    tokens = max(tokens, due_budget(cost, decodes, due, itl_objective_s))
    budget = int(tokens) // MULTIPLE * MULTIPLE
    return min(BATCH_MAX_BUDGET if batch_only else MAX_BUDGET, max(MIN_BUDGET, budget))


def hurry_budget(
    cost: StepCost, decodes: int, urgent: float, itl_objective_s: float = ITL_OBJECTIVE_S
) -> float:
    """Prompt tokens a step must prefill so that `urgent` prompt-token equivalents take at most
    TTFT_PREFILL_S of steps like it, a step within HURRY_STEP objectives (`in_time`)."""
    return in_time(cost, decodes, urgent, TTFT_PREFILL_S, HURRY_STEP * itl_objective_s)


def due_budget(
    cost: StepCost, decodes: int, due: tuple[float, float] | None, itl_objective_s: float = ITL_OBJECTIVE_S
) -> float:
    """Prompt tokens a step must prefill so that `due` = (charge left of every prompt with a
    deadline, seconds to the earliest deadline) is prefilled by then, a step within LATE_STEP
    objectives (`in_time`). All of it is counted against the earliest deadline, whatever order the
    prompts are picked in (0 when nothing is due)."""
    if due is None:
        return 0.0
    charge, seconds = due
    return in_time(cost, decodes, charge, seconds, LATE_STEP * itl_objective_s)


def in_time(cost: StepCost, decodes: int, charge: float, seconds: float, longest_step_s: float) -> float:
    """Prompt tokens a step must prefill so that `charge` prompt-token equivalents take at most
    `seconds` of steps like it, each beside `decodes` decodes: charge / b steps of (decoding + b *
    per_token) seconds, solved for b. Bounded by a step of `longest_step_s`, which is also the
    answer when `seconds` cannot be met; 0 when nothing is charged or the decodes alone fill the
    bound."""
    if charge <= 0:
        return 0.0
    decoding = cost.seconds(decodes, 0)
    longest = max(longest_step_s - decoding, 0.0) / cost.per_prefill_token_s
    spare = seconds - charge * cost.per_prefill_token_s  # the prefill's own time aside
    if spare <= 0:
        return longest
    return min(longest, charge * decoding / spare)


def charge_of(cost: StepCost | None, start: int, n: int) -> float:
    """What a chunk of n prompt tokens from `start` takes of a step's budget: its tokens under a
    fixed budget, its charge (attention included) under a measured one."""
    return n if cost is None else cost.chunk_charge(start, n)


def chunk_fit(cost: StepCost | None, start: int, want: int, left: float, prefilled: bool) -> int:
    """Tokens of a chunk from position `start` (at most `want`) that fit `left` of a step's budget,
    charged by `cost` (None: a fixed budget, a token each); the step's first chunk (nothing
    `prefilled` yet) gets at least one, so some prompt always moves on."""
    n = min(want, int(left)) if cost is None else cost.chunk_tokens(start, want, left)
    return n if n or prefilled else min(want, 1)
