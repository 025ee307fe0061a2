"""`python -m bench speculative`: speculative decoding side by side with none, in one run, on the
engine alone (the worker's engine, without the platform around it):

    draft        fp32 target + its int4 draft, one stream (a 128-token prompt, 256 greedy tokens),
                 fixed k and chosen k, against the fp32 target alone: tokens must be identical
    ngram        int4 target + prompt lookup on a summarization workload (answers that copy from
                 their prompt: bench/speculative_workload.py) against the int4 target alone
    offline      16 requests at once (int4, ngram chosen per step): throughput, speculation on/off
    mixed        12 requests arriving one every 3 steps (int4, ngram chosen per step): throughput
                 and p95 of the time between a request's tokens (ITL), on/off; both loads twice,
                 alternating (a shared host's load drifts)

Each line gives tokens/s, the speedup, the acceptance rate and the split of the speculating
steps' time (draft / verify / the rest: sampling, scheduling, bookkeeping).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import torch

from bench.speculative_workload import SUMMARIES, summarization_prompts
from engine import kernels
from engine.engine import Engine, EngineConfig, EngineRequest
from engine.model import LlamaForCausalLM
from engine.speculative.speculation import SpeculativeConfig
from engine.weights import load_model
from prebuild.artifact import ensure_artifact
from prebuild.kernels import load_kernels


@dataclass(slots=True)
class Run:
    tokens: dict[str, tuple[int, ...]]
    seconds: float
    itl: list[float]  # seconds between a request's consecutive outputs, per token
    drafted: int = 0
    accepted: int = 0
    draft_s: float = 0.0
    verify_s: float = 0.0

    @property
    def throughput(self) -> float:
        return sum(len(t) for t in self.tokens.values()) / self.seconds


def drive(
    model: LlamaForCausalLM,
    requests: list[EngineRequest],
    spec: SpeculativeConfig,
    draft: LlamaForCausalLM | None = None,
    every: int = 0,
) -> Run:
    """Runs `requests` to completion (one new request every `every` steps; 0: all at once)."""
    config = EngineConfig(num_blocks=1024, max_num_seqs=64, max_num_batched_tokens=256, speculative=spec)
    engine = Engine(model, config, draft_model=draft if spec.method == "draft" else None)
    pending = list(requests)
    tokens: dict[str, list[int]] = {r.request_id: [] for r in requests}
    last: dict[str, float] = {}
    itl: list[float] = []
    started = time.perf_counter()
    step = 0
    while pending or engine.has_unfinished():
        if pending and (every == 0 or step % every == 0):
            for r in pending if every == 0 else pending[:1]:
                engine.add_request(r)
            pending = [] if every == 0 else pending[1:]
        outputs = engine.step()
        now = time.perf_counter()
        for out in outputs:
            if out.new_token_ids and out.request_id in last:
                itl.extend([(now - last[out.request_id]) / len(out.new_token_ids)] * len(out.new_token_ids))
            last[out.request_id] = now
            tokens[out.request_id].extend(out.new_token_ids)
        step += 1
    run = Run({k: tuple(v) for k, v in tokens.items()}, time.perf_counter() - started, itl)
    if engine.speculator is not None:
        s = engine.speculator.stats
        run.drafted, run.accepted, run.draft_s, run.verify_s = s.drafted, s.accepted, s.draft_s, s.verify_s
    return run


def one_at_a_time(model: LlamaForCausalLM, requests: list[EngineRequest], spec: SpeculativeConfig) -> Run:
    """Each request alone (a single stream), the runs added up."""
    total = Run({}, 0.0, [])
    for r in requests:
        one = drive(model, [r], spec)
        total = Run(
            {**total.tokens, **one.tokens}, total.seconds + one.seconds, [],
            total.drafted + one.drafted, total.accepted + one.accepted,
            total.draft_s + one.draft_s, total.verify_s + one.verify_s,
        )  # fmt: skip
    return total


def report(name: str, run: Run, base: Run | None) -> None:
    line = f"{name:34s} {run.throughput:7.2f} tok/s"
    if base is not None:
        same = "identical" if run.tokens == base.tokens else "DIFFERENT"
        line += f"  x{run.throughput / base.throughput:4.2f}  tokens {same}"
    if run.drafted:
        other = max(run.seconds - run.draft_s - run.verify_s, 0.0)
        line += (
            f"  acceptance {run.accepted / run.drafted:.0%} ({run.accepted}/{run.drafted})"
            f"  split draft {run.draft_s:.1f}s verify {run.verify_s:.1f}s other {other:.1f}s"
        )
    if run.itl:
        itl = sorted(run.itl)
        line += f"  ITL p95 {itl[int(0.95 * (len(itl) - 1))] * 1000:.0f} ms"
    print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench speculative")
    parser.add_argument("--tokens", type=int, default=256, help="greedy tokens of the single stream")
    parser.add_argument("--k", type=int, default=4, help="the fixed draft length compared with k chosen")
    parser.add_argument("--only", default="draft,ngram,offline,mixed")
    args = parser.parse_args()
    only = set(args.only.split(","))
    cpus = len(os.sched_getaffinity(0))
    torch.set_num_threads(max(1, cpus - 1))  # as a worker sizes its engine (serving/workers.py)
    load_kernels()
    kernels.set_threads(cpus)
    fp32 = load_model(ensure_artifact())
    int4 = load_model(ensure_artifact(quantization="int4"))
    off = SpeculativeConfig()
    print(f"host: {cpus} CPUs, torch threads {torch.get_num_threads()}; figures from one run, side by side")
    if "draft" in only:
        prompt = tuple(range(2000, 2128))  # 128 tokens
        one = [EngineRequest("stream", prompt, args.tokens)]
        base = drive(fp32, one, off)
        report("fp32 alone", base, None)
        report(
            f"fp32 + int4 draft, k={args.k}", drive(fp32, one, SpeculativeConfig("draft", args.k), int4), base
        )
        report("fp32 + int4 draft, k chosen", drive(fp32, one, SpeculativeConfig("draft"), int4), base)
    if "ngram" in only:
        prompts = summarization_prompts()
        reqs = [EngineRequest(f"sum{i}", p, 96, stop_token_ids=frozenset({2})) for i, p in enumerate(prompts)]
        base = one_at_a_time(int4, reqs, off)
        report(f"int4 alone ({len(SUMMARIES)} summaries)", base, None)
        for spec, label in (
            (SpeculativeConfig("ngram", args.k), f"k={args.k}"),
            (SpeculativeConfig("ngram"), "k chosen"),
        ):
            report(f"int4 + ngram, {label}", one_at_a_time(int4, reqs, spec), base)
    for load, every in (("offline", 0), ("mixed", 3)):
        if load not in only:
            continue
        prompts = summarization_prompts()
        reqs = [
            EngineRequest(f"{load}{i}", prompts[i % len(prompts)][: 96 + 8 * (i % 5)], 32)
            for i in range(16 if load == "offline" else 12)
        ]
        for _ in range(2):  # alternating, as the host is shared: each pair side by side
            base = drive(int4, reqs, off, every=every)
            report(f"{load}: int4 alone", base, None)
            on = drive(int4, reqs, SpeculativeConfig("ngram"), every=every)
            report(f"{load}: int4 + ngram, k chosen", on, base)
    return 0
