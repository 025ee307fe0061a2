"""Health-check latency while hostile requests are refused (issue 12, row 4): the real platform, its
Health.Check timed idle and then while clients keep sending oversized requests (a 2 MB prompt that
gRPC refuses, 100,000 empty chat messages and a 130,000-character prompt that validation refuses,
and 120,000-character prompts that are tokenized off the event loop). Not a test: a figure.

Run: `python -m bench hostile [--seconds 20] [--senders 4]`; prints p50/p99 health latency idle and
under the flood, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.load.metrics import percentile
from config.loader import parse_config
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import start_platform

KEY = "hostile-key"
MODEL = "smollm2-135m"
FLOOD = (
    pb.GenerateRequest(model=MODEL, prompt="x" * 2_000_000, max_output_tokens=1),
    pb.GenerateRequest(
        model=MODEL,
        messages=pb.ChatMessages(messages=[pb.ChatMessage(role="user", content="") for _ in range(100_000)]),
        max_output_tokens=1,
    ),
    pb.GenerateRequest(model=MODEL, prompt="word " * 26_000, max_output_tokens=1),
    pb.GenerateRequest(model=MODEL, prompt="word " * 24_000, max_output_tokens=1),  # tokenized, too long
)


async def health_latencies(channel: grpc.aio.Channel, seconds: float) -> list[float]:
    stub = health_pb2_grpc.HealthStub(channel)
    out: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
        out.append(time.perf_counter() - start)
        await asyncio.sleep(0.05)
    return out


async def flood(channel: grpc.aio.Channel, stop: asyncio.Event, i: int) -> int:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    sent = 0
    while not stop.is_set():
        req = FLOOD[(i + sent) % len(FLOOD)]
        try:
            async for _ in stub.Generate(req, metadata=(("authorization", f"Bearer {KEY}"),), timeout=60):
                pass
        except grpc.aio.AioRpcError:
            pass  # refused, as it should be
        sent += 1
    return sent


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as work:
        cfg = parse_config(
            {
                "frontend": {"metrics_listen": "127.0.0.1:0"},
                "store": {"url": f"sqlite:///{Path(work) / 'control.sqlite'}"},
                "tenants": [{"id": "hostile", "api_keys": [KEY]}],
                "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0},
            }
        )
        async with (
            start_platform(cfg, work_dir=Path(work)) as running,
            grpc.aio.insecure_channel(
                running.address, options=[("grpc.max_send_message_length", 8 << 20)]
            ) as ch,
        ):
            idle = await health_latencies(ch, args.seconds / 2)
            stop = asyncio.Event()
            senders = [asyncio.create_task(flood(ch, stop, i)) for i in range(args.senders)]
            busy = await health_latencies(ch, args.seconds)
            stop.set()
            sent = sum(await asyncio.gather(*senders))
    p = {
        name: (percentile(v, 50) * 1000, percentile(v, 99) * 1000)
        for name, v in (("idle", idle), ("flood", busy))
    }
    print(f"health checks: {len(idle)} idle, {len(busy)} under a flood of {sent} refused requests")
    for name, (p50, p99) in p.items():
        print(f"  {name:5s} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms")
    print(f"  flood/idle p99 ratio {p['flood'][1] / max(p['idle'][1], 1e-9):.1f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench hostile")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--senders", type=int, default=4)
    return asyncio.run(run(parser.parse_args()))
