"""The serving benchmark's report: a Markdown table per load with each target's figures and the
ratios platform / baseline, the same data as JSON (with per-request timings, never text), and plots."""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.load.metrics import Objectives, Outcome, summarize
from bench.load.workload import KINDS, Mix

Q3 = ("p50", "p95", "p99")
LIMITS_FILE = Path("var/bench/limits.json")  # written by `python -m bench limits` (bench/limits.py)
# (label, path into the summary, scale, format); latencies print in s or ms. A row whose figure no
# target has is left out, and so are TTFT by kind of request unless there are two kinds.
ROWS: list[tuple[str, tuple[str, ...], float, str]] = [
    ("request/s", ("request_per_s",), 1.0, "{:.3f}"),
    ("output tok/s", ("output_tok_per_s",), 1.0, "{:.1f}"),
    *((f"TTFT {q} (s)", ("ttft_s", q), 1.0, "{:.2f}") for q in Q3),
    *(
        (f"TTFT {q}, {k} requests (s)", ("ttft_by_kind_s", k, q), 1.0, "{:.2f}")
        for k in KINDS
        for q in Q3[:2]
    ),
    *((f"ITL {q} (ms)", ("itl_s", q), 1000.0, "{:.0f}") for q in Q3),
    *((f"TPOT {q} (ms)", ("tpot_s", q), 1000.0, "{:.0f}") for q in Q3),
    *((f"e2e {q} (s)", ("e2e_s", q), 1.0, "{:.2f}") for q in Q3),
    ("goodput (share of requests)", ("goodput_share",), 1.0, "{:.0%}"),
    ("goodput output tok/s", ("goodput_tok_per_s",), 1.0, "{:.1f}"),
]


def figure(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    """The number at `path` in a summary, or None where the summary has none."""
    value: Any = summary
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return None if value is None else float(value)


def ratio(ours: float | None, base: float | None) -> str:
    return "–" if ours is None or not base else f"{ours / base:.2f}x"


def errors_text(summary: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in summary["errors"].items()) or "none"


def text_row(name: str, cells: list[str], width: int) -> str:
    """A row without ratios: its cells, then empty ones up to `width` columns."""
    return f"| {name} | " + " | ".join(cells + [""] * (width - 1 - len(cells))) + " |"


def load_table(
    label: str, summaries: dict[str, dict[str, Any]], limits: dict[str, Any] | None = None
) -> list[str]:
    """Rows of one load: every target's figure, and platform / baseline for each baseline; with
    `limits` (a `bench limits` run), each target's share of the machine's ceilings."""
    targets = list(summaries)
    ref = next((t for t in ("platform", "platform-process") if t in summaries), "platform")
    baselines = [t for t in targets if t != ref]
    ours = summaries.get(ref)
    head = ["figure", *targets, *(f"{ref} / {b}" for b in baselines if ours)]
    lines = [f"### {label}", "", "| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    lines.append(
        text_row(
            "requests served / sent",
            [f"{s['completed']} / {s['requests']}" for s in summaries.values()],
            len(head),
        )
    )
    kinds = {k for s in summaries.values() for k in s["ttft_by_kind_s"]}
    for name, path, scale, fmt in ROWS:
        values = [figure(s, path) for s in summaries.values()]
        if all(v is None for v in values) or (path[0] == "ttft_by_kind_s" and len(kinds) < 2):
            continue
        cells = ["–" if v is None else fmt.format(v * scale) for v in values]
        if ours:
            cells += [ratio(figure(ours, path), figure(summaries[b], path)) for b in baselines]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(text_row("errors by status", [errors_text(s) for s in summaries.values()], len(head)))
    cached = [str(s["cached_prompt_tokens"]) for s in summaries.values()]
    lines.append(text_row("prompt tokens from cache", cached, len(head)))
    lines += ceiling_rows(summaries, limits, len(head))
    return [*lines, ""]


def load_limits(path: Path = LIMITS_FILE) -> dict[str, Any] | None:
    """The last `bench limits` run's figures, or None when there is none (or it is unreadable)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def ceiling_rows(
    summaries: dict[str, dict[str, Any]], limits: dict[str, Any] | None, width: int
) -> list[str]:
    """Each target's figures as shares of this machine's ceilings (`python -m bench limits`, for its
    scheme): a stream's decode speed (1 / TPOT p50) of the single-stream ceiling, and output tok/s
    of the offline one. None without a limits run."""
    if not limits:
        return []
    ceil, scheme = limits["ceilings"], limits["scheme"]
    streams, batch = [], []
    for s in summaries.values():
        tpot = figure(s, ("tpot_s", "p50"))
        streams.append("–" if not tpot else f"{1 / tpot / ceil['single_stream_tok_s']:.0%}")
        tok_s = figure(s, ("output_tok_per_s",))
        batch.append("–" if tok_s is None else f"{tok_s / ceil['offline_tok_s']:.0%}")
    return [
        text_row(f"a stream's speed / single-stream ceiling ({scheme})", streams, width),
        text_row(f"output tok/s / offline ceiling ({scheme})", batch, width),
    ]


def request_rows(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    return [
        {
            "index": o.index,
            "kind": o.kind,
            "output_tokens": o.output_tokens,
            "cached_tokens": o.cached_tokens,
            "ttft_s": o.ttft,
            "tpot_s": o.tpot,
            "e2e_s": o.e2e,
            "gaps_s": o.gaps,
            "error": o.error,
        }
        for o in outcomes
    ]


def scope(n: int, baseline_n: int) -> str:
    if baseline_n == n:
        return f"every target ran the same {n} requests per load with the same arrival offsets."
    return (
        f"the platform ran {n} requests per load, the baselines the first {baseline_n} of them with "
        "the same arrival offsets."
    )


def rounds_summary(runs: list[dict[str, Any]]) -> list[str]:
    """Per load run in several rounds (bench/load/workload.py `rounds`: a run's "round" is 1..n, 0 when
    its load ran once): each round's platform / baseline output tok/s, and the median over the
    rounds (none when every load ran once)."""
    by_round: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in runs:
        if r.get("round", 0) > 0:
            by_round.setdefault((r["base_load"], r["round"]), {})[r["target"]] = r["summary"]
    ratios: dict[tuple[str, str], list[float]] = {}
    for (load, _), summaries in sorted(by_round.items(), key=lambda item: item[0][1]):
        ref = next((t for t in ("platform", "platform-process") if t in summaries), None)
        if ref is None:
            continue
        ours = figure(summaries[ref], ("output_tok_per_s",))
        for base, summary in summaries.items():
            theirs = figure(summary, ("output_tok_per_s",))
            if base != ref and ours is not None and theirs:
                ratios.setdefault((load, f"{ref} / {base}"), []).append(ours / theirs)
    lines = []
    for (load, pair), values in ratios.items():
        each, median = ", ".join(f"{v:.2f}x" for v in values), statistics.median(values)
        lines.append(f"Output tok/s {pair} @ {load} over {len(values)} rounds: {each}; median {median:.2f}x")
    return [*lines, ""] if lines else []


def write_report(
    args: argparse.Namespace,
    mix: Mix,
    n: int,
    baseline_n: int,
    slo: Objectives,
    runs: list[dict[str, Any]],
    notes: list[str],
) -> str:
    from bench.compare.plots import plot_cdfs, plot_sweep

    stem = f"serve-{mix.name}"
    by_load: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        r["summary"] = summarize(r["outcomes"], slo)
        by_load.setdefault(r["load"], {})[r["target"]] = r["summary"]
    lines = [
        f"Mix `{mix.name}`, seed {args.seed}: {scope(n, baseline_n)} Goodput: TTFT <= {slo.ttft_s:g} s "
        f"and each request's p95 inter-token gap <= {slo.itl_p95_s * 1000:g} ms. Ratios are platform / "
        "baseline: above 1 is better for throughput and goodput, below 1 for latencies.",
        *notes,
        "",
    ]
    limits = load_limits()
    for label, summaries in by_load.items():
        lines += load_table(label, summaries, limits)
    lines += rounds_summary(runs)
    rated = [r for r in runs if r["rate"] is not None]
    plots = plot_cdfs(runs, args.out, stem)
    if len({r["rate"] for r in rated}) > 1:
        plots.append(plot_sweep(rated, args.out, stem))
    lines.append("Plots: " + ", ".join(str(p) for p in plots))
    text = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {
        "mix": asdict(mix),
        "requests": n,
        "baseline_requests": baseline_n,
        "seed": args.seed,
        "objectives": asdict(slo),
        "options": {k: str(v) for k, v in vars(args).items()},
        "notes": notes,
        "runs": [
            {
                "target": r["target"],
                "load": r["load"],
                "round": r.get("round", 0),
                "summary": r["summary"],
                "per_request": request_rows(r["outcomes"]),
            }
            for r in runs
        ],
    }
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    (args.out / f"{stem}.md").write_text(text + "\n")
    return text
