"""Where a decode step's time goes through the whole platform: `python -m serving` in its own
process tree (as `make serve` runs it) driven over gRPC, at each batch size, every sequence decoding
in every measured step.

For each batch size N, N requests (distinct prompts of --prompt tokens, more output tokens than the
window needs) start together. The window opens once every stream has --skip tokens (all prompts
prefilled) and the worker has published its metrics since, and closes --steps tokens later, at the
next publish; the streams are then cancelled. Per step, from the worker's own counters
(`llm_worker_loop_seconds_total`, relayed by the frontend's /metrics):

    schedule      the engine's scheduler (choosing the step's chunks and blocks, updating sequences)
    model         the rest of the engine step: inputs, the model, sampling
    respond       creating the step's responses and posting them to the outbox
    cancel check  taking the outbox's cancellation checks

and the CPU each part of the machine spent per step over the window (/proc, bench/processes/proc_cpu.py): the
worker's engine loop thread, the kernels' pool helpers, its outbox thread (Triton responses and
checks through the stub's shared memory), the stub's other threads, tritonserver, the frontend
process, and this benchmark's own load client; idle is what the CPUs had left. `python -m bench
profile` splits the engine's step itself (matmul, attention, sampling). Timing only: never a test.

    python -m bench platform-profile [--batches 1,8,32,64] [--tier interactive|batch]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.compare.serve_setup import KEYS, MODEL, platform_doc, toml
from bench.compare.targets import PlatformTarget
from bench.load.driver import Job
from bench.load.metrics import Outcome
from bench.load.prompts import artifact_encoder, exact_prompt
from bench.load.workload import RequestSpec
from bench.processes.proc_cpu import ROLES, tree_cpu
from bench.processes.server_process import LoopbackServer, free_port
from config.settings import ModelSettings
from serving.workers import artifact_for

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("schedule", "model", "respond", "cancel_check")
_LOOP = re.compile(r'^llm_worker_loop_seconds_total\{[^}]*part="(\w+)"[^}]*\} ([0-9.eE+-]+)$', re.M)
_STEPS = re.compile(r"^llm_worker_steps_total\{[^}]*\} ([0-9.eE+-]+)$", re.M)
_TOKENS = re.compile(r"^llm_worker_batched_tokens_total\{[^}]*\} ([0-9.eE+-]+)$", re.M)
_RUNNING = re.compile(r'^llm_worker_sequences\{[^}]*state="running"[^}]*\} ([0-9.eE+-]+)$', re.M)


@dataclass(slots=True)
class Snapshot:
    at: float  # perf_counter
    client_cpu: float  # this process's CPU seconds
    cpu: dict[str, float]  # the platform's, by role
    steps: float
    tokens: float
    loop: dict[str, float]  # seconds by part


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


def counters(text: str) -> tuple[float, float, dict[str, float], float]:
    """(steps, batched tokens, loop seconds by part, running sequences) from the frontend's /metrics."""
    steps = sum(float(v) for v in _STEPS.findall(text))
    tokens = sum(float(v) for v in _TOKENS.findall(text))
    loop = dict.fromkeys(PARTS, 0.0)
    for part, value in _LOOP.findall(text):
        loop[part] = loop.get(part, 0.0) + float(value)
    running = sum(float(v) for v in _RUNNING.findall(text))
    return steps, tokens, loop, running


async def fresh_snapshot(url: str, pid: int) -> Snapshot:
    """Waits for the worker's next publish (its step counter moves), then samples everything."""
    first = (await asyncio.to_thread(counters, await asyncio.to_thread(scrape, url)))[0]
    while True:
        await asyncio.sleep(0.05)
        steps, tokens, loop, _ = counters(await asyncio.to_thread(scrape, url))
        if steps != first:
            return Snapshot(time.perf_counter(), time.process_time(), tree_cpu(pid), steps, tokens, loop)


async def until(condition: object, outcomes: list[Outcome]) -> None:
    assert callable(condition)
    while not condition([o.output_tokens for o in outcomes]):
        await asyncio.sleep(0.02)


async def one_batch(
    target: PlatformTarget, jobs: list[Job], url: str, pid: int, skip: int, steps: int
) -> dict[str, float]:
    outcomes = [Outcome(j.spec.index, "interactive", 0.0, j.spec.output_tokens) for j in jobs]
    tasks = [asyncio.create_task(target.generate(j, o)) for j, o in zip(jobs, outcomes, strict=True)]
    try:
        await until(lambda got: min(got) >= skip, outcomes)
        a = await fresh_snapshot(url, pid)
        base = min(o.output_tokens for o in outcomes)
        await until(lambda got: min(got) >= base + steps, outcomes)
        b = await fresh_snapshot(url, pid)
        ended = [o for o in outcomes if o.end or o.output_tokens >= jobs[0].spec.output_tokens]
        if ended:
            o = ended[0]
            raise RuntimeError(
                f"{len(ended)} streams ended inside the window (the first: {o.output_tokens} tokens, "
                f"error {o.error}): raise --output if they ran out of tokens"
            )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    while counters(await asyncio.to_thread(scrape, url))[3] > 0:  # the cancelled streams are gone
        await asyncio.sleep(0.2)
    return per_step(a, b)


def per_step(a: Snapshot, b: Snapshot) -> dict[str, float]:
    """Milliseconds a step: the loop's parts from the worker's counters, and each role's CPU as its
    share of the window's wall time times the step's (both are steady-state rates)."""
    steps = b.steps - a.steps
    out = {"steps": steps, "tokens a step": (b.tokens - a.tokens) / steps}
    for part in PARTS:
        out[part] = (b.loop[part] - a.loop[part]) * 1000 / steps
    step_ms = sum(out[p] for p in PARTS)
    out["step"] = step_ms
    wall = b.at - a.at
    for role in ROLES:
        out[f"cpu {role}"] = (b.cpu[role] - a.cpu[role]) / wall * step_ms
    out["cpu load client"] = (b.client_cpu - a.client_cpu) / wall * step_ms
    busy = sum(v for k, v in out.items() if k.startswith("cpu "))
    out["cpu idle"] = max(0.0, len(os.sched_getaffinity(0)) * step_ms - busy)
    return out


def make_jobs(batch: int, prompt: int, output: int, tier_batch: bool, first: int) -> list[Job]:
    encode = artifact_encoder(artifact_for(ModelSettings()))
    jobs = []
    for i in range(first, first + batch):
        text = exact_prompt(f"platform-profile/{i}", prompt, encode)
        spec = RequestSpec(i, "interactive", 0, None, prompt, output, tier_batch)
        jobs.append(Job(spec, text, tuple(encode(text))))
    return jobs


async def drive(listen: str, url: str, pid: int, args: argparse.Namespace) -> dict[int, dict[str, float]]:
    results: dict[int, dict[str, float]] = {}
    async with grpc.aio.insecure_channel(listen) as channel:
        target = PlatformTarget(channel, MODEL, KEYS, f"platform-profile-{time.time_ns()}")
        warm = make_jobs(1, args.prompt, 8, False, 10_000)[0]
        await target.generate(warm, Outcome(-1, "warm-up", 0.0, 8))
        first = 0
        for batch in (int(b) for b in args.batches.split(",")):
            jobs = make_jobs(batch, args.prompt, args.output, args.tier == "batch", first)
            first += batch
            results[batch] = await one_batch(target, jobs, url, pid, args.skip, args.steps)
            print(f"batch {batch}: {results[batch]['step']:.1f} ms a step", flush=True)
    return results


def report(results: dict[int, dict[str, float]], args: argparse.Namespace) -> str:
    cpu = [f"cpu {r}" for r in (*ROLES, "load client", "idle")]
    heads = ["step", *PARTS, *cpu]
    lines = [
        f"{args.quantization}, KV {args.kv_cache_dtype}, {args.tier} tier, prompts of {args.prompt}: "
        "ms a decode step through the platform; loop parts from the worker's counters, CPU ms a step by part",
        "| batch | " + " | ".join(h.removeprefix("cpu ") for h in heads) + " |",
        "|" + " ---: |" * (len(heads) + 1),
    ]
    lines += [f"| {b} | " + " | ".join(f"{r[h]:.1f}" for h in heads) + " |" for b, r in results.items()]
    return "\n".join(lines)


def platform_args(parser: argparse.ArgumentParser, kv_cache_blocks: int) -> argparse.Namespace:
    """Adds the platform's model options (what running_platform reads) and --out, parses, and makes
    the output folder."""
    parser.add_argument("--quantization", choices=("none", "int8", "int4"), default="int4")
    parser.add_argument("--kv-cache-dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--kv-cache-blocks", type=int, default=kv_cache_blocks)
    parser.add_argument("--out", type=Path, default=Path("var/bench"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


@contextmanager
def running_platform(args: argparse.Namespace, log: Path) -> Iterator[tuple[str, str, int]]:
    """`python -m serving` in its own process tree on a scratch store, with the model settings of
    `args` (quantization, kv_cache_dtype, kv_cache_blocks): (gRPC address, metrics URL, its pid)."""
    with tempfile.TemporaryDirectory(prefix="bench-platform-") as tmp:
        work = Path(tmp)
        doc = platform_doc(
            work / "control.sqlite", 60.0, None, quantization=args.quantization,
            kv_cache_dtype=args.kv_cache_dtype, kv_cache_blocks=args.kv_cache_blocks,
        )  # fmt: skip
        listen, http, metrics = f"127.0.0.1:{free_port()}", free_port(), free_port()
        doc["frontend"] |= {"listen": listen, "metrics_listen": f"127.0.0.1:{metrics}"}
        doc["http"] = {"listen": f"127.0.0.1:{http}"}
        doc["triton"] |= {"work_dir": str(work / "triton")}
        config = work / "platform.toml"
        config.write_text(toml(doc))
        argv = [sys.executable, "-m", "serving", "--config", str(config)]
        with LoopbackServer("platform", argv, http, "/healthz", log, cwd=ROOT, start_timeout_s=900) as server:
            assert server.proc is not None
            yield listen, f"http://127.0.0.1:{metrics}/metrics", server.proc.pid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens of each request")
    parser.add_argument("--skip", type=int, default=16, help="tokens every stream has before the window")
    parser.add_argument("--steps", type=int, default=128, help="tokens the slowest stream gets in the window")
    parser.add_argument("--output", type=int, default=400, help="max output tokens (never reached)")
    parser.add_argument("--tier", choices=("interactive", "batch"), default="interactive")
    args = platform_args(parser, kv_cache_blocks=4096)
    with running_platform(args, args.out / "platform-profile.log") as (listen, url, pid):
        results = asyncio.run(drive(listen, url, pid, args))
    text = report(results, args)
    print(text)
    (args.out / "platform-profile.json").write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                                                 "batches": results}, indent=2))  # fmt: skip
    return 0
