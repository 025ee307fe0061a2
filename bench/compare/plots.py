"""PNG plots of the serving benchmark (matplotlib, Agg backend: no display needed).

<stem>-cdf-<load>.png   CDFs of TTFT and of inter-token gaps, one line per target
<stem>-sweep.png        output tok/s, p95 TTFT and p95 ITL against the request rate, per target
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import ScalarFormatter


def cdf_points(values: list[float]) -> tuple[list[float], list[float]]:
    """Sorted values and the share of values at or below each."""
    ordered = sorted(values)
    return ordered, [(i + 1) / len(ordered) for i in range(len(ordered))]


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-")


def plot_cdfs(runs: list[dict[str, Any]], out: Path, stem: str) -> list[Path]:
    """One figure per load; runs carry "target", "load" and "outcomes" (bench.load.metrics.Outcome)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for load in dict.fromkeys(r["load"] for r in runs):
        fig, (ttft_ax, itl_ax) = plt.subplots(1, 2, figsize=(11, 4))
        for r in (r for r in runs if r["load"] == load):
            served = [o for o in r["outcomes"] if o.error is None]
            ttfts = [o.ttft for o in served if o.ttft is not None]
            gaps = [1000 * g for o in served for g in o.gaps]
            if ttfts:
                ttft_ax.step(*cdf_points(ttfts), where="post", label=r["target"])
            if gaps:
                itl_ax.step(*cdf_points(gaps), where="post", label=r["target"])
        ttft_ax.set(title=f"TTFT, {load}", xlabel="seconds", ylabel="share of requests")
        itl_ax.set(title=f"Inter-token gaps, {load}", xlabel="milliseconds", ylabel="share of gaps")
        itl_ax.set_xscale("log")
        itl_ax.xaxis.set_major_formatter(ScalarFormatter())
        itl_ax.xaxis.set_minor_formatter(ScalarFormatter())
        for ax in (ttft_ax, itl_ax):
            ax.grid(alpha=0.3)
            ax.legend()
        paths.append(save(fig, out / f"{stem}-cdf-{slug(load)}.png"))
    return paths


def plot_sweep(runs: list[dict[str, Any]], out: Path, stem: str) -> Path:
    """Runs carry "target", "rate" and "summary" (bench.load.metrics.summarize)."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    panels = (
        ("output tok/s", lambda s: s["output_tok_per_s"]),
        ("p95 TTFT (s)", lambda s: s["ttft_s"]["p95"] if s["ttft_s"] else None),
        ("p95 inter-token gap (ms)", lambda s: 1000 * s["itl_s"]["p95"] if s["itl_s"] else None),
    )
    for target in dict.fromkeys(r["target"] for r in runs):
        mine = sorted((r for r in runs if r["target"] == target), key=lambda r: r["rate"])
        for ax, (_, value) in zip(axes, panels, strict=True):
            points = [(r["rate"], value(r["summary"])) for r in mine]
            xs, ys = [x for x, y in points if y is not None], [y for _, y in points if y is not None]
            ax.plot(xs, ys, marker="o", label=target)
    for ax, (title, _) in zip(axes, panels, strict=True):
        ax.set(title=title, xlabel="request rate (per s)")
        ax.grid(alpha=0.3)
        ax.legend()
    return save(fig, out / f"{stem}-sweep.png")


def save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
