"""Process roles and supervision: the all-in-one platform (`make serve`), its Triton workers and their
supervisor. `start_platform` is the public way to run one from Python (benchmarks, tools)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from frontend.config import PlatformConfig
from serving.platform import Platform
from serving.workers import artifact_for

__all__ = ["Platform", "RunningPlatform", "artifact_for", "start_platform"]


@dataclass(slots=True, frozen=True)
class RunningPlatform:
    address: str  # host:port of the gRPC frontend
    platform: Platform


@asynccontextmanager
async def start_platform(
    cfg: PlatformConfig, work_dir: Path | None = None, listen: str = "127.0.0.1:0"
) -> AsyncIterator[RunningPlatform]:
    """Starts the workers and the frontend (what `make serve` runs), yields its address, and stops
    all of it on exit."""
    platform = Platform(cfg, work_dir=work_dir)
    await asyncio.to_thread(platform.start_workers)
    try:
        async with platform.frontend(listen) as (_, port):
            host = listen.rpartition(":")[0] or "127.0.0.1"
            yield RunningPlatform(f"{host}:{port}", platform)
    finally:
        await asyncio.to_thread(platform.stop_workers)
