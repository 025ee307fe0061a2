"""The worker's speculative decoding metrics: the engine's cumulative draft work becomes counters
(drafted and accepted tokens, draft and verify seconds, verified drafts by acceptance bucket)."""

from __future__ import annotations

from engine.engine import Stats
from tests.worker.fakes import Family, MetricsApi
from worker.worker_metrics import WorkerMetrics


def stats(drafted: int, accepted: int, verify_s: float, acceptance: tuple[int, ...]) -> Stats:
    return Stats(
        0, 0, 0, running=1, waiting=0, preemptions=0, prefix_query_tokens=0, prefix_hit_tokens=0,
        last_batch_tokens=1, speculative_drafted=drafted, speculative_accepted=accepted,
        speculative_draft_s=0.5, speculative_verify_s=verify_s, speculative_acceptance=acceptance,
    )  # fmt: skip


def test_speculation_counters_follow_the_engine_totals() -> None:
    families: dict[str, Family] = {}

    class Api(MetricsApi):
        def family(self, name: str, description: str, counter: bool) -> Family:
            families[name] = Family(name, counter)
            return families[name]

    metrics = WorkerMetrics("m", Api())
    metrics.publish(lambda: stats(8, 6, 1.0, (0, 0, 1, 1, 0)), force=True)
    metrics.publish(lambda: stats(12, 9, 1.5, (0, 0, 1, 1, 1)), force=True)

    def value(family: str, **labels: str) -> float:
        found = [m for m in families[family].metrics if labels.items() <= m.labels.items()]
        assert len(found) == 1
        return found[0].value

    assert value("llm_worker_speculative_tokens_total", kind="drafted") == 12
    assert value("llm_worker_speculative_tokens_total", kind="accepted") == 9
    assert value("llm_worker_speculative_seconds_total", part="verify") == 1.5
    assert value("llm_worker_speculative_seconds_total", part="draft") == 0.5
    acceptance = [
        value("llm_worker_speculative_acceptance_total", le=b) for b in ("0", "0.25", "0.5", "0.75", "1")
    ]
    assert acceptance == [0, 0, 1, 1, 1]
    assert all(f.counter for name, f in families.items() if "speculative" in name)
