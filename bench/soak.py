"""Soak: the real platform under random cancellations, disconnects and resumes for a while, then the
books are checked (issue 12). Not a test: it takes minutes (`make soak`, 10 by default).

    clients    --concurrency loops, two tenants; each starts a Generate (random prompt, 4-48
               output tokens, sometimes ignore_eos) and then, at random: reads it to the end;
               cancels it (CancelGeneration) after a few events; disconnects and Resumes from its
               cursor within the grace period; or disconnects for good (the grace period cancels it)
    checks     once the load stops and the worker is idle:
               - every KV block of the worker is free (its metrics: used = 0);
               - no generation is left QUEUED or RUNNING (GetGeneration of every one);
               - billed output <= generated output, and delivered <= generated (finished events)

Run: `python -m bench soak [--minutes 10] [--concurrency 4] [--seed 0]`. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from bench.load.prompts import WORDS
from config.loader import parse_config
from config.settings import PlatformConfig
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import RunningPlatform, start_platform

KEYS = {"soak-a": "soak-key-a", "soak-b": "soak-key-b"}
MODEL = "smollm2-135m"
TERMINAL = {pb.Generation.COMPLETED, pb.Generation.CANCELED, pb.Generation.INTERRUPTED, pb.Generation.FAILED}


@dataclass
class Books:
    generations: dict[str, str] = field(default_factory=dict)  # id -> tenant key
    finished: dict[str, pb.TokenUsage] = field(default_factory=dict)  # id -> final usage seen
    actions: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)


def config(store: Path) -> PlatformConfig:
    return parse_config(
        {
            "frontend": {
                "metrics_listen": "127.0.0.1:0",
                "disconnect_grace_s": 1.0,
                "interactive_queue_wait_s": 30.0,
            },
            "store": {"url": f"sqlite:///{store}"},
            "tenants": [
                {"id": t, "api_keys": [k], "max_concurrent_generations": 64} for t, k in KEYS.items()
            ],
            "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0, "exit_timeout_s": 5},
            "models": [{"alias": MODEL, "kv_cache_blocks": 400}],
        }
    )


def auth(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


async def one(stub: generations_pb2_grpc.GenerationsStub, rng: random.Random, books: Books) -> None:
    key = rng.choice(list(KEYS.values()))
    req = pb.GenerateRequest(
        model=MODEL,
        prompt=" ".join(rng.choices(WORDS, k=rng.randint(3, 60))),
        max_output_tokens=rng.randint(4, 48),
        sampling=pb.SamplingParams(ignore_eos=rng.random() < 0.5, temperature=rng.choice([0.0, 0.7])),
    )
    action = rng.choice(["read", "cancel", "resume", "disconnect"])
    books.actions[action] = books.actions.get(action, 0) + 1
    call = stub.Generate(req, metadata=auth(key))
    last = 0
    try:
        while (event := await call.read()) is not grpc.aio.EOF:
            books.generations[event.generation_id] = key
            last = event.sequence
            if event.HasField("finished"):
                books.finished[event.generation_id] = event.finished.usage
            if action != "read" and last >= 3:
                break
        if action == "read" or event is grpc.aio.EOF:
            return
        gid = event.generation_id
        call.cancel()
        if action == "cancel":
            await stub.CancelGeneration(pb.CancelGenerationRequest(generation_id=gid), metadata=auth(key))
        elif action == "resume":
            async for event in stub.Resume(
                pb.ResumeRequest(generation_id=gid, after_sequence=last), metadata=auth(key)
            ):
                if event.HasField("finished"):
                    books.finished[gid] = event.finished.usage
    except grpc.aio.AioRpcError as e:
        books.errors[e.code().name] = books.errors.get(e.code().name, 0) + 1


async def load(running: RunningPlatform, seconds: float, concurrency: int, seed: int) -> Books:
    books = Books()
    end = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = generations_pb2_grpc.GenerationsStub(channel)

        async def client(i: int) -> None:
            rng = random.Random(seed * 1000 + i)
            while time.monotonic() < end:
                await one(stub, rng, books)

        await asyncio.gather(*(client(i) for i in range(concurrency)))
        await asyncio.sleep(3.0)  # grace periods expire, disconnected runs are cancelled
        await audit(stub, books)
    return books


async def audit(stub: generations_pb2_grpc.GenerationsStub, books: Books) -> None:
    problems: list[str] = []
    for gid, key in books.generations.items():
        g = await stub.GetGeneration(pb.GetGenerationRequest(generation_id=gid), metadata=auth(key))
        if g.state not in TERMINAL:
            problems.append(f"{gid} is {pb.Generation.State.Name(g.state)}")
        seen = books.finished.get(gid)
        if seen is not None and not g.usage.output_tokens <= seen.output_tokens:
            problems.append(f"{gid}: billed {g.usage.output_tokens} > generated {seen.output_tokens}")
        if seen is not None and not seen.delivered_output_tokens <= seen.output_tokens:
            problems.append(
                f"{gid}: delivered {seen.delivered_output_tokens} > generated {seen.output_tokens}"
            )
    books.errors.update({f"CHECK: {p}": 1 for p in problems})


def kv_blocks_used(running: RunningPlatform) -> float:
    server = running.platform.triton
    assert server is not None
    body = (
        urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=30).read().decode()
    )
    match = re.search(r'^llm_worker_kv_blocks\{[^}]*state="used"[^}]*\} ([0-9.e+-]+)$', body, re.M)
    return float(match.group(1)) if match else float("nan")


async def soak(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as work:
        async with start_platform(config(Path(work) / "control.sqlite"), work_dir=Path(work)) as running:
            books = await load(running, args.minutes * 60, args.concurrency, args.seed)
            used = kv_blocks_used(running)
    checks = [k for k in books.errors if k.startswith("CHECK")]
    print(
        f"generations {len(books.generations)}, finished seen {len(books.finished)}, actions {books.actions}"
    )
    print(
        f"client-side statuses {dict((k, v) for k, v in books.errors.items() if not k.startswith('CHECK'))}"
    )
    print(f"KV blocks used after the load: {used:g}")
    for problem in checks:
        print(problem)
    ok = not checks and used == 0
    print("soak: " + ("all checks passed" if ok else "FAILED"))
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench soak")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    return asyncio.run(soak(parser.parse_args()))
