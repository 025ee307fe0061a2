"""How `python -m bench serve` runs a load against each in-process target: the platform over gRPC,
over its OpenAI-compatible HTTP API, over both at once, and transformers one request at a time.
(The platform in its own process tree: bench/compare/platform_process.py; the peers: bench/peers/peers.py.)"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from bench.compare.serve_setup import KEYS, MODEL, run_config
from bench.load.driver import Job, drive
from bench.load.metrics import Outcome
from bench.load.workload import Load
from config.settings import PlatformConfig
from serving.platform import start_platform


def run_platform(
    jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, notes: list[str]
) -> list[Outcome]:
    """A fresh platform: start it, warm it up with one request, drive the load, tear it down; notes
    gets the peak RSS of its processes (bench/processes/pss.py) over the run."""
    from bench.compare.targets import PlatformTarget
    from bench.processes.pss import PeakPss

    async def serve(cfg: PlatformConfig, work: Path) -> list[Outcome]:
        async with (
            start_platform(cfg, work_dir=work) as running,
            grpc.aio.insecure_channel(running.address) as channel,
        ):
            run_id = f"serve-{time.time_ns()}"
            target = PlatformTarget(channel, MODEL, KEYS, run_id)
            await target.generate(warm_up, Outcome(-1, "warm-up", 0.0, warm_up.spec.output_tokens))
            return await drive(target, jobs, load, args.seed, args.timeout)

    with tempfile.TemporaryDirectory(prefix="bench-serve-") as work, PeakPss(os.getpid()) as peak:
        outcomes = asyncio.run(serve(run_config(Path(work), args), Path(work)))
    notes.append(
        f"platform @ {load.label}: peak memory {peak.mib:.0f} MiB (PSS of this process, which holds the "
        f"frontend and the load client, and of tritonserver and its stubs: {peak.breakdown()})"
    )
    print(notes[-1], flush=True)
    return outcomes


def run_platform_http(jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job) -> list[Outcome]:
    """As run_platform, over the platform's OpenAI-compatible HTTP API."""
    from bench.compare.targets import platform_http_target

    async def serve(cfg: PlatformConfig, work: Path) -> list[Outcome]:
        target = None
        try:
            async with start_platform(cfg, work_dir=work, http_listen="127.0.0.1:0") as running:
                run_id = f"serve-http-{time.time_ns()}"
                target = platform_http_target(f"http://{running.http_address}", MODEL, KEYS, run_id)
                await target.generate(warm_up, Outcome(-1, "warm-up", 0.0, warm_up.spec.output_tokens))
                return await drive(target, jobs, load, args.seed, args.timeout)
        finally:  # after the platform stopped: no client thread is left waiting on a stream
            if target is not None:
                target.close()

    with tempfile.TemporaryDirectory(prefix="bench-serve-") as work:
        return asyncio.run(serve(run_config(Path(work), args), Path(work)))


def run_platform_split(jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job) -> list[Outcome]:
    """One platform, its gRPC and HTTP APIs driven at once (bench/compare/targets.py SplitTarget)."""
    from bench.compare.targets import PlatformTarget, SplitTarget, platform_http_target

    async def serve(cfg: PlatformConfig, work: Path) -> list[Outcome]:
        over_http = None
        try:
            async with (
                start_platform(cfg, work_dir=work, http_listen="127.0.0.1:0") as running,
                grpc.aio.insecure_channel(running.address) as channel,
            ):
                run_id = f"serve-split-{time.time_ns()}"
                over_grpc = PlatformTarget(channel, MODEL, KEYS, run_id)
                over_http = platform_http_target(f"http://{running.http_address}", MODEL, KEYS, run_id)
                for warm in (over_grpc, over_http):
                    await warm.generate(warm_up, Outcome(-1, "warm-up", 0.0, warm_up.spec.output_tokens))
                return await drive(SplitTarget(over_grpc, over_http), jobs, load, args.seed, args.timeout)
        finally:
            if over_http is not None:
                over_http.close()

    with tempfile.TemporaryDirectory(prefix="bench-serve-") as work:
        return asyncio.run(serve(run_config(Path(work), args), Path(work)))


def run_transformers(jobs: list[Job], load: Load, args: argparse.Namespace, hf: Any) -> list[Outcome]:
    from bench.compare.targets import SequentialTransformers

    target = SequentialTransformers(hf)
    try:
        return asyncio.run(drive(target, jobs, load, args.seed, args.timeout))
    finally:
        target.close()
