"""`python -m bench fleet --mix shared-prefix`: routing by cached prefix against least-loaded
routing, side by side on one fleet (two worker hosts, each its own process tree, over a fresh
PostgreSQL schema) with two frontends: one routes by prefix ([routing] policy = "prefix"), the
other by the most free KV blocks ("least_loaded").

The shared-prefix mix: `--prefixes` long prefixes (`--prefix-tokens` each, every one owned by one
of two tenants), each followed by a short body of its own and `--per-prefix` requests per prefix,
in a seeded random order, sent by `--concurrency` closed-loop clients. The workers' KV pools
(`--kv-blocks`) hold about half the prefixes each beside the running requests: the case routing is
for, where one worker cannot cache every hot prefix and two together can. Each round runs the same
mix (fresh prefixes, so neither frontend inherits the other's cache) through one frontend and
then the other, alternating which goes first; figures are over all rounds:

    cache_fraction   mean over requests of (prompt tokens served from cache / prompt tokens)
    ttft_s           time to first token, p50 / p95 / mean
    host_split       each worker's share of the prompt tokens looked up (its Triton metrics)

On one machine both worker hosts share the same cores: what routing saves is prefill work, and
this measures that, not a speed-up from more hardware. Prompts and outputs are never logged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc

from bench.compare.fleet import POSTGRES_URL, Role, fleet_config, role
from bench.compare.targets import PlatformTarget
from bench.load.driver import Job, closed_loop
from bench.load.metrics import Outcome, spread
from bench.load.prompts import Encode, artifact_encoder, exact_prompt, prefixed_prompt
from bench.load.workload import RequestSpec
from config.settings import ModelSettings
from datastore.scratch import scratch_schema
from serving.workers import artifact_for

KEYS = ["bench-fleet-tenant-0", "bench-fleet-tenant-1"]
POLICIES = ("prefix", "least_loaded")


def shared_prefix_jobs(args: argparse.Namespace, round_seed: str, encode: Encode) -> list[Job]:
    """The mix for one frontend in one round: its own prefixes (seeded by round and policy)."""
    prefixes = [
        exact_prompt(f"{round_seed}/prefix/{k}", args.prefix_tokens, encode) for k in range(args.prefixes)
    ]
    order = [k for k in range(args.prefixes) for _ in range(args.per_prefix)]
    random.Random(round_seed).shuffle(order)
    jobs = []
    for index, k in enumerate(order):
        prompt = prefixed_prompt(
            prefixes[k], f"{round_seed}/body/{index}", args.prefix_tokens + args.body_tokens, encode
        )
        spec = RequestSpec(index, "interactive", k % 2, k, args.body_tokens, args.output_tokens)
        jobs.append(Job(spec, prompt, tuple(encode(prompt))))
    return jobs


def looked_up(url: str) -> float:
    """Prompt tokens a worker's engines looked up in their prefix caches, all told (its Triton metrics)."""
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    lines = body.splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("llm_worker_prefix_query_tokens")
    )


def host_tokens(workers: list[Role]) -> list[float]:
    return [looked_up(w.metrics_url) for w in workers]


async def run_phase(
    frontend: Role, jobs: list[Job], args: argparse.Namespace, workers: list[Role]
) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(frontend.grpc_address) as channel:
        target = PlatformTarget(channel, "smollm2-135m", KEYS, f"bench-fleet-{time.time_ns()}")
        before = host_tokens(workers)
        outcomes = await closed_loop(target, jobs, args.concurrency, args.timeout)
        after = host_tokens(workers)
    return {"outcomes": outcomes, "host_tokens": [a - b for a, b in zip(after, before, strict=True)]}


def summary(phases: list[dict[str, Any]], jobs_by_phase: list[list[Job]]) -> dict[str, Any]:
    outcomes: list[Outcome] = [o for p in phases for o in p["outcomes"]]
    prompts = {
        id(o): len(j.prompt_ids)
        for p, js in zip(phases, jobs_by_phase, strict=True)
        for o, j in zip(p["outcomes"], js, strict=True)
    }
    ok = [o for o in outcomes if o.error is None]
    fractions = [o.cached_tokens / prompts[id(o)] for o in ok]
    hosts = [sum(p["host_tokens"][i] for p in phases) for i in range(len(phases[0]["host_tokens"]))]
    return {
        "requests": len(outcomes),
        "errors": len(outcomes) - len(ok),
        "cache_fraction": sum(fractions) / len(fractions) if fractions else 0.0,
        "ttft_s": spread([o.ttft for o in ok if o.ttft is not None]),
        "host_split": [h / sum(hosts) if sum(hosts) else 0.0 for h in hosts],
    }


def main() -> int:
    p = argparse.ArgumentParser(prog="bench fleet", description=__doc__.split("\n\n")[0])
    p.add_argument("--mix", choices=["shared-prefix"], default="shared-prefix")
    p.add_argument("--prefixes", type=int, default=8)
    p.add_argument("--prefix-tokens", type=int, default=768)
    p.add_argument("--body-tokens", type=int, default=16)
    p.add_argument("--output-tokens", type=int, default=8)
    p.add_argument("--per-prefix", type=int, default=20)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--kv-blocks", type=int, default=320, help="each worker's KV pool (blocks of 16)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--spill-margin", type=int, default=4)
    p.add_argument("--seed", type=int, default=53)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--out", default="var/bench/fleet")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    encode = artifact_encoder(artifact_for(ModelSettings()))
    model = {"alias": "smollm2-135m", "kv_cache_blocks": args.kv_blocks}
    with (
        scratch_schema(POSTGRES_URL, "bench") as schema,
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp,
        ExitStack() as stack,
    ):
        work = Path(tmp)
        ns = argparse.Namespace(queue_wait_s=args.timeout)
        base = fleet_config(ns, f"{POSTGRES_URL}?options=-csearch_path%3D{schema}", KEYS, model)
        workers = [role("worker", name, base, work) for name in ("w1", "w2")]
        for w in workers:
            stack.enter_context(w.server)
        frontends = {}
        for policy in POLICIES:
            cfg = dict(base, routing={"policy": policy, "spill_margin": args.spill_margin})
            frontends[policy] = role("frontend", f"f-{policy}", cfg, work)
            stack.enter_context(frontends[policy].server)
        print(f"fleet up: 2 worker hosts, frontends {', '.join(POLICIES)}", flush=True)
        phases: dict[str, list[dict[str, Any]]] = {p_: [] for p_ in POLICIES}
        jobs: dict[str, list[list[Job]]] = {p_: [] for p_ in POLICIES}
        for r in range(args.rounds):
            for policy in POLICIES if r % 2 == 0 else tuple(reversed(POLICIES)):
                batch = shared_prefix_jobs(args, f"{args.seed}/{r}/{policy}", encode)
                phase = asyncio.run(run_phase(frontends[policy], batch, args, workers))
                phases[policy].append(phase)
                jobs[policy].append(batch)
                s = summary([phase], [batch])
                print(
                    f"round {r} {policy}: cache {s['cache_fraction']:.3f}, "
                    f"ttft p50 {s['ttft_s']['p50']:.3f}s, split {s['host_split']}",
                    flush=True,
                )
    result: dict[str, Any] = {
        "args": vars(args),
        "host": "2 cores shared with other agents' work (busy); both worker hosts on the same cores",
        "by_policy": {policy: summary(phases[policy], jobs[policy]) for policy in POLICIES},
    }
    prefix, least = result["by_policy"]["prefix"], result["by_policy"]["least_loaded"]
    if prefix["ttft_s"] and least["ttft_s"]:
        result["ttft_p50_ratio_least_over_prefix"] = least["ttft_s"]["p50"] / prefix["ttft_s"]["p50"]
    (out / "fleet-routing.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result["by_policy"], indent=2))
    print(f"wrote {out / 'fleet-routing.json'}")
    return 0 if prefix["errors"] == least["errors"] == 0 else 1
