"""A real platform for end-to-end tests: `tritonserver` with the CPU model, and the frontend (gRPC,
and HTTP on the same calls), on free loopback ports, torn down at the end of the session."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from config.loader import parse_config
from config.settings import PlatformConfig
from contracts.tier import INTERACTIVE
from serving.platform import Platform

KEY_ALPHA = "key-alpha"
KEY_BETA = "key-beta"
KEY_GAMMA = "key-gamma"  # a tenant allowed one generation at a time
KEY_DELTA = "key-delta"  # a tenant with small token budgets
KEY_FUZZ = "key-fuzz"  # the fuzz suite's own tenant, so its load never touches the others' quotas
KEY_SDK = "key-sdk"  # the SDKs' tests (tests/e2e/test_sdk_*.py)
KEY_SDK_SOLO = "key-sdk-solo"  # ... and their quota refusals: one generation at a time
KEY_ADMIN = "key-admin"  # Admin, over gRPC and HTTP: tenants and keys created at run time (test_tenancy*.py)


def platform_config(store: Path | None = None) -> PlatformConfig:
    return parse_config(
        {
            # queue allowance: generous here (tests lower it where they test the deadline), so that a
            # slow machine (an fp32 prefill of 8 ms a token on a 2-core AVX2 host) queues, not refuses
            "frontend": {
                "metrics_listen": "127.0.0.1:0",
                "disconnect_grace_s": 0.5,
                "stream_max_events": 64,
                "interactive_queue_wait_s": 300.0,
                "slow_consumer_timeout_s": 2.0,
                "converse_window_events": 8,
                "admin_api_keys": [KEY_ADMIN],
            },
            "http": {"listen": "127.0.0.1:0"},
            "store": {"url": f"sqlite:///{store}" if store else "sqlite:///var/test-control.sqlite"},
            "tenants": [
                {"id": "alpha", "api_keys": [KEY_ALPHA]},
                {"id": "beta", "api_keys": [KEY_BETA], "weight": 2.0},
                {"id": "gamma", "api_keys": [KEY_GAMMA], "max_concurrent_generations": 1},
                {"id": "fuzz", "api_keys": [KEY_FUZZ]},
                {"id": "sdk", "api_keys": [KEY_SDK]},
                {"id": "sdk-solo", "api_keys": [KEY_SDK_SOLO], "max_concurrent_generations": 1},
                {
                    "id": "delta",
                    "api_keys": [KEY_DELTA],
                    "output_tokens_per_minute": 100,
                    "max_queued_tokens": 250,
                },
            ],
            "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0, "exit_timeout_s": 5},
            "worker": {"name": "local"},  # workers local-0, local-1, ... (by default: host and port)
            # 600 blocks of 16 tokens: one near-context-length request leaves too little for another
            "models": [{"alias": "smollm2-135m", "kv_cache_blocks": 600, "max_num_batched_tokens": 256}],
        }
    )


@contextmanager
def interactive_allowance(platform: Platform, seconds: float) -> Iterator[None]:
    """Runs with another interactive queue allowance (the deadline and the wait for room)."""
    assert platform.manager is not None
    allowances = platform.manager.dispatcher.queue_wait_s
    saved = dict(allowances)
    allowances[INTERACTIVE] = seconds
    try:
        yield
    finally:
        allowances.update(saved)


@contextmanager
def disconnect_grace(platform: Platform, seconds: float) -> Iterator[None]:
    """Runs with another disconnect grace: a test that disconnects and resumes on purpose must not
    depend on coming back within the platform's 0.5 s on a busy machine."""
    assert platform.manager is not None
    live = platform.manager.live
    saved, live.grace_s = live.grace_s, seconds
    try:
        yield
    finally:
        live.grace_s = saved


def auth(key: str = KEY_ALPHA) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


SPANS = InMemorySpanExporter()  # every span of the session platform's frontend


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory, artifact_dir: Path) -> Iterator[Platform]:
    # The workers' OpenMP threads wait passively: the suite runs on machines shared with other work,
    # where spinning threads make every step several times slower and the tests that wait on
    # deadlines fail (docs/architecture.md, "Threads on a worker"). Serving keeps libgomp's default.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    work = tmp_path_factory.mktemp("triton")
    p = Platform(
        platform_config(work / "control.sqlite"), work_dir=work, span_processor=SimpleSpanProcessor(SPANS)
    )
    p.start_workers()
    yield p
    p.stop_workers()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def frontend_port(platform: Platform) -> AsyncIterator[int]:
    async with platform.frontend("127.0.0.1:0") as (_, port):
        yield port


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def http_url(platform: Platform, frontend_port: int) -> str:
    """The base URL of the session frontend's HTTP API (served beside its gRPC port)."""
    assert platform.http_port
    return f"http://127.0.0.1:{platform.http_port}"


@pytest_asyncio.fixture(loop_scope="session")
async def channel(frontend_port: int) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{frontend_port}") as ch:
        yield ch
