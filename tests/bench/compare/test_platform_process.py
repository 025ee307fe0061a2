"""bench serve's platform-process target: the real platform (`python -m serving --config`) in its own
process tree, driven over gRPC from the benchmark's process, its peak memory noted."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bench.compare.platform_process import run_platform_process
from bench.compare.serve import warm_up_job
from bench.load.driver import Job
from bench.load.workload import Load, RequestSpec


async def test_the_platform_serves_the_load_from_its_own_process(tmp_path: Path) -> None:
    warm = warm_up_job(0)
    jobs = [
        Job(RequestSpec(i, "interactive", 0, None, 32, 3), warm.prompt, warm.prompt_ids) for i in range(2)
    ]
    args = argparse.Namespace(
        queue_wait_s=600.0, budget=64, platform_workers=1, quantization="none", dtype="float32",
        kv_cache_dtype="auto", kv_cache_blocks=0, out=tmp_path, seed=0, timeout=300.0,
    )  # fmt: skip
    notes: list[str] = []
    # on a thread: its asyncio.run() must not unset this thread's event loop, which the session's
    # other tests share
    outcomes = await asyncio.to_thread(run_platform_process, jobs, Load(concurrency=2), args, warm, notes)
    assert sorted(o.index for o in outcomes) == [0, 1]
    assert all(o.error is None and o.output_tokens == 3 for o in outcomes)
    assert notes and "PSS of the platform's process tree" in notes[0] and "tritonserver" in notes[0]
    assert "Ctrl-C stops everything" in (tmp_path / "platform-process.log").read_text()  # its own log
