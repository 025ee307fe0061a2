"""The engine behind Triton, seen over gRPC: capacity refusal, tenant-scoped prefix caching, and
the worker's metrics on Triton's metrics endpoint."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import grpc
import pytest

from bench.processes.pss import children
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_ALPHA, KEY_BETA, auth, interactive_allowance
from tests.e2e.test_errors import expect_error
from tests.e2e.test_generate import assert_worker_is_free
from tests.e2e.worker_metrics import scrape, wait_until_idle
from tests.engine.helpers import LONG_TEXT

Reason = pb.Finished.Reason


async def test_request_whose_reservation_does_not_fit_is_unavailable(channel, platform: Platform) -> None:
    await wait_until_idle(platform)  # earlier tests' cancelled requests leave at the next step
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = stub.Generate(
        pb.GenerateRequest(
            model="smollm2-135m",
            prompt="Count:",
            max_output_tokens=6000,
            sampling=pb.SamplingParams(ignore_eos=True),
        ),
        metadata=auth(),
    )
    first = await hog.read()
    assert first.HasField("started")  # 376 of the 600 blocks, most of alpha's 450 (75%)
    try:
        with interactive_allowance(platform, 0.5):  # how long it may wait for room
            error = await expect_error(
                lambda: stub.Generate(
                    pb.GenerateRequest(model="smollm2-135m", prompt="Hello", max_output_tokens=2000),
                    metadata=auth(),
                ),
                grpc.StatusCode.UNAVAILABLE,
                "WORKER_CAPACITY",
            )
        assert "needs 126 KV blocks" in (error.details() or "")
    finally:
        hog.cancel()
    await wait_until_idle(platform)  # the abandoned hog is cancelled after the grace period
    await assert_worker_is_free(channel)  # the refused request left nothing behind


async def test_prefix_cache_is_scoped_to_the_tenant(channel, platform: Platform) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    prompt = LONG_TEXT[:2400]

    async def run(key: str) -> list[pb.GenerationEvent]:
        req = pb.GenerateRequest(model="smollm2-135m", prompt=prompt, max_output_tokens=6)
        return [e async for e in stub.Generate(req, metadata=auth(key))]

    first, second, other = await run(KEY_ALPHA), await run(KEY_ALPHA), await run(KEY_BETA)
    n = first[0].started.input_tokens
    assert n > 400
    assert second[0].started.cached_input_tokens >= n - 16
    assert other[0].started.cached_input_tokens == 0
    assert second[-1].finished.usage.cached_input_tokens == second[0].started.cached_input_tokens
    ids = [
        [t for e in events if e.HasField("delta") for t in e.delta.token_ids]
        for events in (first, second, other)
    ]
    assert ids[0] == ids[1] == ids[2]


async def test_worker_metrics_move_with_traffic(channel, platform: Platform) -> None:
    before = scrape(platform)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(model="smollm2-135m", prompt=LONG_TEXT[:600], max_output_tokens=4)
    for _ in range(2):
        _ = [e async for e in stub.Generate(req, metadata=auth())]
    after = await wait_until_idle(platform)
    for name in ("llm_worker_kv_blocks:used", "llm_worker_kv_blocks:free", "llm_worker_kv_blocks:cached"):
        assert name in after
    assert after["llm_worker_kv_blocks:used"] + after["llm_worker_kv_blocks:free"] + after[
        "llm_worker_kv_blocks:cached"
    ] == pytest.approx(600)
    assert after["llm_worker_kv_blocks:used"] == 0  # everything finished: nothing referenced
    assert after["llm_worker_kv_blocks:cached"] > 0
    assert after["llm_worker_prefix_hit_tokens_total"] > before.get("llm_worker_prefix_hit_tokens_total", 0)
    assert after["llm_worker_prefix_query_tokens_total"] > before.get(
        "llm_worker_prefix_query_tokens_total", 0
    )
    assert after["llm_worker_steps_total"] > before.get("llm_worker_steps_total", 0)
    assert after["llm_worker_sequences:running"] == 0 and after["llm_worker_sequences:waiting"] == 0


async def test_the_worker_runs_the_engines_kernels(platform: Platform) -> None:
    """The served model steps through engine/csrc's fused kernels, not eager PyTorch (set-up built
    them for this machine; the worker logs what it loaded)."""
    from engine import kernels

    assert platform.triton is not None
    log = platform.triton.log_path.read_text(errors="replace")
    assert f"kernels {kernels.isa()} on " in log  # the same build the test process loaded
    assert "eager steps" not in log
    assert " KV blocks of 16 (float32)" in log  # kv_cache_dtype "auto": the fp32 model's own dtype


async def test_the_worker_names_its_threads_and_reports_its_schedulers_time(
    channel, platform: Platform
) -> None:
    """top -H and `python -m bench platform-profile` tell the worker's threads apart by these names."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(model="smollm2-135m", prompt="Hello", max_output_tokens=4)
    events = [e async for e in stub.Generate(req, metadata=auth())]
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    assert platform.triton is not None and platform.triton.process is not None
    names: set[str] = set()
    for stub_pid in children(platform.triton.process.pid):  # the Python backend's stubs
        names |= {(task / "comm").read_text().strip() for task in Path(f"/proc/{stub_pid}/task").iterdir()}
    assert {"llm-engine", "llm-outbox"} <= names
    if len(os.sched_getaffinity(0)) > 1:  # the kernels' pool has a helper a CPU beyond the caller's
        assert "llm-pool" in names
    url = f"http://127.0.0.1:{platform.triton.metrics_port}/metrics"
    body = urllib.request.urlopen(url, timeout=10).read()
    parts = set(re.findall(r'llm_worker_loop_seconds_total\{[^}]*part="(\w+)"', body.decode()))
    assert parts == {"cancel_check", "schedule", "model", "respond"}
