"""The per-step cost model that sets the default token budget of a step (the prefill chunk lever).

A step's time grows with the tokens it computes: t(n) ~= fixed + per_token * n (decodes and
prefill chunk tokens alike). The budget is the most tokens a step may hold while a decoding stream
still gets its next token within the inter-token-latency objective, with headroom for the work
around the step (responses, the frontend). Measured once when a worker loads the model: the same
steps warm the kernels up before the first request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from engine.engine import Engine, EngineConfig, EngineRequest
from engine.model import LlamaForCausalLM

ITL_OBJECTIVE_S = 0.050  # the seed's interactive objective: p95 inter-token latency <= 50 ms
HEADROOM = 0.8  # of the objective, for the step itself
PROBE_TOKENS = (16, 64, 128)  # step sizes measured
MIN_BUDGET, MAX_BUDGET, MULTIPLE = 16, 512, 16


@dataclass(slots=True, frozen=True)
class StepCost:
    fixed_s: float  # seconds per step whatever its size
    per_token_s: float  # seconds per token computed in the step

    def seconds(self, tokens: int) -> float:
        return self.fixed_s + self.per_token_s * tokens


def fit(samples: Sequence[tuple[int, float]]) -> StepCost:
    """Least-squares line through (tokens, seconds) samples of at least two sizes."""
    if len({n for n, _ in samples}) < 2:
        raise ValueError("fitting a step cost needs samples of at least two step sizes")
    mean_n = sum(n for n, _ in samples) / len(samples)
    mean_t = sum(t for _, t in samples) / len(samples)
    var = sum((n - mean_n) ** 2 for n, _ in samples)
    slope = sum((n - mean_n) * (t - mean_t) for n, t in samples) / var
    slope = max(slope, 1e-9)  # noise can tilt a flat line below zero; a token is never free
    return StepCost(fixed_s=max(mean_t - slope * mean_n, 0.0), per_token_s=slope)


def chunk_budget(cost: StepCost, itl_objective_s: float = ITL_OBJECTIVE_S) -> int:
    """Tokens per step that keep a step within HEADROOM of the objective, as a multiple of 16 in
    [16, 512] (a machine too slow for the objective still prefills 16 tokens a step)."""
    tokens = (itl_objective_s * HEADROOM - cost.fixed_s) / cost.per_token_s
    budget = int(tokens) // MULTIPLE * MULTIPLE
    return min(MAX_BUDGET, max(MIN_BUDGET, budget))


def measure(
    model: LlamaForCausalLM,
    dtype: torch.dtype,
    sizes: Sequence[int] = PROBE_TOKENS,
    repeats: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> StepCost:
    """Times steps of exactly `n` prompt tokens for each size (the fastest of `repeats`) and fits."""
    blocks = -(-max(sizes) // 16) + 1
    samples = []
    for n in sizes:
        best = float("inf")
        for r in range(repeats):
            engine = Engine(model, EngineConfig(num_blocks=blocks, dtype=dtype, max_num_batched_tokens=n))
            engine.add_request(EngineRequest(f"probe-{n}-{r}", tuple(range(100, 100 + n)), 1))
            start = clock()
            engine.step()  # the whole prompt in one step, and one sampled token
            best = min(best, clock() - start)
        samples.append((n, best))
    return fit(samples)
