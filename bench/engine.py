"""The engine benchmark: our engine against Hugging Face `transformers` on the same weights, in one
run on one machine, reported as ratios (never as a timed test).

    single-stream decode   128-token prompt, 256 output tokens: output tokens/s, fp32 and bf16
    offline batch          64 requests of 128 in / 128 out submitted at once vs transformers one
                           request at a time (measured on a few, as a rate)
    long-prompt arrival    8 streams decoding; a 1,500-token prompt arrives: their inter-token
                           latency (p50/p95/p99/max) with and without the arrival
    memory                 peak RSS against weights + KV pool

Run: `python -m bench engine [--quick] [--out var/bench]`. Writes JSON and Markdown (bench/engine_report.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.engine_report import report
from engine.config import DTYPES
from engine.engine import Engine, EngineConfig, EngineRequest
from engine.kv_cache import PagedKVCache
from engine.model import LlamaForCausalLM
from engine.weights import load_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(slots=True, frozen=True)
class Workload:
    single_prompt: int = 128
    single_output: int = 256
    offline_requests: int = 64
    offline_prompt: int = 128
    offline_output: int = 128
    hf_offline_samples: int = 3
    streams: int = 8
    stream_output: int = 160
    long_prompt: int = 1500


QUICK = Workload(
    single_output=64, offline_requests=16, offline_output=32, hf_offline_samples=1, stream_output=48
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def prompt_ids(n: int, seed: int) -> tuple[int, ...]:
    """Deterministic prompt of exactly n ordinary token ids (the vocabulary's common range)."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(int(t) for t in torch.randint(100, 20_000, (n,), generator=gen))


def run_engine(engine: Engine, requests: list[EngineRequest]) -> float:
    """Seconds to finish every request submitted at once."""
    for req in requests:
        engine.add_request(req)
    start = time.perf_counter()
    while engine.has_unfinished():
        engine.step()
    return time.perf_counter() - start


def ours_single(model: LlamaForCausalLM, w: Workload, dtype: str) -> float:
    engine = Engine(model, EngineConfig(num_blocks=64, dtype=DTYPES[dtype]))
    run_engine(engine, [EngineRequest("warm", prompt_ids(16, 0), 4)])
    req = EngineRequest("s", prompt_ids(w.single_prompt, 1), w.single_output)
    return w.single_output / run_engine(engine, [req])


def load_hf(artifact: Path, dtype: torch.dtype = torch.float32) -> Any:
    """transformers' LlamaForCausalLM on the artifact's weights, in eval mode."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(artifact), dtype=dtype).eval()


def hf_generate(hf: Any, prompt: tuple[int, ...], n: int, streamer: Any = None) -> float:
    """Seconds for transformers to generate exactly n tokens greedily after `prompt` (EOS ignored);
    `streamer` (put(ids)/end()) sees the prompt, then each new token as it is made."""
    ids = torch.tensor([prompt])
    start = time.perf_counter()
    with torch.inference_mode():
        out = hf.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            pad_token_id=2,
            streamer=streamer,
        )
    assert out.shape[1] == len(prompt) + n
    return time.perf_counter() - start


def offline(model: LlamaForCausalLM, w: Workload) -> float:
    engine = Engine(model, EngineConfig(num_blocks=1024, max_num_seqs=64, max_num_batched_tokens=512))
    reqs = [
        EngineRequest(f"o{i}", prompt_ids(w.offline_prompt, 100 + i), w.offline_output)
        for i in range(w.offline_requests)
    ]
    return w.offline_requests * w.offline_output / run_engine(engine, reqs)


def long_prompt_arrival(model: LlamaForCausalLM, w: Workload, budget: int, arrive: bool) -> list[float]:
    """Inter-token gaps (s) of 8 decoding streams; optionally a long prompt arrives at step 8."""
    engine = Engine(model, EngineConfig(num_blocks=512, max_num_batched_tokens=budget))
    for i in range(w.streams):
        engine.add_request(EngineRequest(f"d{i}", prompt_ids(64, 200 + i), w.stream_output))
    while any(s.num_output_tokens == 0 for s in engine.scheduler.waiting + engine.scheduler.running):
        engine.step()  # every stream has its first token: measure decode gaps from here
    gaps: list[float] = []
    last = time.perf_counter()
    step = 0
    while any(s.id.startswith("d") for s in engine.scheduler.running):
        if arrive and step == 8:
            engine.add_request(EngineRequest("long", prompt_ids(w.long_prompt, 999), 8))
        outs = engine.step()
        now = time.perf_counter()
        gaps.extend(now - last for o in outs if o.request_id.startswith("d") and o.new_token_ids)
        last = now
        step += 1
    return gaps


def worker_rss(artifact: Path, work: Path, requests: int) -> dict[str, float]:
    """RSS of the real Triton worker (its Python-backend stub) after serving concurrent requests."""
    import asyncio

    from artifacts.manifest import read_manifest
    from frontend.dispatch.worker_client import TritonWorker, WorkerRequest
    from serving.triton import TritonServer
    from worker.deployment import ModelDeployment, materialize_repository

    manifest = read_manifest(artifact)
    name = f"bench--{manifest.version}"
    repo = materialize_repository([ModelDeployment(name, artifact, manifest.version)], work / "models")

    async def load(url: str, headers: dict[str, str]) -> None:
        worker = TritonWorker(url, headers=headers)

        async def one(i: int) -> None:
            req = WorkerRequest(name, prompt_ids(128, 300 + i), 64, end_id=None, generation_id=f"w{i}")
            async for _ in worker.generate(req):
                pass

        await asyncio.gather(*(one(i) for i in range(requests)))
        await worker.close()

    with TritonServer(repo, work) as server:
        server.load_model(name)
        asyncio.run(load(server.grpc_url, server.grpc_headers))
        rss = 0
        for proc in Path("/proc").iterdir():
            try:
                cmdline = (proc / "cmdline").read_bytes()
                if b"triton_python_backend_stub" in cmdline and name.encode() in cmdline:
                    status = (proc / "status").read_text()
                    rss = max(
                        rss, int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1])
                    )
            except (OSError, StopIteration, ValueError):
                continue
    cfg = load_model(artifact).config
    weights = (artifact / "model.safetensors").stat().st_size
    pool = 1024 * PagedKVCache.bytes_per_block(cfg, 16, torch.float32)
    return {
        "worker_rss_mib": rss / 1024,
        "weights_mib": weights / 2**20,
        "kv_pool_mib": pool / 2**20,
        "overhead_mib": rss / 1024 - (weights + pool) / 2**20,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench engine", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workload (a smoke run)")
    parser.add_argument("--out", type=Path, default=Path("var/bench"))
    parser.add_argument("--chunk-budgets", default="64,512", help="max_num_batched_tokens values to compare")
    args = parser.parse_args()
    w = QUICK if args.quick else Workload()
    from prebuild.artifact import ensure_artifact

    artifact = ensure_artifact()
    results: dict[str, Any] = {"workload": w.__class__.__name__, "threads": torch.get_num_threads()}
    fp32 = load_model(artifact, torch.float32)
    bf16 = load_model(artifact, torch.bfloat16)
    hf, hf_bf16 = load_hf(artifact), load_hf(artifact, torch.bfloat16)

    hf_generate(hf, prompt_ids(16, 0), 4)
    single_prompt = prompt_ids(w.single_prompt, 1)
    hf_single = w.single_output / hf_generate(hf, single_prompt, w.single_output)
    hf_single_bf16 = w.single_output / hf_generate(hf_bf16, single_prompt, w.single_output)
    ours_fp32, ours_bf16 = ours_single(fp32, w, "float32"), ours_single(bf16, w, "bfloat16")
    results["single_stream"] = {
        "transformers_fp32_tok_s": hf_single,
        "transformers_bf16_tok_s": hf_single_bf16,
        "ours_fp32_tok_s": ours_fp32,
        "ours_bf16_tok_s": ours_bf16,
        "ratio_fp32": ours_fp32 / hf_single,
        "ratio_bf16_vs_transformers_fp32": ours_bf16 / hf_single,
        "ratio_bf16_vs_transformers_bf16": ours_bf16 / hf_single_bf16,
    }

    hf_times = [
        hf_generate(hf, prompt_ids(w.offline_prompt, 100 + i), w.offline_output)
        for i in range(w.hf_offline_samples)
    ]
    hf_offline = w.offline_output / statistics.mean(hf_times)
    ours_offline = offline(fp32, w)
    results["offline"] = {
        "requests": w.offline_requests,
        "transformers_sequential_tok_s": hf_offline,
        "ours_fp32_tok_s": ours_offline,
        "ratio": ours_offline / hf_offline,
    }

    arrival: dict[str, Any] = {}
    for budget in (int(b) for b in args.chunk_budgets.split(",")):
        base = long_prompt_arrival(fp32, w, budget, arrive=False)
        hit = long_prompt_arrival(fp32, w, budget, arrive=True)
        arrival[str(budget)] = {
            f"{name}_{stat}_ms": 1000 * fn(gaps)
            for name, gaps in (("quiet", base), ("arrival", hit))
            for stat, fn in (
                ("p50", lambda g: percentile(g, 50)),
                ("p95", lambda g: percentile(g, 95)),
                ("p99", lambda g: percentile(g, 99)),
                ("max", max),
            )
        }
        arrival[str(budget)]["p95_ratio"] = percentile(hit, 95) / percentile(base, 95)
    results["long_prompt_arrival"] = arrival

    cfg = fp32.config
    weights = sum(p.numel() * p.element_size() for p in fp32.parameters())
    kv_pool = 1024 * PagedKVCache.bytes_per_block(cfg, 16, torch.float32)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    results["memory"] = {
        "weights_fp32_mib": weights / 2**20,
        "kv_pool_1024_blocks_fp32_mib": kv_pool / 2**20,
        "peak_rss_mib_this_process": peak / 2**20,
        "note": "this process also holds bf16 weights and two transformers models; see worker_rss",
    }
    results["worker_rss"] = worker_rss(artifact, args.out / "triton", 16 if args.quick else 64)
    report(results, args.out)
    return 0
