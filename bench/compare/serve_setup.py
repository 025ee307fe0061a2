"""What one `python -m bench serve` run is made of: its requests (exact prompts for the workload's
token counts) and the platform's config for it (tenants with limits far above the load, so the
benchmark measures serving, not quotas), as sections or as the TOML file of a platform run as its
own process (the platform-process and fleet targets, `python -m bench platform-profile`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.load.driver import Job
from bench.load.prompts import artifact_encoder, exact_prompt, workload_prompt
from bench.load.workload import PREFIX_TOKENS, Mix, build_requests
from config.loader import parse_config
from config.settings import ModelSettings, PlatformConfig
from serving.workers import artifact_for

MODEL = "smollm2-135m"
KEYS = ["bench-tenant-0", "bench-tenant-1"]  # tenant i sends with KEYS[i]


def make_jobs(mix: Mix, n: int, seed: int) -> list[Job]:
    """The workload's requests with their prompts, each checked to be exactly its token count."""
    encode = artifact_encoder(artifact_for(ModelSettings()))
    prefixes = [exact_prompt(f"{seed}/prefix/{k}", PREFIX_TOKENS, encode) for k in range(mix.prefixes)]
    jobs = []
    for spec in build_requests(mix, n, seed):
        prefix = None if spec.prefix is None else prefixes[spec.prefix]
        text = workload_prompt(seed, spec.index, spec.body_tokens, prefix, encode)
        ids = tuple(encode(text))
        if len(ids) != spec.prompt_tokens:
            raise RuntimeError(
                f"request {spec.index}: {len(ids)} prompt tokens, expected {spec.prompt_tokens}"
            )
        jobs.append(Job(spec, text, ids))
    return jobs


def bench_tenants(keys: list[str]) -> list[dict[str, Any]]:
    """Tenant i with API key keys[i], its limits well above the workload: the benchmark measures
    serving, not quotas."""
    return [
        {
            "id": f"tenant-{i}",
            "api_keys": [key],
            "max_concurrent_generations": 1024,
            "max_queued_tokens": 10_000_000,
            "input_tokens_per_minute": 100_000_000,
            "output_tokens_per_minute": 100_000_000,
        }
        for i, key in enumerate(keys)
    ]


def platform_doc(
    store: Path,
    queue_wait_s: float,
    budget: int | None,
    workers: int = 1,
    **model_keys: str | int,  # [[models]] keys: quantization, dtype, kv_cache_dtype, kv_cache_blocks
) -> dict[str, Any]:
    """The platform's config as the sections of its TOML file."""
    model: dict[str, Any] = {"alias": MODEL, "workers": workers, **model_keys}
    if budget is not None:
        model["max_num_batched_tokens"] = budget
    return {
        "frontend": {"interactive_queue_wait_s": queue_wait_s, "metrics_listen": "127.0.0.1:0"},
        "store": {"url": f"sqlite:///{store}"},
        "tenants": bench_tenants(KEYS),
        "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0, "exit_timeout_s": 5},
        "models": [model],
    }


def toml(doc: dict[str, Any]) -> str:
    """The TOML of a config dict (tables, arrays of tables, scalars, lists of strings)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return "[" + ", ".join(value(x) for x in v) + "]"

    lines = []
    for section, body in doc.items():
        for table in body if isinstance(body, list) else [body]:
            lines.append(f"[[{section}]]" if isinstance(body, list) else f"[{section}]")
            lines += [f"{k} = {value(v)}" for k, v in table.items()]
            lines.append("")
    return "\n".join(lines)


def run_doc(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The platform's config for one run, its store in `work`, as TOML sections."""
    a = args
    return platform_doc(
        work / "control.sqlite", a.queue_wait_s, a.budget, a.platform_workers,
        quantization=a.quantization, dtype=a.dtype, kv_cache_dtype=a.kv_cache_dtype,
        kv_cache_blocks=a.kv_cache_blocks,
    )  # fmt: skip


def run_config(work: Path, args: argparse.Namespace) -> PlatformConfig:
    """The platform's config for one run, its store in `work`."""
    return parse_config(run_doc(work, args))
