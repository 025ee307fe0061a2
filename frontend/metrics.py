"""The frontend's Prometheus-format metrics endpoint (`[frontend] metrics_listen`).

Each platform owns its own registry, so several frontends in one process (the tests) never mix
their figures. Names and units are documented in docs/observability.md, "Frontend metrics".
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from datastore.meter import StoreMeter

LAG_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
ITL_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0)


class FrontendMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.cancellations = Counter(
            "llm_cancellations",
            "Generations cancelled, by reason (CANCELED: the API or a Converse frame; "
            "DISCONNECTED: no client came back within the grace period; SLOW_CONSUMER; LEASE_LOST)",
            ["reason"],
            registry=self.registry,
        )
        self.cancellation_lag = Histogram(
            "llm_cancellation_lag_seconds",
            "From the cancel intent to the worker request cancelled, usage sealed and `finished` "
            "sent (the engine frees the blocks at its next step boundary)",
            ["reason"],
            buckets=LAG_BUCKETS_S,
            registry=self.registry,
        )
        self.rejections = Counter(
            "llm_admission_rejections",
            "Requests refused before they ran, by gRPC status and ErrorInfo reason",
            ["code", "reason"],
            registry=self.registry,
        )
        by_version = ["tenant", "model_version"]
        self.ttft = Histogram(
            "llm_time_to_first_token_seconds",
            "Request received to its first output token",
            by_version,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.itl = Histogram(
            "llm_inter_token_latency_seconds",
            "Gap between successive output tokens (a step's gap shared by the tokens it brought)",
            by_version,
            buckets=ITL_BUCKETS_S,
            registry=self.registry,
        )
        self.queue_time = Histogram(
            "llm_queue_seconds",
            "Request received to the worker's admission (admission, dispatch queue, worker queue)",
            ["tenant"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.duration = Histogram(
            "llm_request_duration_seconds",
            "Request received to `finished`, by finish reason",
            [*by_version, "finish_reason"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.tokens_in = Counter(
            "llm_input_tokens",
            "Prompt tokens processed (after the template)",
            by_version,
            registry=self.registry,
        )
        self.tokens_cached = Counter(
            "llm_cached_input_tokens",
            "Prompt tokens served from the prefix cache",
            by_version,
            registry=self.registry,
        )
        self.tokens_out = Counter(
            "llm_output_tokens", "Output tokens generated", by_version, registry=self.registry
        )
        self.active = Gauge(
            "llm_active_generations", "Generations admitted and not ended", ["tenant"], registry=self.registry
        )
        self.serving = Gauge("llm_health_serving", "1 while health is SERVING", registry=self.registry)
        self.health_changes = Counter(
            "llm_health_changes", "Health status changes (SERVING <-> NOT_SERVING)", registry=self.registry
        )
        self.registry.register(_DecodeShare(self.tokens_out))
        self._server: WSGIServer | None = None

    def relay_workers(self, workers: Callable[[], Iterable[tuple[str, str]]]) -> None:
        """Re-exposes each worker's `llm_worker_*` metrics (from Triton's endpoint) with a `worker`
        label; `workers` yields (worker id, metrics URL) at scrape time."""
        self.registry.register(_WorkerRelay(workers))

    def health_changed(self, serving: bool) -> None:
        """frontend/health.py set a new status."""
        self.serving.set(1.0 if serving else 0.0)
        self.health_changes.inc()

    def watch_signals(self, signals: Collector) -> None:
        """The autoscaling and alerting signals (frontend/serving_signals.py), read at scrape time."""
        self.registry.register(signals)

    def watch_store(self, meter: StoreMeter) -> None:
        """Exposes what this process asks of the store (datastore/meter.py) as counters."""
        self.registry.register(_StoreCost(meter))

    def watch_retention(self, state: Callable[[], tuple[int, int, int]]) -> None:
        """Exposes the finished generations kept for Resume (frontend/generations/live.py): `state`
        gives (runs, their logs' bytes, runs forgotten early for the byte budget) at scrape time."""
        self.registry.register(_Retention(state))

    def serve(self, listen: str) -> int:
        """Serves /metrics on `listen` (host:port; port 0 picks one); returns the bound port."""
        host, _, port = listen.rpartition(":")
        self._server, _ = start_http_server(int(port), addr=host.strip("[]"), registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _DecodeShare(Collector):
    """llm_decode_token_share{tenant}: each tenant's share of all output tokens so far."""

    def __init__(self, tokens_out: Counter) -> None:
        self.tokens_out = tokens_out

    def collect(self) -> Iterator[Metric]:
        by_tenant: dict[str, float] = {}
        for metric in self.tokens_out.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    tenant = sample.labels["tenant"]
                    by_tenant[tenant] = by_tenant.get(tenant, 0.0) + sample.value
        total = sum(by_tenant.values())
        share = GaugeMetricFamily(
            "llm_decode_token_share", "Each tenant's share of the output tokens generated", labels=["tenant"]
        )
        for tenant, tokens in sorted(by_tenant.items()):
            share.add_metric([tenant], tokens / total if total else 0.0)
        yield share


class _StoreCost(Collector):
    """llm_store_{statements,transactions,round_trips}_total: the store's cost, as counted so far."""

    def __init__(self, meter: StoreMeter) -> None:
        self.meter = meter

    def collect(self) -> Iterator[Metric]:
        counts = self.meter.counts()
        for name, what, value in (
            ("llm_store_statements", "SQL statements executed against the control store", counts.statements),
            ("llm_store_transactions", "Store transactions ended (commit or rollback)", counts.transactions),
            (
                "llm_store_round_trips",
                "Round trips to the store on PostgreSQL: statements, BEGIN, COMMIT and pool pings",
                counts.round_trips,
            ),
        ):
            family = CounterMetricFamily(name, what)
            family.add_metric([], value)
            yield family


class _Retention(Collector):
    """llm_retained_streams, llm_retained_stream_bytes, llm_retained_streams_evicted_total."""

    def __init__(self, state: Callable[[], tuple[int, int, int]]) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        runs, size, evicted = self.state()
        what = "Finished generations whose events are kept for Resume"
        yield GaugeMetricFamily("llm_retained_streams", what, value=runs)
        yield GaugeMetricFamily("llm_retained_stream_bytes", "Serialized bytes of their events", value=size)
        yield CounterMetricFamily(
            "llm_retained_streams_evicted",
            "Finished generations forgotten before stream_retain_s to keep stream_retain_max_bytes",
            value=evicted,
        )


_SAMPLE = re.compile(r"^(llm_worker_\w+)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN)$")
_TYPE = re.compile(r"^# TYPE (llm_worker_\w+) (\w+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class _WorkerRelay(Collector):
    def __init__(self, workers: Callable[[], Iterable[tuple[str, str]]]) -> None:
        self.workers = workers

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for worker_id, url in self.workers():
            try:
                body = urllib.request.urlopen(url, timeout=1.0).read().decode()
            except OSError:
                continue  # a worker that is down has nothing to say; its health is in ListWorkers
            types: dict[str, str] = {}
            for line in body.splitlines():
                if m := _TYPE.match(line):
                    types[m.group(1)] = m.group(2)
                elif m := _SAMPLE.match(line):
                    name, value = m.group(1), float(m.group(3))
                    labels = dict(_LABEL.findall(m.group(2) or ""))
                    labels["worker"] = worker_id
                    family = families.get(name)
                    if family is None:
                        counter = types.get(name) == "counter" and name.endswith("_total")
                        cls = CounterMetricFamily if counter else GaugeMetricFamily
                        base = name[: -len("_total")] if counter else name
                        family = families[name] = cls(
                            base, f"relayed from Triton: {name}", labels=sorted(labels)
                        )
                    family.add_metric([labels[k] for k in sorted(labels)], value)  # type: ignore[attr-defined]
        yield from families.values()
