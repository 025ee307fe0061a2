"""Measures a model's step cost on this machine (engine/step_budget.py says how the scheduler uses it
to size each step's prefill): a few timed steps when a worker loads the model, which also warm the
kernels up before the first request.

    prefill steps of 16, 64 and 128 prompt tokens   -> seconds per prompt token
    decode steps of 1 and 16 sequences              -> the fixed cost, seconds per decoding sequence
    a 64-token chunk after a cached 1,024-token     -> seconds per (prompt token, key) pair: what
      prefix (prefix-cache hits: only the chunk       the chunk costs beyond 64 tokens at position 0
      is computed)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from engine.engine import Engine, EngineConfig, EngineRequest
from engine.model import LlamaForCausalLM
from engine.step_budget import StepCost

PROBE_TOKENS = (16, 64, 128)  # prefill step sizes measured
PROBE_DECODES = (1, 16)  # decode batch sizes measured
DECODE_PROMPT = 8  # prompt tokens of each decoding probe sequence
CONTEXT_PROBE = (1024, 64)  # (cached prefix, chunk) of the attention probe
REFERENCE_TOKENS = 64  # the prefill step timed again at each load (`reference_step`)


@dataclass(slots=True, frozen=True)
class Line:
    intercept_s: float
    slope_s: float


def fit(samples: Sequence[tuple[int, float]]) -> Line:
    """Least-squares line through (size, seconds) samples of at least two sizes."""
    if len({n for n, _ in samples}) < 2:
        raise ValueError("fitting a step cost needs samples of at least two step sizes")
    mean_n = sum(n for n, _ in samples) / len(samples)
    mean_t = sum(t for _, t in samples) / len(samples)
    var = sum((n - mean_n) ** 2 for n, _ in samples)
    slope = sum((n - mean_n) * (t - mean_t) for n, t in samples) / var
    slope = max(slope, 1e-9)  # noise can tilt a flat line below zero; a token is never free
    return Line(intercept_s=max(mean_t - slope * mean_n, 0.0), slope_s=slope)


def measure(
    model: LlamaForCausalLM,
    dtype: torch.dtype,
    sizes: Sequence[int] = PROBE_TOKENS,
    batches: Sequence[int] = PROBE_DECODES,
    repeats: int = 3,
    clock: Callable[[], float] = time.perf_counter,
    context: tuple[int, int] = CONTEXT_PROBE,
    kv_dtype: torch.dtype | None = None,
) -> StepCost:
    """The fastest of `repeats` timings of each probe step, fitted (see the module docstring), with
    the KV cache in `kv_dtype` (default: `dtype`) as the worker will run it."""

    def engine(blocks: int, budget: int) -> Engine:
        config = EngineConfig(
            num_blocks=blocks, dtype=dtype, max_num_batched_tokens=budget, kv_dtype=kv_dtype
        )
        return Engine(model, config)

    prefill = [(n, _prefill_step_s(model, dtype, kv_dtype, n, repeats, clock)) for n in sizes]
    decode = []
    for b in batches:
        e = engine(b + 1, DECODE_PROMPT * b)
        for i in range(b):
            prompt = tuple(range(100 + i, 100 + i + DECODE_PROMPT))
            e.add_request(EngineRequest(f"decode-{b}-{i}", prompt, 1 + repeats))
        e.step()  # every prompt; then decode steps only
        best = float("inf")
        for _ in range(repeats):
            start = clock()
            e.step()
            best = min(best, clock() - start)
        decode.append((b, best))
    decoding, prefilling = fit(decode), fit(prefill)
    prefix, n = context
    e = engine(-(-(prefix + n) // 16) * (1 + repeats), prefix + n)
    e.add_request(EngineRequest("context", tuple(range(100, 100 + prefix)), 1))
    e.step()  # the prefix, now in the prefix cache
    best = float("inf")
    for r in range(repeats):
        e.add_request(
            EngineRequest(
                f"context-{r}", (*range(100, 100 + prefix), *range(5000 + n * r, 5000 + n * (r + 1))), 1
            )
        )
        start = clock()
        e.step()  # the chunk alone, attending over prefix + chunk
        best = min(best, clock() - start)
    beyond = best - prefilling.intercept_s - prefilling.slope_s * n  # what position 0 would not cost
    return StepCost(
        fixed_s=decoding.intercept_s,
        per_decode_s=decoding.slope_s,
        per_prefill_token_s=prefilling.slope_s,
        per_attended_s=max(beyond, 0.0) / (n * prefix),
    )


def reference_step(
    model: LlamaForCausalLM,
    dtype: torch.dtype,
    kv_dtype: torch.dtype | None = None,
    repeats: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """The fastest of `repeats` timings of one REFERENCE_TOKENS-token prefill step: timed when a
    cost is measured and again at each load that finds it cached, to tell a cost measured while
    the host was busy (the step now runs faster) from this host's own (worker/loader.py)."""
    return _prefill_step_s(model, dtype, kv_dtype, REFERENCE_TOKENS, repeats, clock)


def _prefill_step_s(
    model: LlamaForCausalLM,
    dtype: torch.dtype,
    kv_dtype: torch.dtype | None,
    n: int,
    repeats: int,
    clock: Callable[[], float],
) -> float:
    """The fastest of `repeats` timings of one n-token prompt prefilled in one step (and its one
    sampled token), each on a fresh engine."""
    best = float("inf")
    for r in range(repeats):
        config = EngineConfig(
            num_blocks=-(-n // 16) + 1, dtype=dtype, max_num_batched_tokens=n, kv_dtype=kv_dtype
        )
        e = Engine(model, config)
        e.add_request(EngineRequest(f"prefill-{n}-{r}", tuple(range(100, 100 + n)), 1))
        start = clock()
        e.step()
        best = min(best, clock() - start)
    return best


def warm_up(model: LlamaForCausalLM, dtype: torch.dtype) -> None:
    """One short prefill and one decode step: what a load whose cost was cached (so nothing was
    measured) runs before the first request, so that request does not pay the first-touch cost."""
    e = Engine(model, EngineConfig(num_blocks=4, dtype=dtype, max_num_batched_tokens=16))
    e.add_request(EngineRequest("warm-up", tuple(range(100, 116)), 2))
    while e.has_unfinished():
        e.step()
