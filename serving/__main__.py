"""The platform's process roles, in the foreground until SIGINT/SIGTERM.

    python -m serving [--config path.toml]            `make serve`: Triton worker(s) and the frontend
    python -m serving frontend --config path.toml     a fleet frontend: no workers of its own
    python -m serving worker --config path.toml       a fleet worker host: tritonserver(s), registered

The fleet roles share one store (PostgreSQL) and the [fleet] secrets; docs/architecture.md says how
they find each other. A frontend drains on SIGTERM (its streams finish, within [fleet]
drain_timeout_s), then exits; a worker host ends its registrations, then stops its servers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from artifacts.manifest import remember_checks_in
from config.loader import ConfigError, load_config
from config.settings import LOCAL_ADMIN_KEY, LOCAL_API_KEY, LOCAL_TENANT, PlatformConfig
from serving.platform import Platform
from serving.triton_host import TritonError
from serving.workers import VERIFIED_DIR

if TYPE_CHECKING:  # each fleet role is imported when it runs: `make serve` starts sooner without them
    from serving.fleet_frontend import FleetFrontend
    from serving.worker_host import WorkerHost

log = logging.getLogger("serving")


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve(platform: Platform) -> None:
    stop = _stop_on_signals()
    async with platform.frontend() as (_, port):
        host = platform.cfg.frontend.listen.rpartition(":")[0]
        print(f"llm platform: gRPC frontend on {host}:{port}", flush=True)
        if platform.http_port:
            http_host = platform.cfg.http.listen.rpartition(":")[0]
            print(
                f"  HTTP API on http://{http_host}:{platform.http_port} (OpenAI-compatible: /v1)", flush=True
            )
        for alias, version_id in platform.registry.aliases.items():
            print(f"  model {alias} -> {version_id}", flush=True)
        if any(t.id == LOCAL_TENANT and LOCAL_API_KEY in t.api_keys for t in platform.cfg.tenants):
            print(f"  tenant {LOCAL_TENANT}: API key {LOCAL_API_KEY} (loopback only)", flush=True)
        if LOCAL_ADMIN_KEY in platform.cfg.frontend.admin_api_keys:
            print(f"  Admin service: key {LOCAL_ADMIN_KEY} (loopback only)", flush=True)
        for w in platform.workers:
            print(f"  worker {w.worker_id}: Triton on {w.server.grpc_url}", flush=True)
        print("  Ctrl-C stops everything", flush=True)
        await stop.wait()
        print("shutting down", flush=True)


async def _serve_frontend(frontend: FleetFrontend) -> None:
    stop = _stop_on_signals()
    await asyncio.to_thread(frontend.open)
    async with frontend.serve() as node:
        host = frontend.cfg.frontend.listen.rpartition(":")[0]
        print(f"llm frontend {frontend.frontend_id}: gRPC on {host}:{node.port}", flush=True)
        if node.http_port:
            print(f"  HTTP API on {frontend.cfg.http.listen.rpartition(':')[0]}:{node.http_port}", flush=True)
        print(f"  relay on port {frontend.relay_port}; metrics on port {node.metrics_port}", flush=True)
        workers = ", ".join(sorted(frontend.pool.workers))
        waiting = "none registered yet (health NOT_SERVING until a worker holds every alias)"
        print(f"  workers: {workers or waiting}", flush=True)
        await stop.wait()
        print("draining", flush=True)
        await frontend.drain()
    print("stopped", flush=True)


async def _serve_worker(host: WorkerHost) -> None:
    stop = _stop_on_signals()
    for w in host.workers:
        print(f"llm worker {w.worker_id}: Triton on {w.advertised}", flush=True)
    await host.serve(stop)
    print("stopping", flush=True)


def _run(role: str | None, cfg: PlatformConfig) -> int:
    remember_checks_in(VERIFIED_DIR)  # artifact files verified before and unchanged are not hashed again
    if role == "frontend":
        from serving.fleet_frontend import FleetFrontend

        frontend = FleetFrontend(cfg)
        try:
            asyncio.run(_serve_frontend(frontend))
        finally:
            frontend.close()
        return 0
    if role == "worker":
        from serving.worker_host import WorkerHost

        host = WorkerHost(cfg)
        try:
            host.start()
            asyncio.run(_serve_worker(host))
        finally:
            host.stop()
        return 0
    platform = Platform(cfg)
    try:
        platform.start_workers()
        asyncio.run(_serve(platform))
    finally:
        platform.stop_workers()
    return 0


def main() -> int:
    if sys.argv[1:2] == ["store-ha"]:  # the one-machine HA control store (serving/store_ha/)
        from serving.store_ha.__main__ import main as store_ha

        return store_ha(sys.argv[2:])
    parser = argparse.ArgumentParser(description="Run the LLM platform, or one role of its fleet.")
    parser.add_argument("role", nargs="?", choices=("frontend", "worker"), help="a fleet role (default: all)")
    parser.add_argument("--config", type=Path, default=None, help="TOML config (default: built-in)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return _run(args.role, load_config(args.config))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except TritonError as e:  # a port in use, or a worker that would not start
        print(f"worker error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
