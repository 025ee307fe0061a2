"""The frontend's Prometheus-format metrics endpoint (`[frontend] metrics_listen`).

Each platform owns its own registry, so several frontends in one process (the tests) never mix
their figures. Names and units are documented in the README's metrics table.
"""

from __future__ import annotations

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

LAG_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


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
        self._server: WSGIServer | None = None

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
