"""What a request costs each part of the platform, beside the model: `python -m serving` in its own
process tree (as `make serve` runs it), driven over gRPC with bursts of --requests requests sent
together (distinct prompts of --prompt tokens, --output tokens each, batch tier), --rounds times.

Per request, for each burst: the CPU milliseconds of each part of the machine (bench/processes/proc_cpu.py:
the frontend process, tritonserver, the worker's engine loop, kernel pool and outbox threads, and
this benchmark's own client), and the control-store statements, transactions and round trips the
frontend counted (`llm_store_*_total`). With one output token, most of the frontend's share is
admission, dispatch and the sealed end, not streaming; `python -m bench platform-profile` has the
cost a decode step. A request refused or failed stops the benchmark (its error is raised). Timing
only: never a test.

    python -m bench request-cost [--requests 64] [--output 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time

import grpc

from bench.compare.serve_setup import KEYS, MODEL
from bench.compare.targets import PlatformTarget
from bench.load.metrics import Outcome
from bench.platform_profile import make_jobs, platform_args, running_platform, scrape
from bench.processes.proc_cpu import ROLES, tree_cpu

_STORE = re.compile(r"^llm_store_(statements|transactions|round_trips)_total ([0-9.eE+-]+)$", re.M)


def store_work(text: str) -> dict[str, float]:
    """The frontend's control-store counters in a /metrics body: statements, transactions, round trips."""
    return {name: float(value) for name, value in _STORE.findall(text)}


async def burst(
    target: PlatformTarget, args: argparse.Namespace, url: str, pid: int, first: int
) -> dict[str, float]:
    """One burst of --requests requests sent together: per request, CPU ms by part and store work."""
    jobs = make_jobs(args.requests, args.prompt, args.output, True, first)
    cpu, store, client = tree_cpu(pid), store_work(scrape(url)), time.process_time()
    start = time.perf_counter()
    outcomes = [Outcome(j.spec.index, "batch", start, args.output) for j in jobs]
    await asyncio.gather(*(target.generate(j, o) for j, o in zip(jobs, outcomes, strict=True)))
    wall = time.perf_counter() - start
    client = time.process_time() - client
    cpu_after, store_after = tree_cpu(pid), store_work(scrape(url))
    n = args.requests
    out = {"wall s": wall, **{role: (cpu_after[role] - cpu[role]) * 1000 / n for role in ROLES}}
    out["load client"] = client * 1000 / n
    out |= {name: (store_after[name] - store[name]) / n for name in store}
    return out


async def drive(listen: str, url: str, pid: int, args: argparse.Namespace) -> list[dict[str, float]]:
    async with grpc.aio.insecure_channel(listen) as channel:
        target = PlatformTarget(channel, MODEL, KEYS, f"request-cost-{time.time_ns()}")
        warm = make_jobs(4, args.prompt, 2, True, 100_000)
        await asyncio.gather(*(target.generate(j, Outcome(-1, "warm-up", 0.0, 2)) for j in warm))
        rounds = []
        for r in range(args.rounds):
            rounds.append(await burst(target, args, url, pid, r * args.requests))
            print(f"burst {r + 1}: {rounds[-1]['frontend']:.1f} frontend CPU ms a request", flush=True)
        return rounds


def report(rounds: list[dict[str, float]], args: argparse.Namespace) -> str:
    heads = ["wall s", "frontend", "tritonserver", "engine loop", "kernel pool", "outbox", "worker other"]
    heads += ["load client", "statements", "transactions", "round_trips"]
    lines = [
        f"{args.requests} requests at once, prompts of {args.prompt}, {args.output} output token(s), "
        f"{args.quantization}: per request, CPU ms by part and control-store work (wall s: the burst)",
        "| burst | " + " | ".join(heads) + " |",
        "|" + " ---: |" * (len(heads) + 1),
    ]
    for i, r in enumerate(rounds, 1):
        lines.append(f"| {i} | " + " | ".join(f"{r.get(h, 0.0):.1f}" for h in heads) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64, help="requests a burst sends together")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens of each request")
    parser.add_argument("--output", type=int, default=1, help="output tokens of each request")
    parser.add_argument("--rounds", type=int, default=3)
    args = platform_args(parser, kv_cache_blocks=2048)
    with running_platform(args, args.out / "request-cost.log") as (listen, url, pid):
        rounds = asyncio.run(drive(listen, url, pid, args))
    print(report(rounds, args))
    record = {"args": vars(args) | {"out": str(args.out)}, "bursts": rounds}
    (args.out / "request-cost.json").write_text(json.dumps(record, indent=2))
    return 0
