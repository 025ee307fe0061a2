"""Where a decode step's time goes: the engine in-process on the default model (a quantization
scheme of it), at each batch size, every sequence decoding, under torch's profiler; and where the
prefill step before them goes (batch x prompt tokens in one step), by the same categories.

    matmul      the projections (int4 gate_up with its fused SiLU x up) and the LM head (our q4/q8
                kernels, or PyTorch's mm/linear)
    attention   paged decode attention, and the K/V writes into the cache
    norm/act    RMSNorm (fused with the residual add), rotary, SiLU x up
    sampling    argmax / top-k / softmax / multinomial over the sampled rows
    other       the rest of the step's wall time: the scheduler, block tables, Python, the copies

The categories come from steps that call the kernels layer by layer (the profiler sees each);
"stacked step" is the wall time of the same steps as a worker runs them, every layer in one call
(engine/csrc/stack.cpp), which saves most of "other".

Threads as a worker on this machine runs them: one torch thread less than the CPUs (at least
one), and the kernels' own pool on every CPU (serving/workers.py, engine/kernels.py). Run:
`python -m bench profile [--quantization int4] [--batches 1,8,32] [--steps 16] [--prompt 128]`; prints a table
and writes var/bench/step-profile-<scheme>.json. Timing only: never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from engine import kernels
from engine.engine import Engine, EngineConfig, EngineRequest
from engine.model import LlamaForCausalLM

CATEGORIES = {
    "matmul": (
        "q4_linear",
        "q4_gate_up",
        "q8_linear",
        "aten::mm",
        "aten::addmm",
        "aten::linear",
        "aten::bmm",
        "pack_mm",
    ),
    "attention": ("attention", "write_kv", "index_copy", "scaled_dot_product"),
    "norm/act": ("rms_norm", "silu", "rotary", "rope"),
    "sampling": ("argmax", "topk", "softmax", "multinomial", "sample"),
}
STEP_OPS = ("aten::", "llm::")  # leaf ops: their self time adds up without counting a parent twice


def category(op: str) -> str | None:
    if not op.startswith(STEP_OPS):
        return None
    for name, needles in CATEGORIES.items():
        if any(n in op for n in needles):
            return name
    return "other ops"


def _engine(
    model: LlamaForCausalLM, batch: int, steps: int, prompt: int, kv_dtype: torch.dtype | None
) -> Engine:
    """An engine holding `batch` requests of `prompt` tokens each, 2 * steps + 2 tokens to make."""
    blocks = batch * ((prompt + 2 * steps + 2 + 15) // 16 + 1)
    config = EngineConfig(
        num_blocks=blocks, max_num_seqs=batch, max_num_batched_tokens=batch * prompt, kv_dtype=kv_dtype
    )
    engine = Engine(model, config)
    for i in range(batch):
        ids = tuple(100 + (i * 37 + j) % 20_000 for j in range(prompt))
        engine.add_request(EngineRequest(f"b{i}", ids, 2 * steps + 2))  # no stop ids: never early
    return engine


def _by_category(prof: profile, wall: float, steps: int) -> dict[str, float]:
    """Milliseconds per step by category, "other ops" the rest of the wall time."""
    spent: dict[str, float] = dict.fromkeys([*CATEGORIES, "other ops"], 0.0)
    for event in prof.key_averages():
        name = category(event.key)
        if name is not None:
            spent[name] += event.self_cpu_time_total / 1000 / steps
    spent["other ops"] = max(0.0, wall - sum(v for k, v in spent.items() if k != "other ops"))
    return spent


def profile_batch(
    model: LlamaForCausalLM, batch: int, steps: int, prompt: int, kv_dtype: torch.dtype | None = None
) -> dict[str, float]:
    """Milliseconds per decode step by category, with `batch` sequences decoding after `prompt`
    tokens each (prefilled in one step first, so every sequence decodes in every measured step),
    and that prefill step's own milliseconds ("prefill", batch * prompt tokens)."""
    engine = _engine(model, batch, steps, prompt, kv_dtype)
    start = time.perf_counter()
    engine.step()  # the prefill, and every sequence's first token
    prefill = (time.perf_counter() - start) * 1000
    engine.step()
    assert len(engine.scheduler.running) == batch and engine.last_batch_tokens == batch
    model.stacked = False  # the kernels called layer by layer: the profiler sees each one
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            engine.step()
        wall = (time.perf_counter() - start) * 1000 / steps
    model.stacked = True  # every layer in one call (engine/csrc/stack.cpp): what a worker runs
    start = time.perf_counter()
    for _ in range(steps):
        engine.step()
    stacked = (time.perf_counter() - start) * 1000 / steps
    return {"step": wall, **_by_category(prof, wall, steps), "stacked step": stacked, "prefill": prefill}


def profile_prefill(
    model: LlamaForCausalLM, batch: int, prompt: int, kv_dtype: torch.dtype | None = None
) -> dict[str, float]:
    """Milliseconds of one step prefilling `batch` prompts of `prompt` tokens (a fresh engine's first
    step, layer by layer), by category, and per prompt token ("ms a token")."""
    engine = _engine(model, batch, 1, prompt, kv_dtype)
    stacked, model.stacked = model.stacked, False
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            engine.step()
            wall = (time.perf_counter() - start) * 1000
    finally:
        model.stacked = stacked
    return {"step": wall, **_by_category(prof, wall, 1), "ms a token": wall / (batch * prompt)}


def main() -> int:
    from engine.weights import load_model
    from prebuild.artifact import DEFAULT_NAME, ensure_artifact
    from prebuild.kernels import ensure_kernels

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quantization", choices=("none", "int8", "int4"), default="int4")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=128, help="tokens per sequence before decoding")
    parser.add_argument("--no-kernels", action="store_true", help="eager PyTorch only")
    parser.add_argument("--kv-dtype", choices=("float32", "bfloat16"), help="the KV cache's (default: fp32)")
    parser.add_argument("--out", type=Path, default=Path("var/bench"))
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    torch.set_num_threads(max(1, cpus - 1))
    isa = "none"
    if not args.no_kernels:
        isa = kernels.load(ensure_kernels())
        kernels.set_threads(cpus)
    model = load_model(
        ensure_artifact(DEFAULT_NAME, quantization=args.quantization),
        torch.float32,
        None,
        isa not in ("none", "scalar"),
    )
    batches = [int(b) for b in args.batches.split(",")]
    kv = getattr(torch, args.kv_dtype) if args.kv_dtype else None
    results = {b: profile_batch(model, b, args.steps, args.prompt, kv) for b in batches}
    heads = ["step", *CATEGORIES, "other ops", "stacked step", "prefill"]
    threads = torch.get_num_threads()
    print(
        f"{args.quantization}, kernels {isa}, {threads} torch thread(s), KV {args.kv_dtype or 'float32'}: "
        f"ms per decode step (prefill: the step of batch x {args.prompt} prompt tokens before them)"
    )
    print("| batch | " + " | ".join(heads) + " |")
    print("|" + " ---: |" * (len(heads) + 1))
    for b, r in results.items():
        print(f"| {b} | " + " | ".join(f"{r[h]:.1f}" for h in heads) + " |")
    prefills = {b: profile_prefill(model, b, args.prompt, kv) for b in batches}
    heads = ["step", *CATEGORIES, "other ops", "ms a token"]
    print(f"\nms of the prefill step (batch x {args.prompt} prompt tokens, layer by layer), by category")
    print("| batch | " + " | ".join(heads) + " |")
    print("|" + " ---: |" * (len(heads) + 1))
    for b, r in prefills.items():
        print(f"| {b} | " + " | ".join(f"{r[h]:.{3 if h == 'ms a token' else 1}f}" for h in heads) + " |")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"step-profile-{args.quantization}.json"
    record = {"isa": isa, "quantization": args.quantization, "steps": results, "prefill": prefills}
    path.write_text(json.dumps(record, indent=2))
    return 0
