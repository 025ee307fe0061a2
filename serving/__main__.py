"""`make serve`: runs the Triton worker(s) and the frontend in the foreground until SIGINT/SIGTERM.

Run: `python -m serving [--config path.toml]`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from frontend.config import LOCAL_ADMIN_KEY, LOCAL_API_KEY, LOCAL_TENANT, ConfigError, load_config
from serving.platform import Platform
from serving.triton_host import TritonError

log = logging.getLogger("serving")


async def _serve(platform: Platform) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
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


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the LLM platform in the foreground.")
    parser.add_argument("--config", type=Path, default=None, help="TOML config (default: built-in)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        platform = Platform(load_config(args.config))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    try:
        platform.start_workers()
        asyncio.run(_serve(platform))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except TritonError as e:  # a port in use, or a worker that would not start
        print(f"worker error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        platform.stop_workers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
