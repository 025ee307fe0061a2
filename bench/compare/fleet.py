"""The fleet shape in `python -m bench serve` (target `fleet`): two worker hosts and two frontends,
each its own process (`python -m serving worker|frontend`), over a fresh PostgreSQL schema, driven
at the same load as the single-process platform by a client that sends request i to frontend i % 2.

It also reports what the shared store costs: the frontends' /metrics counters of statements,
transactions and round trips (datastore/meter.py), read before and after the load and over an idle
stretch before it, so the figure per generation is split into the request path and the background
work every frontend does whatever the load (registry and catalog refreshes, its own registration).

On one machine this measures the fleet's overhead (more processes, the relay, a networked store),
not a speed-up: the two worker hosts share the same cores the single platform has to itself.
Prompts and outputs are never logged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from bench.compare.serve_setup import bench_tenants, toml
from bench.compare.targets import PlatformTarget
from bench.load.driver import Job, drive
from bench.load.metrics import Outcome
from bench.load.workload import Load
from bench.processes.server_process import LoopbackServer, free_port
from datastore.scratch import scratch_schema

POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
IDLE_S = 10.0  # the idle stretch over which the background rate is measured
ROOT = Path(__file__).resolve().parents[2]  # the checkout: bench/<room>/<module>.py


class RoundRobin:
    """Request i goes to frontend i % 2 (what a round-robin load balancer does)."""

    name = "fleet"

    def __init__(self, targets: list[PlatformTarget]) -> None:
        self.targets = targets

    async def generate(self, job: Job, out: Outcome) -> None:
        await self.targets[job.spec.index % len(self.targets)].generate(job, out)


@dataclass(slots=True, frozen=True)
class StoreCost:
    """The frontends' store counters over the load, per generation (PostgreSQL round trips)."""

    generations: int
    round_trips: float  # all told, per generation
    statements: float  # all told, per generation
    transactions: float  # all told, per generation
    background_per_s: float  # round trips a second the two frontends make with no load
    seconds: float  # seconds of load per generation

    @property
    def request_path(self) -> float:
        """Round trips per generation less the background's share of the load's duration."""
        return self.round_trips - self.background_per_s * self.seconds

    def note(self) -> str:
        return (
            f"Fleet store cost over {self.generations} generations: {self.round_trips:.1f} round trips, "
            f"{self.statements:.1f} statements and {self.transactions:.1f} transactions per generation "
            f"all told; with no load the two frontends make {self.background_per_s:.1f} round trips a "
            f"second (worker registry, catalog and registration refreshes), so the request path costs "
            f"about {self.request_path:.0f} round trips a generation (tests/lifecycle/test_store_cost.py "
            "counts 42: admission, attempt start, a usage batch, the sealed end)."
        )


@dataclass(slots=True, frozen=True)
class Role:
    server: LoopbackServer
    grpc_address: str  # a frontend's ("" for a worker host)
    metrics_url: str  # a frontend's /metrics, or the worker's Triton metrics


def counters(url: str) -> dict[str, float]:
    """The store counters and the finished-request count of one frontend's /metrics."""
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {"generations": 0.0}
    for line in body.splitlines():
        if m := re.match(r"^(llm_store_\w+)_total (\S+)$", line):
            values[m.group(1)] = float(m.group(2))
        elif m := re.match(r"^llm_request_duration_seconds_count\{[^}]*\} (\S+)$", line):
            values["generations"] += float(m.group(1))
    return values


def summed(urls: list[str]) -> dict[str, float]:
    total: dict[str, float] = {}
    for url in urls:
        for key, value in counters(url).items():
            total[key] = total.get(key, 0.0) + value
    return total


def fleet_config(
    args: argparse.Namespace, store_url: str, keys: list[str], model: dict[str, Any]
) -> dict[str, Any]:
    return {
        "frontend": {"interactive_queue_wait_s": args.queue_wait_s},
        "store": {"url": store_url},
        "fleet": {"frontend_key": secrets.token_hex(16), "worker_key": secrets.token_hex(16)},
        "tenants": bench_tenants(keys),
        "models": [model],
    }


def role(kind: str, name: str, base: dict[str, Any], work: Path) -> Role:
    """A fleet role as a child process, ready when its HTTP health answers 200 (a frontend's
    /healthz: a worker serves its model; a worker's Triton /v2/health/ready)."""
    cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    port, metrics, listen = free_port(), free_port(), f"127.0.0.1:{free_port()}"
    if kind == "frontend":
        cfg["frontend"] |= {"listen": listen, "metrics_listen": f"127.0.0.1:{metrics}"}
        cfg["http"] = {"listen": f"127.0.0.1:{port}"}
        cfg["fleet"] |= {"relay_listen": f"127.0.0.1:{free_port()}"}
        ready = "/healthz"
    else:
        cfg["triton"] = {"grpc_port": free_port(), "http_port": port, "metrics_port": metrics}
        cfg["triton"] |= {"exit_timeout_s": 5, "work_dir": str(work / name)}
        cfg["worker"] = {"name": name}
        ready, listen = "/v2/health/ready", ""
    path = work / f"{name}.toml"
    path.write_text(toml(cfg))
    argv = [sys.executable, "-m", "serving", kind, "--config", str(path)]
    server = LoopbackServer(name, argv, port, ready, work / f"{name}.log", cwd=ROOT)
    return Role(server, listen, f"http://127.0.0.1:{metrics}/metrics")


def model_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The `[[models]]` entry of each worker host: the single platform's (bench/compare/serve.py)."""
    model: dict[str, Any] = {"alias": "smollm2-135m", "quantization": args.quantization, "dtype": args.dtype}
    if args.budget is not None:
        model["max_num_batched_tokens"] = args.budget
    return model


def run_fleet(
    jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, keys: list[str]
) -> tuple[list[Outcome], StoreCost]:
    """A fresh fleet: start it, warm each frontend up, measure the idle store traffic, drive the
    load round robin, tear it down (PostgreSQL at $BENCH_POSTGRES_URL, a schema of its own)."""
    url, model = POSTGRES_URL, model_settings(args)
    with (
        scratch_schema(url, "bench") as schema,
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp,
        ExitStack() as stack,
    ):
        work = Path(tmp)
        base = fleet_config(args, f"{url}?options=-csearch_path%3D{schema}", keys, model)
        for name in ("w1", "w2"):
            stack.enter_context(role("worker", name, base, work).server)
        frontends = [role("frontend", name, base, work) for name in ("f1", "f2")]
        for frontend in frontends:
            stack.enter_context(frontend.server)
        return asyncio.run(_drive(frontends, jobs, load, args, warm_up, keys))


async def _drive(
    frontends: list[Role],
    jobs: list[Job],
    load: Load,
    args: argparse.Namespace,
    warm_up: Job,
    keys: list[str],
) -> tuple[list[Outcome], StoreCost]:
    urls = [f.metrics_url for f in frontends]
    channels = [grpc.aio.insecure_channel(f.grpc_address) for f in frontends]
    try:
        run_id = f"serve-fleet-{time.time_ns()}"
        targets = [PlatformTarget(channel, "smollm2-135m", keys, run_id) for channel in channels]
        for target in targets:
            await target.generate(warm_up, Outcome(-1, "warm-up", 0.0, warm_up.spec.output_tokens))
        idle_from = summed(urls)
        await asyncio.sleep(IDLE_S)
        before = summed(urls)
        started = time.monotonic()
        outcomes = await drive(RoundRobin(targets), jobs, load, args.seed, args.timeout)
        duration = time.monotonic() - started
        after = summed(urls)
    finally:
        for channel in channels:
            await channel.close()
    n = max(1.0, after["generations"] - before["generations"])
    background = (before["llm_store_round_trips"] - idle_from["llm_store_round_trips"]) / IDLE_S
    cost = StoreCost(
        generations=int(n),
        round_trips=(after["llm_store_round_trips"] - before["llm_store_round_trips"]) / n,
        statements=(after["llm_store_statements"] - before["llm_store_statements"]) / n,
        transactions=(after["llm_store_transactions"] - before["llm_store_transactions"]) / n,
        background_per_s=background,
        seconds=duration / n,
    )
    return outcomes, cost
