"""Reading the worker's metrics from Triton's metrics endpoint."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Callable

from serving.platform import Platform

PUBLISH_S = 0.6  # the worker republishes its gauges every 0.5 s while busy


def scrape(platform: Platform) -> dict[str, float]:
    assert platform.triton is not None
    return scrape_url(f"http://127.0.0.1:{platform.triton.metrics_port}/metrics")


def scrape_url(url: str) -> dict[str, float]:
    """A worker's `llm_worker_*` figures from its Triton metrics endpoint, keyed `name:state`."""
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {}
    for line in body.splitlines():
        match = re.match(r"^(llm_worker_\w+)(?:\{([^}]*)\})? ([0-9.e+-]+)$", line)
        if match:
            state = re.search(r'state="(\w+)"', match.group(2) or "")
            values[match.group(1) + (f":{state.group(1)}" if state else "")] = float(match.group(3))
    return values


HANG_S = 120.0  # how long the waits below poll before giving up: a hang guard, not a deadline


async def wait_until(
    platform: Platform, predicate: Callable[[dict[str, float]], bool], timeout_s: float = HANG_S
) -> dict[str, float]:
    """Polls until `predicate` holds on a scrape; returns the last scrape (checked by the caller)."""
    values = scrape(platform)
    for _ in range(int(timeout_s / 0.1)):
        if predicate(values):
            break
        await asyncio.sleep(0.1)
        values = scrape(platform)
    return values


def _idle(values: dict[str, float]) -> bool:
    return (
        values.get("llm_worker_kv_blocks:used") == 0
        and values.get("llm_worker_sequences:running") == 0
        and values.get("llm_worker_sequences:waiting") == 0
    )


async def wait_until_idle(platform: Platform, timeout_s: float = HANG_S) -> dict[str, float]:
    """Polls until no sequence is running or waiting and no KV block is referenced, on scrapes
    spanning PUBLISH_S: a busy worker republishes its gauges at least that often, so a stale idle
    reading (say, before its first publish) cannot pass. Returns the last scrape."""
    assert platform.triton is not None
    return await wait_until_idle_at(f"http://127.0.0.1:{platform.triton.metrics_port}/metrics", timeout_s)


async def wait_until_idle_at(url: str, timeout_s: float = HANG_S) -> dict[str, float]:
    """`wait_until_idle` for the worker whose Triton metrics endpoint is `url`; fails the test when
    the worker is still busy after `timeout_s` (a caller would go on with another's work in it)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    idle_since: float | None = None
    while True:
        values = scrape_url(url)
        now = asyncio.get_running_loop().time()
        idle_since = (idle_since or now) if _idle(values) else None
        if idle_since is not None and now - idle_since >= PUBLISH_S:
            return values
        assert now < deadline, f"the worker is still busy after {timeout_s:.0f} s: {values}"
        await asyncio.sleep(0.1)


def frontend_scrape(platform: Platform) -> dict[str, float]:
    """The frontend's metrics endpoint, keyed `name{labels}` as exposed."""
    url = f"http://127.0.0.1:{platform.metrics_port}/metrics"
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    return values
