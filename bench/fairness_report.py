"""The fairness benchmark's report (bench/fairness.py): its table, its fair/FCFS ratios and the verdict
against the objective, written as var/bench/fairness.json and .md."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.fairness_scenario import Scenario

TTFT_OBJECTIVE_S = 1.0  # B's p95 TTFT target (issue 5)


def report(s: Scenario, runs: list[dict[str, Any]], out: Path) -> str:
    lines = [
        f"Tenant A: {s.docs_in_flight} documents of {s.doc_tokens} tokens in flight ({s.doc_output} out); "
        f"tenant B: {s.short_tokens[0]}-{s.short_tokens[1]} tokens ({s.short_output} out), Poisson "
        f"{s.rate}/s for {s.window_s:.0f} s, seed {s.seed}; tenant weights A 1, B {s.b_weight:g}. "
        "Output tok/s count tokens delivered inside the window (under FCFS most of B's land after it).",
        "",
        "| run | B requests | B TTFT p50 / p95 / max (s) | p95 <= 1 s | B TTFT idle (s) "
        "| A output tok/s | total output tok/s | A docs done |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        lines.append(
            f"| {r['run']} | {r['b_requests']} | {r['b_ttft_p50_s']:.2f} / {r['b_ttft_p95_s']:.2f} / "
            f"{r['b_ttft_max_s']:.2f} | {'yes' if meets(r) else '**no**'} | {r['b_quiet_ttft_s']:.2f} "
            f"| {r['a_output_tok_s']:.1f} | {r['total_output_tok_s']:.1f} "
            f"| {r['a_docs_finished_in_window']} |"
        )
    lines.append("")
    by_name = {r["run"]: r for r in runs}
    ratios: dict[str, dict[str, float]] = {}
    for r in runs:
        base = by_name.get(f"fcfs@{r['budget']}")
        if r["fair_share"] and base:
            ratios[r["run"]] = x = {
                "b_ttft_p95_fcfs_over_fair": base["b_ttft_p95_s"] / r["b_ttft_p95_s"],
                "a_tok_s_fair_over_fcfs": r["a_output_tok_s"] / base["a_output_tok_s"],
                "total_tok_s_fair_over_fcfs": r["total_output_tok_s"] / base["total_output_tok_s"],
            }
            lines.append(
                f"Budget {r['budget']}: B's p95 TTFT fcfs/fair = {x['b_ttft_p95_fcfs_over_fair']:.1f}x; "
                f"output tok/s fair/fcfs: A {x['a_tok_s_fair_over_fcfs']:.2f}x, "
                f"total {x['total_tok_s_fair_over_fcfs']:.2f}x."
            )
    fair = [r for r in runs if r["fair_share"]]
    if fair:
        lines.append(closing_note(fair))
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    results = {"scenario": asdict(s), "runs": runs, "ratios": ratios}
    (out / "fairness.json").write_text(json.dumps(results, indent=2))
    (out / "fairness.md").write_text(text + "\n")
    return text


def meets(r: dict[str, Any]) -> bool:
    return bool(r["b_ttft_p95_s"] <= TTFT_OBJECTIVE_S)


def closing_note(fair: list[dict[str, Any]]) -> str:
    """Which chunk budgets keep B's p95 TTFT within the objective, and A's throughput at each."""
    ok = [str(r["budget"]) for r in fair if meets(r)]
    ref = fair[0]
    cost = ", ".join(
        f"{r['budget']}: {r['a_output_tok_s']:.1f} ({r['a_output_tok_s'] / ref['a_output_tok_s']:.2f}x)"
        for r in fair
    )
    if ok:
        verdict = f"Fair share keeps B's p95 TTFT <= {TTFT_OBJECTIVE_S:.0f} s at budget(s) {', '.join(ok)}"
    else:
        best = min(fair, key=lambda r: r["b_ttft_p95_s"])
        verdict = (
            f"Fair share does NOT keep B's p95 TTFT <= {TTFT_OBJECTIVE_S:.0f} s on this machine at any "
            f"budget measured (best: {best['b_ttft_p95_s']:.2f} s at {best['budget']})"
        )
    return f"{verdict}. A's output tok/s by budget (vs {ref['budget']}): {cost}."
