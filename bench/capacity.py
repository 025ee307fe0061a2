"""`python -m bench capacity`: one worker's curve under the mixed workload, and what a stated demand
needs (bench/capacity_plan.py does the arithmetic).

The platform runs as `make serve` does (one frontend, one worker: `python -m serving` in a process
tree of its own, over SQLite). Load rises level by level: Poisson arrivals of the `mixed` workload
at each `--rates` value, for about `--level-s` seconds each (at least 8 requests), until a level
breaks the objectives (TTFT p95, ITL p95) twice in a row or the rates run out. For every level:
prompt and output tokens/s served, the interactive requests' TTFT p95 and every gap's ITL p95, the
worker's peak KV use (its Triton metrics, sampled every 0.5 s) and the frontend process's CPU. Then,
for the demand (`--input-tok-s`, `--output-tok-s`, `--headroom`): workers, frontends, and the memory
each holds (peak PSS of the frontend process and of the worker's tritonserver and stub).

Writes capacity.json (points, plan, assumptions) and capacity.png under --out. Prompts and outputs
are never logged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc

from bench.capacity_plan import Demand, Objectives, Point, plan
from bench.compare.serve_setup import KEYS, MODEL, make_jobs, platform_doc, toml
from bench.compare.targets import PlatformTarget
from bench.load.driver import Job, open_loop
from bench.load.metrics import Outcome, percentile
from bench.load.workload import MIXES, poisson_offsets
from bench.processes.proc_cpu import cpu_s, tree_cpu
from bench.processes.pss import PeakPss
from bench.processes.server_process import LoopbackServer, free_port

ROOT = Path(__file__).resolve().parent.parent
KV = re.compile(r'^llm_worker_kv_blocks\{[^}]*state="(\w+)"[^}]*\} (\S+)$')


def kv_share(url: str) -> float:
    """Share of the worker's KV blocks in use now (its Triton metrics)."""
    blocks: dict[str, float] = {}
    for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines():
        if m := KV.match(line):
            blocks[m.group(1)] = blocks.get(m.group(1), 0.0) + float(m.group(2))
    total = sum(blocks.values())
    return blocks.get("used", 0.0) / total if total else 0.0


async def level(
    target: PlatformTarget, jobs: list[Job], rate: float, seed: int, metrics_url: str, pid: int
) -> Point:
    peak = 0.0
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, await asyncio.to_thread(kv_share, metrics_url))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    cpu0, t0 = cpu_s(Path(f"/proc/{pid}/stat")), time.monotonic()
    tree0 = tree_cpu(pid)
    outcomes: list[Outcome] = await open_loop(target, jobs, poisson_offsets(len(jobs), rate, seed), 900.0)
    wall = time.monotonic() - t0
    frontend_cores = (cpu_s(Path(f"/proc/{pid}/stat")) - cpu0) / wall
    tree1 = tree_cpu(pid)
    worker_cores = sum(tree1[r] - tree0[r] for r in tree1 if r not in ("frontend", "other")) / wall
    stop.set()
    await sampler
    ok = [o for o in outcomes if o.error is None]
    prompts = {j.spec.index: len(j.prompt_ids) for j in jobs}
    # the first-token objective is held by the interactive requests: a document's first token waits
    # for its whole 1,200-1,800-token prompt (docs/performance.md, "How the mixed load's ... is read")
    ttfts = [o.ttft for o in ok if o.ttft is not None and o.kind == "interactive"]
    gaps = [g for o in ok for g in o.gaps]
    return Point(
        rate=rate,
        input_tok_s=sum(prompts[o.index] for o in ok) / wall,
        output_tok_s=sum(o.output_tokens for o in ok) / wall,
        ttft_p95_s=percentile(ttfts, 95) if ttfts else float("inf"),
        itl_p95_s=percentile(gaps, 95) if gaps else float("inf"),
        kv_peak=peak,
        frontend_cores=frontend_cores,
        errors=len(outcomes) - len(ok),
        worker_cores=worker_cores,
    )


def plot(points: list[Point], objectives: Objectives, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lat, kv) = plt.subplots(1, 2, figsize=(11, 4))
    x = [p.output_tok_s for p in points]
    lat.plot(x, [p.ttft_p95_s for p in points], "o-", label="TTFT p95")
    lat.plot(x, [p.itl_p95_s for p in points], "s-", label="ITL p95")
    lat.axhline(objectives.ttft_p95_s, ls="--", c="C0", lw=0.8, label="TTFT objective")
    lat.axhline(objectives.itl_p95_s, ls="--", c="C1", lw=0.8, label="ITL objective")
    lat.set(
        xlabel="output tokens/s (one CPU worker)",
        ylabel="seconds",
        yscale="log",
        title="latency vs throughput",
    )
    lat.legend()
    kv.plot(x, [p.kv_peak for p in points], "o-", c="C2")
    kv.set(xlabel="output tokens/s (one CPU worker)", ylabel="peak share of KV blocks used", ylim=(0, 1))
    kv.set_title("KV use vs throughput")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(prog="bench capacity", description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="0.2,0.4,0.6,0.8,1.0,1.3,1.6", help="requests/s, rising")
    p.add_argument("--level-s", type=float, default=40.0)
    # bench serve's goodput objectives: what a 2-core CPU can hold (bench/compare/serve.py)
    p.add_argument("--ttft-p95", type=float, default=2.0, help="interactive requests' objective, s")
    p.add_argument("--itl-p95", type=float, default=0.25, help="objective, s")
    p.add_argument("--input-tok-s", type=float, default=400_000)
    p.add_argument("--output-tok-s", type=float, default=60_000)
    p.add_argument("--headroom", type=float, default=0.2)
    p.add_argument("--frontend-cores", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=53)
    p.add_argument("--out", default="var/bench/capacity")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    objectives = Objectives(args.ttft_p95, args.itl_p95)
    rates = [float(r) for r in args.rates.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        work = Path(tmp)
        doc = platform_doc(work / "control.sqlite", 60.0, None)
        listen, http, triton_metrics = f"127.0.0.1:{free_port()}", free_port(), free_port()
        doc["frontend"] |= {"listen": listen}
        doc["http"] = {"listen": f"127.0.0.1:{http}"}
        doc["triton"] |= {"work_dir": str(work / "triton"), "metrics_port": triton_metrics}
        (work / "platform.toml").write_text(toml(doc))
        argv = [sys.executable, "-m", "serving", "--config", str(work / "platform.toml")]
        with LoopbackServer(
            "platform", argv, http, "/healthz", out / "platform.log", cwd=ROOT, start_timeout_s=900
        ) as server:
            assert server.proc is not None
            with PeakPss(server.proc.pid) as peak:
                points = asyncio.run(
                    _curve(
                        listen,
                        rates,
                        args,
                        objectives,
                        f"http://127.0.0.1:{triton_metrics}/metrics",
                        server.proc.pid,
                    )
                )
            parts = peak.parts
    mib = 1 << 20
    frontend_mib = parts.get("python", 0) / mib or parts.get(Path(sys.executable).name, 0) / mib
    worker_mib = (
        sum(v for k, v in parts.items() if k == "tritonserver" or k.startswith("triton_python")) / mib
    )
    kv_mib = kv_pool_mib()
    demand = Demand(args.input_tok_s, args.output_tok_s, args.headroom, args.frontend_cores)
    result = {
        "host": "one CPU worker and its frontend on 2 cores shared with other agents' work (busy)",
        "mix": "mixed",
        "points": [asdict(p) | {"meets": p.meets(objectives)} for p in points],
        "plan": _plan_or_why(points, objectives, demand, worker_mib, frontend_mib, kv_mib),
        "memory_parts_mib": {k: v / mib for k, v in parts.items()},
    }
    (out / "capacity.json").write_text(json.dumps(result, indent=2))
    plot(points, objectives, out / "capacity.png")
    print(json.dumps(result, indent=2))
    return 0 if "error" not in result["plan"] else 1


def _plan_or_why(points: list[Point], objectives: Objectives, demand: Demand, *mib: float) -> dict[str, Any]:
    """The plan, or why there is none (no level met the objectives: the points are still written)."""
    try:
        return plan(points, objectives, demand, *mib)
    except ValueError as e:
        return {"error": str(e), "objectives": asdict(objectives)}


def kv_pool_mib() -> float:
    """One engine's KV pool: blocks x block size x layers x K and V x KV heads x head dim x 4 bytes
    (the default model's shape, fp32 KV: docs/models.md)."""
    from contracts.capacity import DEFAULT_BLOCK_SIZE, DEFAULT_KV_CACHE_BLOCKS

    layers, kv_heads, head_dim = 30, 3, 64
    return DEFAULT_KV_CACHE_BLOCKS * DEFAULT_BLOCK_SIZE * layers * 2 * kv_heads * head_dim * 4 / (1 << 20)


async def _curve(
    address: str,
    rates: list[float],
    args: argparse.Namespace,
    objectives: Objectives,
    metrics_url: str,
    pid: int,
) -> list[Point]:
    points: list[Point] = []
    broken = 0
    async with grpc.aio.insecure_channel(address) as channel:
        target = PlatformTarget(channel, MODEL, KEYS, f"capacity-{time.time_ns()}")
        warm = make_jobs(MIXES["interactive"], 1, args.seed + 1)[0]
        await target.generate(warm, Outcome(-1, "warm-up", 0.0, warm.spec.output_tokens))
        for i, rate in enumerate(rates):
            n = max(8, round(rate * args.level_s))
            jobs = make_jobs(MIXES["mixed"], n, args.seed + 100 * i)
            # request ids restart at 0 each level: a run id of its own, or they would re-attach
            target = PlatformTarget(channel, MODEL, KEYS, f"capacity-{time.time_ns()}-{i}")
            point = await level(target, jobs, rate, args.seed + i, metrics_url, pid)
            points.append(point)
            print(f"rate {rate}: {point}", flush=True)
            broken = 0 if point.meets(objectives) else broken + 1
            if broken == 2:
                break
    return points
