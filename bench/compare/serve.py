"""The serving benchmark: this platform over its public gRPC API (real Triton + our engine on CPU)
against baselines on the same weights, same machine, same seeded workload and arrivals, in one run.

    targets    platform       a fresh platform per load (nothing cached from an earlier load);
                              the admission queue allowance is --queue-wait-s (default 600 s, so
                              every request is served as by the baselines, which queue without limit)
               platform-process
                              the same in a process tree of its own, as `make serve` runs it, the
                              frontend not sharing this process with the load client
                              (bench/compare/platform_process.py)
               platform-http  the same, driven over its OpenAI-compatible HTTP API (streamed
                              /v1/completions, the same request as the gRPC one), by the client the
                              HTTP peers are driven with: the HTTP path's cost next to gRPC's
               platform-split one platform, even-indexed requests over gRPC and odd ones over
                              HTTP at once: reported as platform-split/grpc and /http, the two
                              transports under the very same load (robust to a shared machine)
               fleet          the fleet shape: two worker hosts and two frontends, each its own
                              process, over PostgreSQL, request i to frontend i % 2 (bench/compare/fleet.py;
                              with the store's round trips per generation)
               transformers   Hugging Face generate, one request at a time in arrival order, in
                              this process; it runs the workload's first --baseline-requests
                              requests with the same arrival offsets
               llama.cpp, llama.cpp-server, vllm
                              peers from their scratch environments (bench/peers/peers.py; make
                              bench-deps): llama.cpp in-process on the Q4_1 GGUF (the per-token
                              reference), its HTTP server, vLLM's server on the fp32 artifact;
                              skipped with the reason when not installed
    workload   a named mix (bench/load/workload.py): interactive, mixed, offline, decode; output
               lengths forced
    arrivals   Poisson at --rate (or each of --rates), or --concurrency closed-loop clients
    rounds     --rounds N runs each load N times, the targets' order reversed every other round,
               and reports each round's throughput ratio and their median (a 2-core VM's speed
               drifts by 10-20% over minutes, so one side-by-side ratio is worth about +-0.1)
    figures    bench/load/metrics.py; goodput objectives: TTFT <= --ttft-slo and each request's p95
               inter-token gap <= --itl-slo (defaults 2 s and 0.25 s: what a 2-core CPU can hold
               for a 135M model under moderate load; tighten them on faster machines)

Run: `python -m bench serve [--mix mixed] [--rate R | --rates 0.5,1,2 | --concurrency C]
[--requests N] [--baseline-requests K] [--targets platform,platform-http,transformers,llama.cpp,vllm]`;
`python -m bench compare` is the same command. `make bench` is the standard comparison:
`--mix mixed --rates 0.25,0.5 --requests 24`, every target on the same 24 requests (about 8 minutes
on 2 cores: on this machine the platform and transformers each serve about 0.2-0.4 mixed requests
a second, so 0.25/s is near their capacity and 0.5/s above it). Writes var/bench/serve-<mix>.json
and .md, and PNG plots next to them; prints the table. Prompts and outputs are never logged.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

from bench.compare.serve_runs import run_platform, run_platform_http, run_platform_split, run_transformers
from bench.compare.serve_setup import KEYS, make_jobs
from bench.engine import hf_generate, load_hf
from bench.load.driver import Job
from bench.load.metrics import Objectives, summarize
from bench.load.prompts import artifact_encoder, exact_prompt
from bench.load.workload import MIXES, loads, rounds
from config.settings import ModelSettings
from serving.workers import artifact_for

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TTFT_SLO_S, ITL_SLO_S = 2.0, 0.25


def warm_up_job(seed: int) -> Job:
    from bench.load.workload import RequestSpec

    encode = artifact_encoder(artifact_for(ModelSettings()))
    text = exact_prompt(f"{seed}/warm-up", 32, encode)
    return Job(RequestSpec(-1, "warm-up", 0, None, 32, 4), text, tuple(encode(text)))


def composition(jobs: list[Job]) -> str:
    docs = sum(j.spec.kind == "document" for j in jobs)
    prefixed = sum(j.spec.prefix is not None for j in jobs)
    return f"{len(jobs)} requests ({docs} documents, {prefixed} with a shared prefix)"


def rates_arg(text: str) -> list[float]:
    return [float(r) for r in text.split(",") if r.strip()]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--mix", choices=sorted(MIXES), default="mixed")
    p.add_argument("--requests", type=int, help="requests per load (default: the mix's, 64)")
    p.add_argument("--rate", type=float, help="Poisson arrivals per second")
    p.add_argument("--rates", type=rates_arg, default=[], help="a sweep of rates, e.g. 0.5,1,2")
    p.add_argument("--concurrency", type=int, help="closed-loop clients instead of Poisson arrivals")
    p.add_argument("--baseline-requests", type=int, help="requests the baselines run (default: all)")
    p.add_argument("--targets", default="platform,transformers,llama.cpp", help="comma-separated")
    p.add_argument("--ttft-slo", type=float, default=TTFT_SLO_S, help="goodput TTFT objective (s)")
    p.add_argument("--itl-slo", type=float, default=ITL_SLO_S, help="goodput p95 inter-token objective (s)")
    p.add_argument("--queue-wait-s", type=float, default=600.0, help="platform admission queue allowance")
    p.add_argument("--budget", type=int, help="platform max_num_batched_tokens (default: the platform's)")
    p.add_argument("--quantization", default="none", choices=("none", "int8", "int4"), help="platform")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "auto"), help="platform")
    p.add_argument("--kv-cache-dtype", default="auto", choices=("float32", "bfloat16", "auto"), help="KV")
    p.add_argument("--kv-cache-blocks", type=int, default=0, help="KV blocks of the engine (0: its default)")
    p.add_argument(
        "--platform-workers",
        type=int,
        default=1,
        help="the platform's Triton workers (the fleet: 2 hosts of 1)",
    )
    p.add_argument("--vllm-dtype", default="float32", help="vLLM's --dtype (the platform's default)")
    p.add_argument(
        "--openvino-batched-tokens", type=int, default=1024, help="OpenVINO's max_num_batched_tokens"
    )
    p.add_argument("--timeout", type=float, default=900.0, help="per-request client timeout (s)")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of each load, the targets' order reversed every other round; the report adds each "
        "round's platform / baseline output tok/s and their median",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("var/bench"))
    args = p.parse_args()
    if args.rate is not None:
        args.rates = [args.rate, *args.rates]
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def main() -> int:
    from bench.compare.serve_report import write_report
    from bench.peers.peers import PEERS, unavailable

    args = parse_args()
    # A SIGTERM unwinds like Ctrl-C, so that every peer server started is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    mix = MIXES[args.mix]
    n = args.requests or mix.requests
    plan = loads(mix, n, args.rates, args.concurrency)
    wanted = [t.strip() for t in args.targets.split(",") if t.strip()]
    ours = ("platform", "platform-process", "platform-http", "platform-split", "fleet")
    unknown = [t for t in wanted if t not in (*ours, "transformers", *PEERS)]
    if unknown:
        raise SystemExit(f"unknown target(s) {', '.join(unknown)}")
    notes = []
    for name, why in unavailable(wanted).items():
        wanted.remove(name)
        notes.append(f"{name} skipped: {why}.")
        print(notes[-1], flush=True)
    started, load_at_start = time.perf_counter(), os.getloadavg()[0]
    jobs, warm = make_jobs(mix, n, args.seed), warm_up_job(args.seed)
    subset = jobs[: args.baseline_requests or n]
    notes.append(f"Workload: {composition(jobs)}; baselines: {composition(subset)}.")
    hf = load_hf(artifact_for(ModelSettings())) if "transformers" in wanted else None
    if hf is not None:
        hf_generate(hf, warm.prompt_ids, 4)
    runs: list[dict[str, Any]] = []
    slo = Objectives(args.ttft_slo, args.itl_slo)
    for load, label, number, order in rounds(plan, wanted, args.rounds):
        for target in order:
            t0 = time.perf_counter()
            if target == "platform":
                outcomes = run_platform(jobs, load, args, warm, notes)
            elif target == "platform-process":
                from bench.compare.platform_process import run_platform_process

                outcomes = run_platform_process(jobs, load, args, warm, notes)
            elif target == "platform-http":
                outcomes = run_platform_http(jobs, load, args, warm)
            elif target == "platform-split":  # two runs: its gRPC half and its HTTP half
                both = run_platform_split(jobs, load, args, warm)
                grpc_half = [o for o in both if o.index % 2 == 0]
                runs.append(
                    {
                        "target": "platform-split/grpc",
                        "load": label,
                        "base_load": load.label,
                        "round": number,
                        "rate": load.rate,
                        "outcomes": grpc_half,
                    }
                )
                outcomes, target = [o for o in both if o.index % 2], "platform-split/http"
            elif target == "fleet":
                from bench.compare.fleet import run_fleet

                outcomes, cost = run_fleet(jobs, load, args, warm, KEYS)
                notes.append(f"{label}: {cost.note()}")
                print(notes[-1], flush=True)
            elif target == "transformers":
                outcomes = run_transformers(subset, load, args, hf)
            else:
                outcomes = PEERS[target].run(subset, load, args, warm, notes)
            runs.append(
                {
                    "target": target,
                    "load": label,
                    "base_load": load.label,
                    "round": number,
                    "rate": load.rate,
                    "outcomes": outcomes,
                }
            )
            s = summarize(outcomes, slo)
            print(
                f"{target} @ {label}: {s['completed']}/{s['requests']} served, "
                f"{s['output_tok_per_s']:.1f} output tok/s, {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
    notes.append(
        f"Machine: {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads in this process; "
        f"1-minute load average {load_at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end."
    )
    print(write_report(args, mix, n, len(subset), slo, runs, notes))
    print(f"({time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
