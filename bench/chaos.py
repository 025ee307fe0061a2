"""Chaos: mixed load on the real platform while faults are injected, then the invariants (issue 49).
`make soak` runs it for as long as asked; tests/e2e/test_chaos.py runs a short one in `make test`.

    load       --concurrency clients, two tenants, each request with its own request id: read to the
               end, cancelled after a few events, disconnected and resumed, or disconnected for good
    faults     one at a time, in turn, each once the platform serves again after the last:
               kill-stub    SIGKILL of the worker's Python-backend stub
               stop-stub    SIGSTOP of it (the canary finds it silent; the supervisor restarts)
               kill-server  SIGKILL of tritonserver
               hold-store   an open write transaction on the SQLite store for `hold_s`
    checks     once the load stops (and the leases of what faults cut off have lapsed):
               - no generation QUEUED or RUNNING; every one's bill sealed (usage final), and equal to
                 what its stream's `finished` reported where that said final;
               - every stream a client read to its end ended with `finished` or a status with a reason;
               - no request id unusable: each one refused is sent again, the same request, and runs;
               - every KV block of the worker free (its metrics: used = 0).

Run: `python -m bench chaos [--minutes 10] [--concurrency 4] [--seed 0]`; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sqlite3
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
from grpc_status import rpc_status

from bench.load.prompts import WORDS
from bench.soak import KEYS, MODEL, TERMINAL, auth, config, kv_blocks_used
from config.settings import PlatformConfig
from frontend.api_errors import error_info
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform, RunningPlatform, start_platform
from serving.stubs import live_stubs

FAULTS = ("kill-stub", "stop-stub", "kill-server", "hold-store")
RECOVERY_BOUND_S = 300.0  # only a platform that never serves again reaches it


@dataclass
class Books:
    requests: dict[str, tuple[str, pb.GenerateRequest]] = field(default_factory=dict)  # id -> key, req
    generations: dict[str, str] = field(default_factory=dict)  # generation id -> tenant key
    finished: dict[str, pb.Finished] = field(default_factory=dict)  # generation id -> its finished
    refused: set[str] = field(default_factory=set)  # request ids refused before any event
    statuses: Counter[str] = field(default_factory=Counter)  # how streams ended, by status
    faults: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


def chaos_config(store: Path) -> PlatformConfig:
    """The soak's platform with small liveness timers (a stopped stub is found in seconds) and a
    short store timeout and lease (a held store refuses; what faults cut off is swept soon)."""
    cfg = config(store)
    frontend = replace(
        cfg.frontend, worker_inactivity_timeout_s=5.0, worker_probe_interval_s=0.5, attempt_lease_s=10.0
    )
    return replace(cfg, frontend=frontend, store=replace(cfg.store, timeout_s=2.0, final_usage_wait_s=5.0))


def request(rng: random.Random, request_id: str) -> pb.GenerateRequest:
    return pb.GenerateRequest(
        request_id=request_id,
        model=MODEL,
        prompt=" ".join(rng.choices(WORDS, k=rng.randint(3, 40))),
        max_output_tokens=rng.randint(4, 32),
        sampling=pb.SamplingParams(ignore_eos=rng.random() < 0.5),
    )


async def one(stub: generations_pb2_grpc.GenerationsStub, rng: random.Random, books: Books, rid: str) -> bool:
    """Sends one request and follows it as its action says; True when it was refused before any event."""
    key = rng.choice(list(KEYS.values()))
    req = request(rng, rid)
    books.requests[rid] = (key, req)
    action = rng.choice(["read", "read", "cancel", "resume", "disconnect"])
    call = stub.Generate(req, metadata=auth(key), timeout=RECOVERY_BOUND_S)
    events, last = 0, None
    try:
        async for event in call:
            events, last = events + 1, event
            books.generations[event.generation_id] = key
            if event.HasField("finished"):
                books.finished[event.generation_id] = event.finished
                books.statuses["finished"] += 1
            elif action != "read" and events >= 3:
                call.cancel()  # the client leaves: cancels, resumes or goes away for good
                if action == "cancel":
                    cancel = pb.CancelGenerationRequest(generation_id=event.generation_id)
                    await stub.CancelGeneration(cancel, metadata=auth(key), timeout=RECOVERY_BOUND_S)
                elif action == "resume":
                    resume = pb.ResumeRequest(
                        generation_id=event.generation_id, after_sequence=event.sequence
                    )
                    async for later in stub.Resume(resume, metadata=auth(key), timeout=RECOVERY_BOUND_S):
                        if later.HasField("finished"):
                            books.finished[event.generation_id] = later.finished
                books.statuses[f"client {action}"] += 1
                return False
        if last is None or not last.HasField("finished"):  # the stream ended with neither
            books.problems.append(f"request {rid}: its stream ended without finished or a status")
    except grpc.aio.AioRpcError as e:
        status = rpc_status.from_call(e)
        info = error_info(status) if status is not None else None
        books.statuses[f"{e.code().name} {info.reason if info else '(no reason)'}"] += 1
        if info is None:
            books.problems.append(f"request {rid}: {e.code().name} without a reason: {e.details()}")
        if events == 0:
            books.refused.add(rid)
            return True
    return False


def stub_pid(platform: Platform) -> int | None:
    """The worker's stub, running (not stopped); None while there is none."""
    server = platform.triton
    process = None if server is None else server.process
    if process is None or process.poll() is not None:
        return None
    for stub in live_stubs(process.pid):
        stat = Path(f"/proc/{stub.pid}/stat").read_text(errors="replace") if stub.pid else ""
        if stat and stat[stat.rindex(")") + 2] != "T":
            return stub.pid
    return None


async def serving_again(platform: Platform) -> None:
    """Until every worker is healthy and its stub lives (after a restart the supervisor made)."""
    deadline = time.monotonic() + RECOVERY_BOUND_S
    while not (all(w.healthy for w in platform.pool.workers.values()) and stub_pid(platform) is not None):
        if time.monotonic() > deadline:
            raise RuntimeError("the platform did not serve again after a fault")
        await asyncio.sleep(0.2)


async def inject(platform: Platform, fault: str, store: Path, hold_s: float) -> None:
    if fault in ("kill-stub", "stop-stub"):
        pid = stub_pid(platform)
        if pid is not None:
            os.kill(pid, signal.SIGKILL if fault == "kill-stub" else signal.SIGSTOP)
    elif fault == "kill-server":
        assert platform.triton is not None and platform.triton.process is not None
        platform.triton.process.kill()
    else:
        await asyncio.to_thread(hold_store, store, hold_s)


def hold_store(store: Path, hold_s: float) -> None:
    """Holds SQLite's write lock for `hold_s`, as a stuck writer would."""
    holder = sqlite3.connect(store, timeout=30.0, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        time.sleep(hold_s)
        holder.execute("ROLLBACK")
    finally:
        holder.close()


async def faults(platform: Platform, books: Books, store: Path, end: float, rng: random.Random) -> None:
    """Each fault in turn, once the platform serves again after the last, until `end` and until
    each kind was injected at least once (however long the recoveries take)."""
    turn = 0
    while time.monotonic() < end or turn < len(FAULTS):
        await asyncio.sleep(rng.uniform(1.0, 4.0))  # some load between faults
        fault = FAULTS[turn % len(FAULTS)]
        await inject(platform, fault, store, hold_s=rng.uniform(1.0, 4.0))
        books.faults[fault] += 1
        turn += 1
        await asyncio.sleep(1.0)  # the supervisor's pass and probes see it
        await serving_again(platform)


async def run(running: RunningPlatform, store: Path, seconds: float, concurrency: int, seed: int) -> Books:
    books = Books()
    end = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = generations_pb2_grpc.GenerationsStub(channel)

        chaos = asyncio.ensure_future(faults(running.platform, books, store, end, random.Random(seed)))

        async def client(i: int) -> None:
            """Requests back to back; after a refusal it backs off (1 s, doubling to 8 s), as a client
            honouring RetryInfo does, so a restart refuses a few requests, not hundreds."""
            rng, n, backoff = random.Random(seed * 1000 + i), 0, 1.0
            while time.monotonic() < end or not chaos.done():  # load under every fault
                n += 1
                if await one(stub, rng, books, f"chaos-{seed}-{i}-{n}"):
                    await asyncio.sleep(backoff)
                    backoff = min(2 * backoff, 8.0)
                else:
                    backoff = 1.0

        await asyncio.gather(*(client(i) for i in range(concurrency)))
        await chaos
        await serving_again(running.platform)
        await retry_refused(stub, books, concurrency)
        await audit(stub, books, running.platform.cfg.frontend.attempt_lease_s)
    return books


async def retry_refused(stub: generations_pb2_grpc.GenerationsStub, books: Books, concurrency: int) -> None:
    """No request id is unusable: each one refused runs when sent again (the same request)."""
    slots = asyncio.Semaphore(concurrency)

    async def again(rid: str) -> None:
        key, req = books.requests[rid]
        async with slots:
            try:
                events = [e async for e in stub.Generate(req, metadata=auth(key), timeout=RECOVERY_BOUND_S)]
            except grpc.aio.AioRpcError as e:
                books.problems.append(f"request {rid} refused again: {e.code().name} {e.details()}")
                return
        books.generations[events[-1].generation_id] = key
        if events[-1].HasField("finished"):
            books.finished[events[-1].generation_id] = events[-1].finished
        else:
            books.problems.append(f"request {rid}: its retry's stream ended without finished")

    await asyncio.gather(*(again(rid) for rid in sorted(books.refused)))


async def audit(stub: generations_pb2_grpc.GenerationsStub, books: Books, lease_s: float) -> None:
    """Every generation terminal with its bill sealed, within its lease and the sweeper's pass."""
    deadline = time.monotonic() + 3 * lease_s + RECOVERY_BOUND_S
    for gid, key in books.generations.items():
        while True:
            g = await stub.GetGeneration(pb.GetGenerationRequest(generation_id=gid), metadata=auth(key))
            if (g.state in TERMINAL and g.usage_final) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        if g.state not in TERMINAL or not g.usage_final:
            books.problems.append(
                f"{gid} is {pb.Generation.State.Name(g.state)}, usage final {g.usage_final}"
            )
        seen = books.finished.get(gid)
        if seen is None:
            continue
        if seen.usage_final and g.usage.output_tokens != seen.usage.output_tokens:
            books.problems.append(
                f"{gid}: billed {g.usage.output_tokens} != finished {seen.usage.output_tokens}"
            )
        if g.usage.output_tokens > seen.usage.output_tokens:
            books.problems.append(
                f"{gid}: billed {g.usage.output_tokens} > generated {seen.usage.output_tokens}"
            )


async def kv_free(running: RunningPlatform) -> float:
    """The worker's used KV blocks once its last generations' blocks are released."""
    deadline = time.monotonic() + RECOVERY_BOUND_S
    while (used := await asyncio.to_thread(kv_blocks_used, running)) != 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    return used


def report(books: Books, used: float) -> bool:
    print(
        f"requests {len(books.requests)}, generations {len(books.generations)}, refused {len(books.refused)}"
    )
    print(f"faults injected {dict(books.faults)}")
    print(f"streams ended {dict(books.statuses)}")
    print("invariants checked: terminal and sealed, bills equal finished, reasons, request ids, KV blocks")
    print(f"KV blocks used after the load: {used:g}")
    for problem in books.problems:
        print(problem)
    ok = not books.problems and used == 0
    print("chaos: " + ("all checks passed" if ok else "FAILED"))
    return ok


async def chaos(seconds: float, concurrency: int, seed: int) -> tuple[Books, float]:
    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as work:
        store = Path(work) / "control.sqlite"
        async with start_platform(chaos_config(store), work_dir=Path(work)) as running:
            books = await run(running, store, seconds, concurrency, seed)
            used = await kv_free(running)
    return books, used


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench chaos")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    books, used = asyncio.run(chaos(args.minutes * 60, args.concurrency, args.seed))
    return 0 if report(books, used) else 1
