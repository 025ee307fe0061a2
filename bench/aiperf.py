"""NVIDIA's AIPerf (the successor of genai-perf) against the platform's OpenAI endpoint and the HTTP
peers, beside our own client on the same load: `python -m bench aiperf [--targets platform,vllm,
llama.cpp-server] [--loads concurrency:1,concurrency:16,rate:0.5] [--input-tokens 128]
[--output-tokens 128] [--requests 32]`.

For each target one server is started (the platform as `make serve` runs it, in its own process
tree; vLLM and llama.cpp's server as `bench serve` runs them), and for each load AIPerf's `profile`
runs first (synthetic prompts of exactly --input-tokens tokens of our tokenizer, streamed
/v1/completions, greedy, ignore_eos, one warm-up request), then our client (bench/load/driver.py)
with the same sizes and the same load. AIPerf runs from its scratch environment
(var/bench-envs/aiperf, `make bench-deps`), offline: its tokenizer is the artifact's, laid out as a
Hugging Face cache under var/bench-envs/aiperf-hf/ (AIPerf reads a tokenizer by hub name).

What differs by definition, not by measurement (docs/performance.md): AIPerf's inter-token latency
is each request's mean gap ((end - first token) / (tokens - 1)), its percentiles taken over requests:
that is our TPOT, not our ITL, whose percentiles are over every gap. Its goodput objective is on that
mean gap; ours on each request's p95 gap. Writes var/bench/aiperf.json and .md. Timing only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.compare.serve_setup import KEYS, MODEL, make_jobs
from bench.load.metrics import Objectives, summarize
from bench.load.workload import Load, Mix
from bench.peers.completions import CompletionsTarget
from bench.peers.scratch_env import AIPERF_ENV, ENVS_DIR
from bench.processes.server_process import LoopbackServer

HF_HOME = ENVS_DIR / "aiperf-hf"
TOKENIZER = "llm-platform/smollm2-135m"  # its name in HF_HOME's hub cache
REVISION = "0" * 40
# (label, AIPerf's metric and statistic, our summary's path, scale to ms or 1)
ROWS = [
    ("TTFT p50 (ms)", ("time_to_first_token", "p50"), ("ttft_s", "p50"), 1000.0),
    ("TTFT p95 (ms)", ("time_to_first_token", "p95"), ("ttft_s", "p95"), 1000.0),
    ("ITL p50 (ms): AIPerf's / our TPOT", ("inter_token_latency", "p50"), ("tpot_s", "p50"), 1000.0),
    ("ITL p95 (ms): AIPerf's / our TPOT", ("inter_token_latency", "p95"), ("tpot_s", "p95"), 1000.0),
    ("output tok/s", ("output_token_throughput", "avg"), ("output_tok_per_s",), 1.0),
    ("request/s", ("request_throughput", "avg"), ("request_per_s",), 1.0),
]


def tokenizer_cache(artifact: Path) -> dict[str, str]:
    """The environment under which AIPerf finds the artifact's tokenizer offline."""
    from bench.peers.vllm_peer import model_folder

    source = model_folder(artifact, ENVS_DIR / "vllm-models")
    repo = HF_HOME / "hub" / f"models--{TOKENIZER.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"):
        shutil.copyfile(source / name, snapshot / name)
    return {"HF_HOME": str(HF_HOME.resolve()), "HF_HUB_OFFLINE": "1"}


def load_arg(text: str) -> Load:
    kind, _, value = text.partition(":")
    if kind == "concurrency":
        return Load(concurrency=int(value))
    if kind == "rate":
        return Load(rate=float(value))
    raise argparse.ArgumentTypeError(f"a load is concurrency:N or rate:R, not {text!r}")


def loads_arg(text: str) -> list[Load]:
    return [load_arg(x) for x in text.split(",") if x.strip()]


def aiperf_argv(url: str, model: str, load: Load, args: argparse.Namespace, out: Path) -> list[str]:
    argv = [str(AIPERF_ENV.prefix / "bin" / "aiperf"), "profile", "--model", model, "--url", url]
    argv += ["--endpoint-type", "completions", "--streaming", "--tokenizer", TOKENIZER]
    argv += ["--prompt-input-tokens-mean", str(args.input_tokens), "--prompt-input-tokens-stddev", "0"]
    argv += ["--prompt-output-tokens-mean", str(args.output_tokens), "--prompt-output-tokens-stddev", "0"]
    argv += ["--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0"]
    argv += ["--extra-inputs", f"min_tokens:{args.output_tokens}"]
    argv += ["--request-count", str(args.requests), "--warmup-request-count", "1"]
    argv += ["--random-seed", str(args.seed), "--api-key", KEYS[0], "--ui-type", "none"]
    argv += ["--no-server-metrics", "--no-gpu-telemetry", "--output-artifact-dir", str(out)]
    slo = f"time_to_first_token:{args.ttft_slo * 1000:g} inter_token_latency:{args.itl_slo * 1000:g}"
    argv += ["--goodput", slo]
    if load.concurrency is not None:
        return [*argv, "--concurrency", str(load.concurrency)]
    return [*argv, "--request-rate", f"{load.rate:g}", "--arrival-pattern", "poisson"]


def run_aiperf(
    url: str, model: str, load: Load, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    out = args.out / "aiperf" / f"{model}-{load.label.replace(' ', '-').replace('/', '')}-{time.time_ns()}"
    done = subprocess.run(
        aiperf_argv(url, model, load, args, out),
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        check=False,
    )
    export = out / "profile_export_aiperf.json"
    if done.returncode != 0 or not export.exists():
        raise RuntimeError(f"aiperf failed ({done.returncode}); see {out / 'logs' / 'aiperf.log'}")
    result: dict[str, Any] = json.loads(export.read_text())
    return result


@contextlib.contextmanager
def served(
    target: str, args: argparse.Namespace
) -> Iterator[tuple[LoopbackServer, str, Callable[[str], CompletionsTarget]]]:
    """The target's server for a `with` block: (server, model name, our client for its URL)."""
    from bench.compare.platform_process import platform_server
    from bench.compare.targets import platform_http_target
    from bench.peers import llamacpp, vllm_peer
    from bench.peers.peers import artifact, gguf

    log = args.out / f"aiperf-{target}.log"
    if target == "platform":
        with platform_server(args, log) as (server, _):
            # a fresh run id for each client: a request id used again would be an idempotent replay
            yield server, MODEL, lambda url: platform_http_target(url, MODEL, KEYS, f"ai-{time.time_ns()}")
    elif target == "vllm":
        folder = artifact()
        assert folder is not None
        with vllm_peer.server(folder, log, args.vllm_dtype) as server:
            yield server, vllm_peer.SERVED_NAME, vllm_peer.target
    elif target == "llama.cpp-server":
        with llamacpp.server(gguf(), log) as server:
            yield server, MODEL, llamacpp.server_target
    else:
        raise ValueError(f"unknown target {target!r}")


def ours(client: CompletionsTarget, load: Load, args: argparse.Namespace) -> dict[str, Any]:
    """Our client's summary of the same load: requests of exactly the same sizes, one warm-up."""
    from bench.peers.peers import warm_and_drive

    mix = Mix("aiperf", (args.input_tokens,) * 2, (args.output_tokens,) * 2, requests=args.requests)
    jobs = make_jobs(mix, args.requests + 1, args.seed)
    outcomes = warm_and_drive(client, jobs[:-1], load, args, jobs[-1])
    return summarize(outcomes, Objectives(args.ttft_slo, args.itl_slo))


def pick(data: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = data
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return None if value is None else float(value)


Row = tuple[str, float | None, float | None]  # figure, AIPerf's, ours


def compare_rows(aiperf: dict[str, Any], summary: dict[str, Any]) -> list[Row]:
    """(figure, AIPerf's, ours) for each row, both in the row's unit."""
    rows = []
    for label, theirs, mine, scale in ROWS:
        a, o = pick(aiperf, theirs), pick(summary, mine)
        rows.append((label, a, None if o is None else o * scale))
    good = pick(aiperf, ("good_request_count", "avg"))
    count = pick(aiperf, ("request_count", "avg"))
    share = None if good is None or not count else good / count
    rows.append(("goodput (share)", share, summary["goodput_share"]))
    return rows


def difference(a: float | None, o: float | None) -> str:
    if a is None or o is None or not a:
        return "–"
    d = (o - a) / a
    return f"{d:+.0%}" + (" (> 10%)" if abs(d) > 0.10 else "")


def cell(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def table(target: str, load: Load, rows: list[Row]) -> list[str]:
    head = ["| figure | AIPerf | ours | ours vs AIPerf |", "| --- | ---: | ---: | ---: |"]
    lines = [f"### {target} @ {load.label}", "", *head]
    for label, a, o in rows:
        lines.append(f"| {label} | {cell(a)} | {cell(o)} | {difference(a, o)} |")
    return [*lines, ""]


def main() -> int:
    from bench.peers.peers import artifact, unavailable

    p = argparse.ArgumentParser(prog="python -m bench aiperf", description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="platform,vllm,llama.cpp-server")
    p.add_argument("--loads", type=loads_arg, default="concurrency:1,concurrency:16")
    p.add_argument("--input-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--ttft-slo", type=float, default=1.0, help="goodput TTFT objective (s)")
    p.add_argument("--itl-slo", type=float, default=0.1, help="goodput inter-token objective (s)")
    p.add_argument("--quantization", default="int4", choices=("none", "int8", "int4"), help="platform")
    p.add_argument(
        "--kv-cache-dtype", default="auto", choices=("float32", "bfloat16", "auto"), help="platform"
    )
    p.add_argument("--vllm-dtype", default="bfloat16")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("var/bench"))
    # the platform's run settings (bench/compare/serve_setup.py run_doc), as bench serve's defaults
    p.set_defaults(queue_wait_s=600.0, budget=None, platform_workers=1, dtype="float32", kv_cache_blocks=0)
    args = p.parse_args()
    if why := AIPERF_ENV.missing():
        print(f"aiperf: {why}")
        return 2
    folder = artifact()
    assert folder is not None, "no model artifact (make artifact)"
    env = tokenizer_cache(folder)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    lines, results = [], []
    for target, why in unavailable(targets).items():
        print(f"{target} skipped: {why}")
        targets.remove(target)
    for target in targets:
        with served(target, args) as (server, model, client_for):
            for load in args.loads:
                theirs = run_aiperf(server.url, model, load, args, env)
                client = client_for(server.url)
                try:
                    summary = ours(client, load, args)
                finally:
                    client.close()
                rows = compare_rows(theirs, summary)
                lines += table(target, load, rows)
                print("\n".join(table(target, load, rows)), flush=True)
                results.append({"target": target, "load": load.label, "rows": rows, "ours": summary})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "aiperf.json").write_text(json.dumps(results, indent=1))
    (args.out / "aiperf.md").write_text("\n".join(lines) + "\n")
    return 0
