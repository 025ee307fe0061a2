"""The serving side: process roles and what runs while the platform serves.

platform.py    the all-in-one platform (`make serve`): workers, frontend, supervisor
fleet_frontend.py  the fleet's frontend role (`python -m serving frontend`): no workers of its own
worker_host.py the fleet's worker-host role (`python -m serving worker`): Triton workers, registered
frontend_node.py   one frontend's servers and use cases, whatever feeds its worker pool
worker_set.py  the Triton workers one process tree starts, loads and records READY
workers.py     this machine's Triton workers: ids, ports, and what their engines are started with
supervisor.py  restarts dead or hung workers, heartbeats the worker registry
probes.py      what tells that a running worker failed: identity, readiness, canaries
triton.py      runs `tritonserver`: start, identity, model load/unload, stop
triton_host.py locates it in the nvidia-pytriton wheel; its backend folder, ports, environment
deployment.py  one model version as a Triton model: its settings, and the model repository
worker/        the CPU worker inside Triton's Python-backend stub: the adapter over engine/

`start_platform` is the public way to run the platform from Python (benchmarks, tools).

Importing this package imports none of them: Triton's Python-backend stub imports serving/worker/
only, and would otherwise spend ~0.6 s of every model load importing the frontend and SQLAlchemy."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontend.settings import PlatformConfig
    from serving.platform import Platform
    from serving.workers import artifact_for

__all__ = ["Platform", "RunningPlatform", "artifact_for", "start_platform"]
_LAZY = {"Platform": "serving.platform", "artifact_for": "serving.workers"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'serving' has no attribute {name!r}")


@dataclass(slots=True, frozen=True)
class RunningPlatform:
    address: str  # host:port of the gRPC frontend
    platform: Platform
    http_address: str = ""  # host:port of the HTTP API ("" when it serves none)


@asynccontextmanager
async def start_platform(
    cfg: PlatformConfig, work_dir: Path | None = None, listen: str = "127.0.0.1:0", http_listen: str = ""
) -> AsyncIterator[RunningPlatform]:
    """Starts the workers and the frontend (what `make serve` runs), yields its addresses, and stops
    all of it on exit. HTTP is served only when `http_listen` names an address ("127.0.0.1:0")."""
    from serving.platform import Platform

    platform = Platform(cfg, work_dir=work_dir)
    await asyncio.to_thread(platform.start_workers)
    try:
        async with platform.frontend(listen, http_listen) as (_, port):
            host = listen.rpartition(":")[0] or "127.0.0.1"
            http_host = http_listen.rpartition(":")[0] or "127.0.0.1"
            http = f"{http_host}:{platform.http_port}" if http_listen else ""
            yield RunningPlatform(f"{host}:{port}", platform, http)
    finally:
        await asyncio.to_thread(platform.stop_workers)
