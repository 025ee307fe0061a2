"""Frontends find the workers in the store and route by the usual rules; two frontends racing for
one worker's last KV blocks never overcommit it: the worker refuses one and that frontend moves on
to the other worker (issue 13, points 1 and 2)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from bench.load.prompts import artifact_encoder, exact_prompt
from control.workers import registered_workers
from datastore.store import Store
from llm.v1 import admin_pb2, admin_pb2_grpc
from tests.e2e.fleet.client import Reason, generate, read_rest, request
from tests.e2e.fleet.conftest import KV_BLOCKS
from tests.e2e.fleet.harness import Fleet, admin
from tests.e2e.worker_metrics import scrape_url, wait_until_idle_at

pytestmark = pytest.mark.fleet
# 29 blocks of 16: two never fit one 40-block pool, one fits a tenant's 75% share (30); 160 decode
# steps keep the two running side by side for many of the watcher's scrapes
PROMPT_TOKENS, OUTPUT_TOKENS = 300, 160


async def test_frontends_route_to_the_workers_the_store_registers(
    whole_fleet: Fleet, channels: tuple[grpc.aio.Channel, grpc.aio.Channel], fleet_store: Store
) -> None:
    for channel in channels:
        listed = await admin_pb2_grpc.AdminStub(channel).ListWorkers(
            admin_pb2.ListWorkersRequest(), metadata=admin()
        )
        by_id = {w.worker_id: w for w in listed.workers}
        assert set(by_id) == {w.worker_id for w in whole_fleet.workers}
        for role in whole_fleet.workers:
            worker = by_id[role.worker_id]
            assert (worker.address, worker.healthy, worker.draining) == (role.address, True, False)
            assert worker.free_kv_blocks == KV_BLOCKS and len(worker.loaded_versions) == 1
        events = await read_rest(generate(channel, request(4)))
        assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    with fleet_store.transaction() as session:
        live = registered_workers(session, now=datetime.now(UTC))
    assert {w.worker_id for w in live} == {w.worker_id for w in whole_fleet.workers}
    # each pool as configured (its prefix-cache summary, `cache`, is the routing tests' concern)
    assert all([(p.kv_blocks, p.block_size) for p in w.pools.values()] == [(KV_BLOCKS, 16)] for w in live)


async def test_two_frontends_racing_for_one_workers_last_blocks_never_overcommit_it(
    whole_fleet: Fleet, channels: tuple[grpc.aio.Channel, grpc.aio.Channel], artifact_dir: Path
) -> None:
    """Each frontend estimates only its own reservations, so both pick the same worker (the most
    free blocks, ties by id). The worker admits one and refuses the other, which runs on the
    other worker: both are served, side by side, and neither worker holds more than its pool."""
    encode = artifact_encoder(artifact_dir)
    requests = [request(OUTPUT_TOKENS, exact_prompt(f"race/{i}", PROMPT_TOKENS, encode)) for i in range(2)]
    urls = [w.metrics_url for w in whole_fleet.workers]
    both_busy = asyncio.Event()
    most_used = {url: 0.0 for url in urls}

    async def watch() -> None:
        while not both_busy.is_set():
            scrapes = [await asyncio.to_thread(scrape_url, url) for url in urls]
            for url, values in zip(urls, scrapes, strict=True):
                most_used[url] = max(most_used[url], values.get("llm_worker_kv_blocks:used", 0.0))
            running = [v.get("llm_worker_sequences:running", 0) >= 1 for v in scrapes]
            held = [v.get("llm_worker_kv_blocks:used", 0) >= 10 for v in scrapes]  # not a canary's block
            if all(running) and all(held):
                both_busy.set()
            await asyncio.sleep(0.1)

    watcher = asyncio.create_task(watch())
    try:
        calls = [generate(channel, req) for channel, req in zip(channels, requests, strict=True)]
        results = await asyncio.gather(*(read_rest(call) for call in calls))
        for events in results:
            assert events[0].started.input_tokens == PROMPT_TOKENS
            assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
            assert events[-1].finished.usage.output_tokens == OUTPUT_TOKENS
    finally:
        watcher.cancel()
    assert both_busy.is_set(), most_used  # they ran side by side, one on each worker
    assert all(used <= KV_BLOCKS for used in most_used.values()), most_used
    for url in urls:
        idle = await wait_until_idle_at(url, timeout_s=120)
        assert idle["llm_worker_kv_blocks:used"] == 0
