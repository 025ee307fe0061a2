"""The platform as `make serve` runs it, in a process tree of its own (target `platform-process` of
`python -m bench serve`): `python -m serving --config <run's TOML>` on free loopback ports, driven
over gRPC from the benchmark's process, as the peers are.

The `platform` target runs the frontend inside the benchmark's own process, on the event loop and
under the interpreter lock of the load client, so every token event the client times is also a
token event the frontend must wait for the client to let it handle; here the frontend has its
process to itself, as in production and as vLLM's API server has in its run. Peak memory is the
child's whole tree (frontend, tritonserver, its stubs), without the client. Prompts and outputs
are never logged (the child's log is the platform's own: ids, lengths, reasons).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from bench.compare.serve_setup import KEYS, MODEL, run_doc, toml
from bench.compare.targets import PlatformTarget
from bench.load.driver import Job, drive
from bench.load.metrics import Outcome
from bench.load.workload import Load
from bench.processes.pss import PeakPss, memory_note
from bench.processes.server_process import LoopbackServer, free_port

ROOT = Path(__file__).resolve().parents[2]  # the checkout: bench/<room>/<module>.py


@contextlib.contextmanager
def platform_server(args: argparse.Namespace, log: Path) -> Iterator[tuple[LoopbackServer, str]]:
    """A fresh platform process for a `with` block, on free loopback ports: (its HTTP server, its gRPC
    address). Stopped with SIGTERM on leaving (the platform shuts its workers down itself)."""
    with tempfile.TemporaryDirectory(prefix="bench-platform-") as tmp:
        work = Path(tmp)
        doc = run_doc(work, args)
        listen, http = f"127.0.0.1:{free_port()}", free_port()
        doc["frontend"] |= {"listen": listen}
        doc["http"] = {"listen": f"127.0.0.1:{http}"}
        doc["triton"] |= {"work_dir": str(work / "triton")}
        config = work / "platform.toml"
        config.write_text(toml(doc))
        argv = [sys.executable, "-m", "serving", "--config", str(config)]
        with LoopbackServer("platform", argv, http, "/healthz", log, cwd=ROOT, start_timeout_s=900) as server:
            yield server, listen


def run_platform_process(
    jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, notes: list[str]
) -> list[Outcome]:
    """A fresh platform process: start it, warm it up with one request, drive the load, stop it;
    notes gets its tree's peak memory."""
    with platform_server(args, Path(args.out) / "platform-process.log") as (server, listen):
        assert server.proc is not None
        with PeakPss(server.proc.pid) as peak:
            outcomes = asyncio.run(_drive(listen, jobs, load, args, warm_up))
    notes.append(memory_note(f"platform-process @ {load.label}", peak, "the platform's"))
    print(notes[-1], flush=True)
    return outcomes


async def _drive(
    address: str, jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job
) -> list[Outcome]:
    async with grpc.aio.insecure_channel(address) as channel:
        target = PlatformTarget(channel, MODEL, KEYS, f"serve-process-{time.time_ns()}")
        await target.generate(warm_up, Outcome(-1, "warm-up", 0.0, warm_up.spec.output_tokens))
        return await drive(target, jobs, load, args.seed, args.timeout)
