"""The CPU worker's metrics on Triton's metrics endpoint (the Python backend's custom metrics API),
published at most every METRICS_INTERVAL_S while busy and once when the engine goes idle."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from engine.engine import Stats

METRICS_INTERVAL_S = 0.5
LOOP_PARTS = ("cancel_check", "schedule", "model", "respond")  # where the engine loop's time goes
ENGINE_TOTALS = ("preemptions", "prefix_query_tokens", "prefix_hit_tokens")  # cumulative in the engine
# speculative decoding's, cumulative in the engine: (Stats field, metric family, its label)
SPECULATIVE_TOTALS = (
    ("speculative_drafted", "tokens", {"kind": "drafted"}),
    ("speculative_accepted", "tokens", {"kind": "accepted"}),
    ("speculative_draft_s", "seconds", {"part": "draft"}),
    ("speculative_verify_s", "seconds", {"part": "verify"}),
)
ACCEPTANCE_BOUNDS = ("0", "0.25", "0.5", "0.75", "1")  # engine/speculative/speculation.py ACCEPTANCE_BUCKETS


class Metric(Protocol):
    def set(self, value: float) -> None: ...

    def increment(self, value: float) -> None: ...


class MetricFamily(Protocol):
    def Metric(self, labels: dict[str, str]) -> Metric: ...


class MetricsApi(Protocol):
    """Creates metric families (Triton's `pb_utils.MetricFamily`; triton_binding.py)."""

    def family(self, name: str, description: str, counter: bool) -> MetricFamily: ...


class WorkerMetrics:
    """Worker metrics on Triton's metrics endpoint (custom metrics API)."""

    def __init__(self, model_name: str, api: MetricsApi, clock: Callable[[], float] = time.monotonic) -> None:
        def gauge(name: str, description: str) -> MetricFamily:
            return api.family(name, description, counter=False)

        def counter(name: str, description: str) -> MetricFamily:
            return api.family(name, description, counter=True)

        blocks = gauge("llm_worker_kv_blocks", "KV cache blocks by state (used, free, cached)")
        seqs = gauge("llm_worker_sequences", "Sequences in the engine by state")
        pre = counter("llm_worker_preemptions_total", "Sequences preempted for recompute")
        query = counter("llm_worker_prefix_query_tokens_total", "Prompt tokens looked up")
        hit = counter("llm_worker_prefix_hit_tokens_total", "Prompt tokens hit in the cache")
        batch = gauge("llm_worker_batch_tokens", "Tokens in the last engine step")
        steps = counter("llm_worker_steps_total", "Engine steps run")
        batched = counter("llm_worker_batched_tokens_total", "Tokens computed over all steps")
        loop = counter(
            "llm_worker_loop_seconds_total",
            "Engine loop time by part: cancel_check (taking the outbox's cancellation checks), schedule "
            "(the engine's scheduler: choosing the step's chunks and blocks, updating its sequences), "
            "model (the rest of the engine step: inputs, the model, sampling), respond (creating the "
            "step's responses and posting them to the outbox)",
        )
        spec = {
            "tokens": counter("llm_worker_speculative_tokens_total", "Draft tokens verified, and accepted"),
            "seconds": counter(
                "llm_worker_speculative_seconds_total", "Speculating steps' time drafting and verifying"
            ),
        }
        acceptance = counter(
            "llm_worker_speculative_acceptance_total",
            "Verified drafts by the share of their tokens accepted: the bucket is the first bound "
            "(le) the share does not exceed",
        )
        self.families = [
            blocks,
            seqs,
            pre,
            query,
            hit,
            batch,
            steps,
            batched,
            loop,
            *spec.values(),
            acceptance,
        ]
        label = {"model": model_name}
        self.gauges = {
            "blocks_used": blocks.Metric({**label, "state": "used"}),
            "blocks_free": blocks.Metric({**label, "state": "free"}),
            "blocks_cached": blocks.Metric({**label, "state": "cached"}),
            "running": seqs.Metric({**label, "state": "running"}),
            "waiting": seqs.Metric({**label, "state": "waiting"}),
            "last_batch_tokens": batch.Metric(label),
        }
        self.counters = {
            "preemptions": pre.Metric(label),
            "prefix_query_tokens": query.Metric(label),
            "prefix_hit_tokens": hit.Metric(label),
            "steps": steps.Metric(label),
            "batched_tokens": batched.Metric(label),
        }
        for name, family, extra in SPECULATIVE_TOTALS:
            self.counters[name] = spec[family].Metric({**label, **extra})
        for i, bound in enumerate(ACCEPTANCE_BOUNDS):
            self.counters[f"acceptance_{i}"] = acceptance.Metric({**label, "le": bound})
        self.loop = {part: loop.Metric({**label, "part": part}) for part in LOOP_PARTS}
        self.reported = dict.fromkeys(self.counters, 0)
        self.steps = 0
        self.batched_tokens = 0
        self.loop_s = dict.fromkeys(LOOP_PARTS, 0.0)  # accumulated since the last publish
        self._clock = clock
        self.next_at = 0.0

    def on_step(
        self, batch_tokens: int, *, cancel_check_s: float, schedule_s: float, model_s: float, respond_s: float
    ) -> None:
        self.steps += 1
        self.batched_tokens += batch_tokens
        self.loop_s["cancel_check"] += cancel_check_s
        self.loop_s["schedule"] += schedule_s
        self.loop_s["model"] += model_s
        self.loop_s["respond"] += respond_s

    def publish(self, read_stats: Callable[[], Stats], force: bool = False) -> None:
        now = self._clock()
        if not force and now < self.next_at:
            return
        self.next_at = now + METRICS_INTERVAL_S
        stats = read_stats()
        for name, metric in self.gauges.items():
            metric.set(float(getattr(stats, name)))
        totals = {
            **{name: getattr(stats, name) for name in ENGINE_TOTALS},
            "steps": self.steps,
            "batched_tokens": self.batched_tokens,
            **{name: getattr(stats, name) for name, _, _ in SPECULATIVE_TOTALS},
            **{f"acceptance_{i}": n for i, n in enumerate(stats.speculative_acceptance)},
        }
        for name, value in totals.items():
            if value > self.reported[name]:
                self.counters[name].increment(float(value - self.reported[name]))
                self.reported[name] = value
        for part, seconds in self.loop_s.items():
            if seconds > 0:
                self.loop[part].increment(seconds)
                self.loop_s[part] = 0.0

    def engine_replaced(self) -> None:
        """A new engine counts its totals from zero: the counters go on from what was reported."""
        for name in ENGINE_TOTALS:
            self.reported[name] = 0

    def close(self) -> None:
        self.gauges.clear()
        self.counters.clear()
        self.loop.clear()
        self.families.clear()
