"""The engine benchmark's report (bench/engine.py): the results as <out>/engine-<stamp>.json, and its
figures against their targets as a Markdown table, written beside it as .md and printed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def report(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"engine-{stamp}.json").write_text(json.dumps(results, indent=2))
    s, o = results["single_stream"], results["offline"]
    lines = [
        "| figure | transformers | ours | ratio | target |",
        "| --- | --- | --- | --- | --- |",
        f"| single stream fp32 (tok/s) | {s['transformers_fp32_tok_s']:.1f} | {s['ours_fp32_tok_s']:.1f} "
        f"| {s['ratio_fp32']:.2f}x | >= 2x |",
        f"| single stream bf16 vs fp32 HF (tok/s) | {s['transformers_fp32_tok_s']:.1f} "
        f"| {s['ours_bf16_tok_s']:.1f} "
        f"| {s['ratio_bf16_vs_transformers_fp32']:.2f}x | >= 3.5x |",
        f"| single stream bf16 vs bf16 HF (tok/s) | {s['transformers_bf16_tok_s']:.1f} "
        f"| {s['ours_bf16_tok_s']:.1f} "
        f"| {s['ratio_bf16_vs_transformers_bf16']:.2f}x | |",
        f"| offline {o['requests']} requests fp32 (tok/s) | {o['transformers_sequential_tok_s']:.1f} "
        f"| {o['ours_fp32_tok_s']:.1f} | {o['ratio']:.2f}x | >= 10x |",
    ]
    for budget, a in results["long_prompt_arrival"].items():
        lines.append(
            f"| 8-stream ITL, budget {budget}: p95 quiet / with 1,500-token arrival (ms) | "
            f"{a['quiet_p95_ms']:.0f} | {a['arrival_p95_ms']:.0f} (p99 {a['arrival_p99_ms']:.0f}, "
            f"max {a['arrival_max_ms']:.0f}) | {a['p95_ratio']:.2f}x | <= 2x |"
        )
    m = results["memory"]
    lines.append(
        f"| memory (MiB) | weights {m['weights_fp32_mib']:.0f} "
        f"| KV pool {m['kv_pool_1024_blocks_fp32_mib']:.0f} "
        f"| peak RSS {m['peak_rss_mib_this_process']:.0f} | |"
    )
    r = results["worker_rss"]
    lines.append(
        f"| Triton worker RSS (MiB), fp32, 1024-block pool | weights {r['weights_mib']:.0f} + KV "
        f"{r['kv_pool_mib']:.0f} | RSS {r['worker_rss_mib']:.0f} | {r['overhead_mib']:+.0f} over | <= +300 |"
    )
    table = "\n".join(lines)
    (out / f"engine-{stamp}.md").write_text(table + "\n")
    print(table)
