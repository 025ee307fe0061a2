"""Fairness between tenants under long-document load: the real platform (Triton + our engine on CPU)
over the public gRPC API, one platform per configuration, side by side in one run (not a test).

    tenant A   keeps 6 documents in flight (1,700 prompt tokens each, 64 output tokens, ignore_eos):
               when one finishes it submits the next at once
    tenant B   short interactive requests (64-128 prompt tokens, 32 output tokens, ignore_eos),
               Poisson arrivals at --rate per s (seeded: the same schedule for every configuration)
               during a --window of seconds that opens once A's first document has finished
    measured   B's TTFT (Generate sent -> first delta event): p50/p95/max; output tokens/s of A and
               of everyone during the window; and, before A starts, B's TTFT on an idle platform

Configurations: weighted fair prefill (`fair_share = true`) at each prefill chunk budget of
--budgets (`max_num_batched_tokens`), and first-come-first-served at each of --fcfs-budgets;
otherwise identical. Target (issue 5): B's p95 TTFT <= 1 s with fair share, where first-come-first-
served makes B wait for every queued document prefill. Prompts are seeded pseudo-English cut to exact
token counts with the model's own tokenizer; every prompt is distinct, so nothing is a cache hit.
Run: `python -m bench fairness [--budgets 64,256] [--fcfs-budgets 64] [--window 60] [--rate 0.5]
[--b-weight 1] [--seed 0]` (about 6 minutes on 2 cores with the defaults).
Writes var/bench/fairness.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench.fairness_report import report
from bench.fairness_scenario import DEFAULTS, Scenario
from bench.load.metrics import percentile
from bench.load.prompts import Encode, artifact_encoder, exact_prompt
from config.loader import parse_config
from config.settings import ModelSettings, PlatformConfig
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import start_platform
from serving.workers import artifact_for

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MODEL = "smollm2-135m"
KEY_A, KEY_B = "bench-documents", "bench-interactive"
QUIET = 10_000  # B's prompt indices of the warm-up and of the quiet TTFT (before A starts)
QUIET_RUNS = range(QUIET + 1, QUIET + 4)


@dataclass(slots=True, frozen=True)
class RunSpec:
    fair_share: bool
    budget: int  # max_num_batched_tokens: the prefill chunk budget

    @property
    def name(self) -> str:
        return f"{'fair' if self.fair_share else 'fcfs'}@{self.budget}"


class Prompts:
    """The workload's prompts, made on first use and shared by every configuration."""

    def __init__(self, s: Scenario, encode: Encode) -> None:
        self.s, self.encode = s, encode
        self._docs: dict[int, str] = {}
        self._shorts: dict[int, tuple[str, int]] = {}

    def doc(self, i: int) -> str:
        if i not in self._docs:
            self._docs[i] = exact_prompt(f"{self.s.seed}/a/{i}", self.s.doc_tokens, self.encode)
        return self._docs[i]

    def short(self, i: int) -> tuple[str, int]:
        """B's i-th prompt and its exact token count."""
        if i not in self._shorts:
            n = random.Random(f"{self.s.seed}/b-length/{i}").randint(*self.s.short_tokens)
            self._shorts[i] = (exact_prompt(f"{self.s.seed}/b/{i}", n, self.encode), n)
        return self._shorts[i]


def arrivals(rate: float, window_s: float, seed: int) -> list[float]:
    """Poisson arrival offsets (s) inside [0, window_s)."""
    rng, t, out = random.Random(seed), 0.0, []
    while (t := t + rng.expovariate(rate)) < window_s:
        out.append(t)
    return out


@dataclass(slots=True)
class Stream:
    """One finished generation as its client saw it (times: perf_counter seconds)."""

    sent: float
    first_delta: float = 0.0
    tokens: list[tuple[float, int]] = field(default_factory=list)  # (arrival, token count) per delta

    @property
    def ttft_s(self) -> float:
        return self.first_delta - self.sent


async def generate(stub: Any, key: str, rid: str, prompt: str, n_in: int, n_out: int) -> Stream:
    """Runs one generation to its end; raises unless it used exactly n_in (uncached) prompt tokens
    and produced exactly n_out tokens."""
    req = pb.GenerateRequest(
        request_id=rid,
        model=MODEL,
        prompt=prompt,
        max_output_tokens=n_out,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    s = Stream(time.perf_counter())
    async for ev in stub.Generate(req, metadata=(("authorization", f"Bearer {key}"),)):
        now = time.perf_counter()
        if ev.HasField("started") and (ev.started.input_tokens, ev.started.cached_input_tokens) != (n_in, 0):
            raise RuntimeError(f"{rid}: {ev.started.input_tokens} input tokens, expected {n_in} uncached")
        if ev.HasField("delta") and ev.delta.token_ids:
            s.first_delta = s.first_delta or now
            s.tokens.append((now, len(ev.delta.token_ids)))
        if ev.HasField("finished") and ev.finished.reason != pb.Finished.Reason.OUTPUT_LIMIT:
            raise RuntimeError(f"{rid}: finished {pb.Finished.Reason.Name(ev.finished.reason)}")
    if sum(k for _, k in s.tokens) != n_out:
        raise RuntimeError(f"{rid}: {sum(k for _, k in s.tokens)} output tokens, expected {n_out}")
    return s


async def scenario(port: int, s: Scenario, prompts: Prompts) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = generations_pb2_grpc.GenerationsStub(channel)
        await generate(stub, KEY_B, "warm-up", *prompts.short(QUIET), 4)
        quiet = [await generate(stub, KEY_B, f"q-{k}", *prompts.short(k), s.short_output) for k in QUIET_RUNS]
        done: list[Stream] = []
        rolling = asyncio.Event()  # A's first document finished: its prefills are staggered now
        counter = itertools.count()

        async def slot() -> None:
            while True:
                i = next(counter)
                done.append(await generate(stub, KEY_A, f"a-{i}", prompts.doc(i), s.doc_tokens, s.doc_output))
                rolling.set()

        slots = [asyncio.create_task(slot()) for _ in range(s.docs_in_flight)]
        try:
            waiter = asyncio.create_task(rolling.wait())
            await asyncio.wait([waiter, *slots], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if not rolling.is_set():
                raise RuntimeError("tenant A failed before its first document finished")
            start = time.perf_counter()
            shorts = []
            for k, offset in enumerate(arrivals(s.rate, s.window_s, s.seed)):
                await asyncio.sleep(start + offset - time.perf_counter())
                text, n = prompts.short(k)
                shorts.append(asyncio.create_task(generate(stub, KEY_B, f"b-{k}", text, n, s.short_output)))
            await asyncio.sleep(start + s.window_s - time.perf_counter())
            b = await asyncio.gather(*shorts)
            failed = [t.exception() for t in slots if t.done()]  # a slot only ends by failing
        finally:
            for t in slots:
                t.cancel()
            await asyncio.gather(*slots, return_exceptions=True)
        if failed:
            raise RuntimeError(f"tenant A failed: {failed[0]!r}")
    end = start + s.window_s
    a_tokens = sum(k for d in done for t, k in d.tokens if start <= t < end)
    b_tokens = sum(k for d in b for t, k in d.tokens if start <= t < end)
    ttfts = [d.ttft_s for d in b]
    return {
        "b_quiet_ttft_s": percentile([q.ttft_s for q in quiet], 50),
        "b_requests": len(b),
        "b_ttft_s": ttfts,
        "b_ttft_p50_s": percentile(ttfts, 50),
        "b_ttft_p95_s": percentile(ttfts, 95),
        "b_ttft_max_s": max(ttfts),
        "a_docs_finished_in_window": sum(start <= d.tokens[-1][0] < end for d in done),
        "a_output_tok_s": a_tokens / s.window_s,
        "total_output_tok_s": (a_tokens + b_tokens) / s.window_s,
    }


def platform_config(spec: RunSpec, s: Scenario, store: Path) -> PlatformConfig:
    return parse_config(
        {
            # a long queue allowance: every request is admitted and waits its turn in the worker
            "frontend": {"interactive_queue_wait_s": 600.0},
            "store": {"url": f"sqlite:///{store}"},
            # B's requests pile up under FCFS (tens of seconds each): room for all of them, no refusals
            "tenants": [
                {"id": "documents", "api_keys": [KEY_A]},
                {
                    "id": "interactive",
                    "api_keys": [KEY_B],
                    "weight": s.b_weight,
                    "max_concurrent_generations": 256,
                },
            ],
            "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0, "exit_timeout_s": 5},
            "models": [
                {"alias": MODEL, "fair_share": spec.fair_share, "max_num_batched_tokens": spec.budget}
            ],
        }
    )


def run(spec: RunSpec, s: Scenario, prompts: Prompts) -> dict[str, Any]:
    """One fresh platform with this configuration: start, warm up, measure, tear down."""

    async def serve(work: Path) -> dict[str, Any]:
        cfg = platform_config(spec, s, work / "control.sqlite")
        async with start_platform(cfg, work_dir=work) as running:
            return await scenario(int(running.address.rpartition(":")[2]), s, prompts)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-fairness-") as work:
        result = asyncio.run(serve(Path(work)))
    return {
        "run": spec.name,
        "fair_share": spec.fair_share,
        "budget": spec.budget,
        **result,
        "run_s": time.perf_counter() - started,
    }


def run_order(fair_budgets: list[int], fcfs_budgets: list[int]) -> list[RunSpec]:
    """Fair runs in the order given, each FCFS baseline right after the fair run of its budget (so
    both see the machine in the same state), or at the end."""
    specs = [RunSpec(True, b) for b in fair_budgets]
    for b in fcfs_budgets:
        at = next((i + 1 for i, r in enumerate(specs) if r.budget == b), len(specs))
        specs.insert(at, RunSpec(False, b))
    return specs


def budgets(arg: str) -> list[int]:
    return [int(b) for b in arg.split(",") if b.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench fairness",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--budgets", type=budgets, default=[64, 256], help="fair-share prefill chunk budgets")
    parser.add_argument("--fcfs-budgets", type=budgets, default=[64], help="first-come-first-served budgets")
    parser.add_argument("--window", type=float, default=DEFAULTS.window_s, help="measured seconds")
    parser.add_argument("--rate", type=float, default=DEFAULTS.rate, help="B's arrivals per second")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
    parser.add_argument("--b-weight", type=float, default=DEFAULTS.b_weight, help="B's tenant weight")
    parser.add_argument("--out", type=Path, default=Path("var/bench"))
    args = parser.parse_args()
    s = Scenario(rate=args.rate, window_s=args.window, seed=args.seed, b_weight=args.b_weight)
    specs = run_order(args.budgets, args.fcfs_budgets)
    prompts = Prompts(s, artifact_encoder(artifact_for(ModelSettings())))
    for i in range(60):  # made up front, not while the clock runs (more are made if A needs them)
        prompts.doc(i)
    for k in [QUIET, *QUIET_RUNS, *range(len(arrivals(s.rate, s.window_s, s.seed)))]:
        prompts.short(k)
    started = time.perf_counter()
    runs = []
    for spec in specs:
        runs.append(run(spec, s, prompts))
        print(
            f"{spec.name}: B p95 TTFT {runs[-1]['b_ttft_p95_s']:.2f} s, {runs[-1]['run_s']:.0f} s", flush=True
        )
    print(report(s, runs, args.out))
    print(f"({time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
