"""Structured outputs' cost: the real platform (Triton + our engine) streams 32 concurrent chat
generations constrained by JSON schemas, then the same 32 free, side by side in one run; and the time
to compile each schema the tests use. Not a test: figures.

The free round is made the constrained round's twin: each free stream generates exactly as many
tokens as its constrained one did (ignore_eos), so both rounds run the same batch at every step and
differ only by the masks. Reported: inter-token latency p50/p95 and output tokens/s of each round and
their ratio (the objective: constrained ITL p95 at most 1.15x the free one), and schema compile time
p50/max, in the frontend's check (no tokenizer) and in the worker (with the model's tokenizer).

Run: `python -m bench structured [--streams 32] [--model smollm2-135m-int4] [--rounds 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from pathlib import Path

import grpc

from bench.load.metrics import percentile
from bench.load.schemas import SCHEMAS
from config.loader import parse_config
from config.settings import ModelSettings
from contracts.guides import GUIDE_JSON_SCHEMA, checked_grammar
from engine.constraints import Grammars
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import start_platform
from serving.workers import artifact_for

KEY = "structured-key"
MAX_OUT = 96


def request(i: int, model: str, schema: str | None, tokens: int | None) -> pb.GenerateRequest:
    name = list(SCHEMAS)[i % len(SCHEMAS)]
    req = pb.GenerateRequest(model=model, max_output_tokens=tokens or MAX_OUT)
    req.messages.messages.add(role="user", content=f"Give an example of a {name.replace('_', ' ')} as JSON.")
    if schema is not None:
        req.constraint.json_schema = schema
    if tokens is not None:
        req.sampling.ignore_eos = True
    return req


async def stream(
    stub: generations_pb2_grpc.GenerationsStub, req: pb.GenerateRequest
) -> tuple[list[float], int]:
    """(gaps between tokens in seconds, tokens generated)."""
    arrivals: list[float] = []
    async for event in stub.Generate(req, metadata=(("authorization", f"Bearer {KEY}"),), timeout=600):
        if event.HasField("delta") and event.delta.token_ids:
            arrivals.extend([time.perf_counter()] * len(event.delta.token_ids))
    return [b - a for a, b in itertools.pairwise(arrivals)], len(arrivals)


async def round_of(
    channel: grpc.aio.Channel, reqs: list[pb.GenerateRequest]
) -> tuple[list[float], list[int], float]:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    start = time.perf_counter()
    results = await asyncio.gather(*(stream(stub, r) for r in reqs))
    elapsed = time.perf_counter() - start
    return [g for gaps, _ in results for g in gaps], [n for _, n in results], elapsed


def compile_times(artifact: Path) -> tuple[list[float], list[float]]:
    """Seconds to check each schema as the frontend does, and to compile it as the worker does."""
    check, build = [], []
    grammars = Grammars(artifact / "tokenizer.json", [2], capacity=len(SCHEMAS) + 1)
    grammars.matcher(GUIDE_JSON_SCHEMA, "{}")  # the tokenizer's own build is not a schema's
    for schema in SCHEMAS.values():
        text = json.dumps(schema)
        start = time.perf_counter()
        checked_grammar(GUIDE_JSON_SCHEMA, text)
        check.append(time.perf_counter() - start)
        start = time.perf_counter()
        grammars.matcher(GUIDE_JSON_SCHEMA, text)
        build.append(time.perf_counter() - start)
    return check, build


async def run(args: argparse.Namespace) -> int:
    schemas = [json.dumps(SCHEMAS[name]) for name in SCHEMAS]
    with tempfile.TemporaryDirectory(prefix="bench-structured-") as work:
        cfg = parse_config(
            {
                "frontend": {"metrics_listen": "127.0.0.1:0", "interactive_queue_wait_s": 600.0},
                "store": {"url": f"sqlite:///{Path(work) / 'control.sqlite'}"},
                "tenants": [{"id": "structured", "api_keys": [KEY], "max_concurrent_generations": 1000}],
                "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0},
                "models": [{"alias": args.model, "quantization": args.quantization}],
            }
        )
        async with (
            start_platform(cfg, work_dir=Path(work)) as running,
            grpc.aio.insecure_channel(running.address) as ch,
        ):
            await round_of(
                ch, [request(0, args.model, schemas[0], None)]
            )  # warm: the tokenizer's grammar form
            rows = []
            for _ in range(args.rounds):
                constrained = [
                    request(i, args.model, schemas[i % len(schemas)], None) for i in range(args.streams)
                ]
                c_gaps, counts, c_time = await round_of(ch, constrained)
                free = [request(i, args.model, None, max(n, 1)) for i, n in enumerate(counts)]
                f_gaps, f_counts, f_time = await round_of(ch, free)
                rows.append((c_gaps, sum(counts) / c_time, f_gaps, sum(f_counts) / f_time))
    check, build = compile_times(
        artifact_for(ModelSettings(alias=args.model, quantization=args.quantization))
    )
    print(f"{args.streams} concurrent chat streams, {args.model}, each round constrained then its free twin:")
    for n, (c_gaps, c_tps, f_gaps, f_tps) in enumerate(rows, start=1):
        c50, f50 = percentile(c_gaps, 50) * 1e3, percentile(f_gaps, 50) * 1e3
        c95, f95 = percentile(c_gaps, 95) * 1e3, percentile(f_gaps, 95) * 1e3
        print(
            f"  round {n}: ITL p50 {c50:6.1f} / {f50:6.1f} ms, "
            f"p95 {c95:6.1f} / {f95:6.1f} ms (ratio {c95 / f95:.3f}; objective <= 1.15), "
            f"{c_tps:6.1f} / {f_tps:6.1f} tok/s  (constrained / free)"
        )
    print(
        f"  {len(SCHEMAS)} schemas: the frontend's check p50 {percentile(check, 50) * 1e3:.2f} ms, "
        f"max {max(check) * 1e3:.2f} ms; the worker's compile p50 {percentile(build, 50) * 1e3:.2f} ms, "
        f"max {max(build) * 1e3:.2f} ms"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench structured")
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="smollm2-135m-int4")
    parser.add_argument("--quantization", default="int4")
    return asyncio.run(run(parser.parse_args()))
