"""What an autoscaler and the alert rules read from a frontend's /metrics, computed at scrape time
(deploy/kubernetes/autoscaling, deploy/monitoring):

    llm_queue_depth{tier}                  generations waiting here for worker room (and arriving)
    llm_predicted_queue_wait_seconds{tier} the prefill backlog of that tier and the more urgent
                                           ones over the measured prefill rate: the most a new
                                           request of the tier would be predicted to wait
                                           (fair sharing can only shorten it)
    llm_kv_utilization{worker}             the share of the worker's KV pools reserved by this
                                           frontend's generations (the frontend's estimate)
    llm_workers{state}                     workers in the pool: routable, or not (unhealthy,
                                           draining, suspect)
    llm_store_available                    1 while the control store answers the frontend's probe
    llm_usage_backlog                      usage reports not yet written to the store
    llm_health_serving                     1 while health is SERVING (set by frontend/health.py)
    llm_health_changes_total               health status changes (flapping shows here)

Tokens per second are the rates of the existing counters (llm_input_tokens_total,
llm_output_tokens_total; a worker's llm_worker_batched_tokens_total).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

from contracts.tier import Tier
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.worker_pool import WorkerPool


@dataclass(slots=True, eq=False)  # registered in a CollectorRegistry: hashed by identity
class ServingSignals:
    dispatcher: Dispatcher
    pool: WorkerPool
    store_available: Callable[[], bool]
    usage_backlog: Callable[[], int]

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("llm_queue_depth", "Generations waiting for worker room", labels=["tier"])
        wait = GaugeMetricFamily(
            "llm_predicted_queue_wait_seconds",
            "Prefill backlog of the tier and more urgent ones over the measured prefill rate",
            labels=["tier"],
        )
        waiting = self.dispatcher.waiting_by_tier()
        for tier in Tier:
            name = tier.name.lower()
            depth.add_metric([name], waiting.get(tier, 0))
            wait.add_metric([name], self.dispatcher.predictor.backlog_wait_s(tier))
        yield depth
        yield wait
        kv = GaugeMetricFamily(
            "llm_kv_utilization", "Share of the worker's KV pools this frontend reserved", labels=["worker"]
        )
        workers = GaugeMetricFamily("llm_workers", "Workers in this frontend's pool", labels=["state"])
        routable = 0
        for w in list(self.pool.workers.values()):
            capacity = sum(w.capacity.values())
            kv.add_metric([w.worker_id], sum(w.reserved.values()) / capacity if capacity else 0.0)
            routable += any(w.routable(v) for v in w.capacity)
        yield kv
        workers.add_metric(["routable"], routable)
        workers.add_metric(["unroutable"], len(self.pool.workers) - routable)
        yield workers
        yield GaugeMetricFamily(
            "llm_store_available", "1 while the control store answers", value=float(self.store_available())
        )
        yield GaugeMetricFamily(
            "llm_usage_backlog", "Usage reports not yet written to the store", value=self.usage_backlog()
        )
