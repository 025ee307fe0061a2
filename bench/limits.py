"""The machine's own limits, measured here, and the ceilings they put on serving the default model.

    bandwidth     sustained memory read bandwidth with the worker's threads: a sum over a buffer
                  far larger than the last-level cache (torch's vectorised reduction), best of
                  several passes; and what our int4 matmul itself reads at one row (bytes of its
                  packed weight per second), the decode step's own access pattern
    peaks         the throughput of our matmul kernels (llm::q4_linear, llm::q8_linear) and of
                  PyTorch's fp32 and bf16 matmuls on a compute-bound shape (256 rows, 2048 x 2048),
                  in GFLOP/s (2 x rows x in x out a call), best of several calls
    ceilings      single stream: bandwidth / bytes a decode step must read (the weights a token
                  passes through, the KV cache at the mean context); offline: peak / FLOPs a token
                  needs (every projection and the LM head, attention at the mean context). Each
                  takes the best figure measured above: an upper bound no server can pass on this
                  machine, not a forecast.

Threads as a worker runs them (bench/step_profile.py): the kernels' pool on every CPU, torch one
fewer. Run `python -m bench limits [--quantization int4] [--context 256]`; prints the figures and
writes var/bench/limits.json, which `python -m bench serve` reads to report its results as fractions
of these ceilings. Timing only: never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.compare.serve_report import LIMITS_FILE
from engine import kernels
from engine.config import LlamaConfig
from engine.quant import pack_q4, pack_q8, quantize_int4, quantize_int8

GIB = 1024**3


def best_of(fn: Callable[[], object], passes: int) -> float:
    """Seconds of the fastest of `passes` calls, after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def read_bandwidth(gib: float = 1.0, passes: int = 5) -> float:
    """Bytes a second a multi-threaded sum reads from a buffer of `gib` GiB."""
    buf = torch.ones(int(gib * GIB) // 4, dtype=torch.float32)
    return buf.numel() * 4 / best_of(lambda: buf.sum(), passes)


def kernel_read_bandwidth(out_features: int = 16384, in_features: int = 8192, passes: int = 5) -> float:
    """Bytes a second of packed int4 weight that llm::q4_linear reads at one row (a 64 MiB weight)."""
    packed = pack_q4(quantize_int4(torch.randn(out_features, in_features) * 0.02))
    x = torch.randn(1, in_features)
    seconds = best_of(lambda: torch.ops.llm.q4_linear(x, packed, out_features), passes)
    return packed.numel() * packed.element_size() / seconds


def matmul_peaks(rows: int = 256, size: int = 2048, passes: int = 5) -> dict[str, float]:
    """GFLOP/s of each matmul on [rows, size] x [size, size]^T."""
    w = torch.randn(size, size) * 0.02
    x = torch.randn(rows, size)
    flops = 2 * rows * size * size
    calls: dict[str, Callable[[], object]] = {}
    if kernels.loaded():
        q4, q8 = pack_q4(quantize_int4(w)), pack_q8(quantize_int8(w))
        calls["int4 (llm::q4_linear)"] = lambda: torch.ops.llm.q4_linear(x, q4, size)
        calls["int8 (llm::q8_linear)"] = lambda: torch.ops.llm.q8_linear(x, q8, size)
    calls["fp32 (torch)"] = lambda: F.linear(x, w)
    xb, wb = x.bfloat16(), w.bfloat16()
    calls["bf16 (torch)"] = lambda: F.linear(xb, wb)
    return {name: flops / best_of(call, passes) / 1e9 for name, call in calls.items()}


def weight_bytes_per_token(cfg: LlamaConfig, scheme: str) -> float:
    """Bytes of weight a decode step reads for one token: every projection and the LM head, in the
    scheme's storage (int4: half a byte a weight plus fp16 scale and minimum per 32; int8: one byte
    plus the same; none: fp32). The embedding is one row a token, left out."""
    per_weight = {"int4": 0.5 + 4 / 32, "int8": 1.0 + 4 / 32, "none": 4.0}[scheme]
    return per_weight * matmul_params(cfg)


def matmul_params(cfg: LlamaConfig) -> int:
    """Weights of every projection and the LM head: what each token is multiplied through."""
    q = cfg.num_heads * cfg.head_dim
    kv = cfg.num_kv_heads * cfg.head_dim
    attention = cfg.hidden_size * (q + 2 * kv) + q * cfg.hidden_size
    mlp = 3 * cfg.hidden_size * cfg.intermediate_size
    return cfg.num_layers * (attention + mlp) + cfg.vocab_size * cfg.hidden_size


def kv_bytes(cfg: LlamaConfig, context: int, kv_bytes_per_value: int) -> int:
    """Bytes of K and V a decode step reads at `context` positions."""
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * context * kv_bytes_per_value


def flops_per_token(cfg: LlamaConfig, context: int) -> float:
    """Multiply-adds x 2 a token needs: its projections and LM head, and attention over `context`."""
    attention = 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * context
    return 2.0 * matmul_params(cfg) + attention


def ceilings(
    cfg: LlamaConfig, scheme: str, context: int, kv_value_bytes: int, bandwidth: float, peak_gflops: float
) -> dict[str, float]:
    step_bytes = weight_bytes_per_token(cfg, scheme) + kv_bytes(cfg, context, kv_value_bytes)
    return {
        "decode_bytes_per_step": step_bytes,
        "single_stream_tok_s": bandwidth / step_bytes,
        "flops_per_token": flops_per_token(cfg, context),
        "offline_tok_s": peak_gflops * 1e9 / flops_per_token(cfg, context),
    }


def measure(scheme: str, context: int, kv_value_bytes: int) -> dict[str, object]:
    from prebuild.artifact import DEFAULT_NAME, ensure_artifact
    from prebuild.kernels import ensure_kernels

    cpus = len(os.sched_getaffinity(0))
    torch.set_num_threads(cpus)  # the sum and torch's matmuls: every CPU, as the kernels' pool
    isa = kernels.load(ensure_kernels())
    kernels.set_threads(cpus)
    cfg = LlamaConfig.from_file(ensure_artifact(DEFAULT_NAME, quantization=scheme) / "config.json")
    bandwidth = read_bandwidth()
    kernel_bw = kernel_read_bandwidth()
    peaks = matmul_peaks()
    return {
        "host": {"cpu": cpu_model(), "cpus": cpus, "kernels": isa, "machine": platform.machine()},
        "scheme": scheme,
        "context": context,
        "kv_value_bytes": kv_value_bytes,
        "read_bandwidth_gib_s": bandwidth / GIB,
        "q4_linear_read_gib_s": kernel_bw / GIB,
        "peak_gflops": peaks,
        "ceilings": ceilings(
            cfg, scheme, context, kv_value_bytes, max(bandwidth, kernel_bw), max(peaks.values())
        ),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report(result: dict[str, object]) -> str:
    host = result["host"]
    ceil = result["ceilings"]
    peaks = result["peak_gflops"]
    assert isinstance(host, dict) and isinstance(ceil, dict) and isinstance(peaks, dict)
    lines = [
        f"{host['cpu']}, {host['cpus']} CPUs, kernels {host['kernels']}",
        f"memory read: {result['read_bandwidth_gib_s']:.1f} GiB/s (sum over 1 GiB); "
        f"llm::q4_linear at one row reads {result['q4_linear_read_gib_s']:.1f} GiB/s",
        "matmul peaks, 256 x 2048 x 2048: " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items()),
        f"{result['scheme']}, context {result['context']}: a decode step reads "
        f"{ceil['decode_bytes_per_step'] / 2**20:.1f} MiB -> single-stream ceiling "
        f"{ceil['single_stream_tok_s']:.0f} tok/s",
        f"{ceil['flops_per_token'] / 1e6:.0f} MFLOP a token -> "
        f"offline ceiling {ceil['offline_tok_s']:.0f} tok/s",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quantization", choices=("none", "int8", "int4"), default="int4")
    parser.add_argument("--context", type=int, default=256, help="mean positions a decode step attends to")
    parser.add_argument("--kv-dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--out", type=Path, default=LIMITS_FILE)
    args = parser.parse_args()
    result = measure(args.quantization, args.context, 2 if args.kv_dtype == "bfloat16" else 4)
    print(report(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0
