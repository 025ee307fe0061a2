"""Reading the worker's metrics from Triton's metrics endpoint."""

from __future__ import annotations

import asyncio
import re
import urllib.request

from frontend.platform import Platform


def scrape(platform: Platform) -> dict[str, float]:
    assert platform.triton is not None
    url = f"http://127.0.0.1:{platform.triton.metrics_port}/metrics"
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {}
    for line in body.splitlines():
        match = re.match(r"^(llm_worker_\w+)(?:\{([^}]*)\})? ([0-9.e+-]+)$", line)
        if match:
            state = re.search(r'state="(\w+)"', match.group(2) or "")
            values[match.group(1) + (f":{state.group(1)}" if state else "")] = float(match.group(3))
    return values


async def wait_until_idle(platform: Platform, timeout_s: float = 30.0) -> dict[str, float]:
    """Polls until no sequence is running or waiting and no KV block is referenced; returns the
    last scrape (the worker publishes its gauges when it goes idle)."""
    values = scrape(platform)
    for _ in range(int(timeout_s / 0.1)):
        idle = (
            values.get("llm_worker_kv_blocks:used") == 0
            and values.get("llm_worker_sequences:running") == 0
            and values.get("llm_worker_sequences:waiting") == 0
        )
        if idle:
            break
        await asyncio.sleep(0.1)
        values = scrape(platform)
    return values
