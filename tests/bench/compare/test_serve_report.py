"""The serving report's table: each target's figures and platform / baseline ratios; and its plots."""

from __future__ import annotations

from pathlib import Path

from bench.compare.plots import cdf_points, plot_cdfs, plot_sweep, slug
from bench.compare.serve_report import load_table, ratio
from bench.load.metrics import Objectives, Outcome, summarize

SLO = Objectives(ttft_s=1.0, itl_p95_s=0.25)


def served(index: int, sent: float, times: list[float]) -> Outcome:
    return Outcome(index, "interactive", sent, len(times), [(t, 1) for t in times], times[-1])


def runs() -> list[dict[str, object]]:
    ours = [served(0, 0.0, [0.5, 0.6, 0.7, 0.8]), served(1, 1.0, [1.5, 1.7, 1.85, 2.0])]
    base = [
        served(0, 0.0, [1.0, 1.2, 1.4, 1.6]),
        Outcome(1, "interactive", 1.0, 4, end=4.0, error="UNAVAILABLE"),
    ]
    return [
        {
            "target": "platform",
            "load": "rate 1/s",
            "rate": 1.0,
            "outcomes": ours,
            "summary": summarize(ours, SLO),
        },
        {
            "target": "transformers",
            "load": "rate 1/s",
            "rate": 1.0,
            "outcomes": base,
            "summary": summarize(base, SLO),
        },
    ]


def test_each_figure_has_every_targets_value_and_the_ratio_platform_over_baseline() -> None:
    lines = load_table("rate 1/s", {r["target"]: r["summary"] for r in runs()})  # type: ignore[misc]
    assert lines[:3] == ["### rate 1/s", "", "| figure | platform | transformers | platform / transformers |"]
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines[4:-1]}
    assert rows["requests served / sent"] == "| requests served / sent | 2 / 2 | 1 / 2 |  |"
    assert rows["output tok/s"] == "| output tok/s | 4.0 | 1.0 | 4.00x |"  # 8 tokens / 2 s; 4 / 4 s
    assert rows["TTFT p50 (s)"] == "| TTFT p50 (s) | 0.50 | 1.00 | 0.50x |"
    assert rows["goodput (share of requests)"] == "| goodput (share of requests) | 100% | 50% | 2.00x |"
    assert "TTFT p95, interactive requests (s)" not in rows  # one kind: the same as TTFT p95
    assert rows["errors by status"] == "| errors by status | none | UNAVAILABLE 1 |  |"


def test_the_platform_in_its_own_process_is_the_reference_when_it_is_the_platform_run() -> None:
    summaries = {
        ("platform-process" if r["target"] == "platform" else r["target"]): r["summary"] for r in runs()
    }
    lines = load_table("rate 1/s", summaries)  # type: ignore[arg-type]
    assert lines[2] == "| figure | platform-process | transformers | platform-process / transformers |"
    assert "| output tok/s | 4.0 | 1.0 | 4.00x |" in lines


def test_a_ratio_needs_both_figures_and_a_nonzero_baseline() -> None:
    assert (ratio(3.0, 2.0), ratio(None, 2.0), ratio(3.0, None), ratio(3.0, 0.0)) == ("1.50x", "–", "–", "–")


def test_cdf_points_and_file_names() -> None:
    assert cdf_points([3.0, 1.0, 2.0, 2.0]) == ([1.0, 2.0, 2.0, 3.0], [0.25, 0.5, 0.75, 1.0])
    assert slug("rate 0.5/s") == "rate-0.5-s" and slug("concurrency 64") == "concurrency-64"


def test_plots_are_written_as_png(tmp_path: Path) -> None:
    sweep = runs() + [dict(r, rate=2.0, load="rate 2/s") for r in runs()]
    paths = [*plot_cdfs(sweep, tmp_path, "serve-x"), plot_sweep(sweep, tmp_path, "serve-x")]
    assert [p.name for p in paths] == [
        "serve-x-cdf-rate-1-s.png",
        "serve-x-cdf-rate-2-s.png",
        "serve-x-sweep.png",
    ]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_ttft_by_kind_of_request_where_there_are_two_kinds() -> None:
    doc = Outcome(1, "document", 0.0, 1, [(3.0, 1)], 3.0)
    ours = summarize([served(0, 0.0, [0.5, 0.6]), doc], SLO)
    lines = load_table("rate 1/s", {"platform": ours})
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines[4:-1]}
    assert rows["TTFT p95, interactive requests (s)"] == "| TTFT p95, interactive requests (s) | 0.50 |"
    assert rows["TTFT p95, document requests (s)"] == "| TTFT p95, document requests (s) | 3.00 |"


def test_rounds_reverse_the_targets_every_other_round_and_name_each_round() -> None:
    from bench.load.workload import Load, rounds

    load = Load(concurrency=64)
    assert [(r.label, r.number, r.order) for r in rounds([load], ["platform-process", "vllm"], 1)] == [
        ("concurrency 64", 0, ["platform-process", "vllm"])
    ]
    assert [(r.label, r.number, r.order) for r in rounds([load], ["platform-process", "vllm"], 3)] == [
        ("concurrency 64, round 1", 1, ["platform-process", "vllm"]),
        ("concurrency 64, round 2", 2, ["vllm", "platform-process"]),
        ("concurrency 64, round 3", 3, ["platform-process", "vllm"]),
    ]


def test_the_rounds_summary_gives_each_round_s_throughput_ratio_and_their_median() -> None:
    from bench.compare.serve_report import rounds_summary

    def tok(rate: float) -> dict[str, object]:
        return {"output_tok_per_s": rate}

    def run(target: str, number: int, rate: float, load: str = "concurrency 64") -> dict[str, object]:
        label = f"{load}, round {number}" if number else load
        return {"target": target, "load": label, "base_load": load, "round": number, "summary": tok(rate)}

    runs = [  # the order bench/compare/serve.py runs them in: the targets reversed every other round
        run("platform-process", 1, 440.0),
        run("vllm", 1, 400.0),
        run("vllm", 2, 500.0),
        run("platform-process", 2, 450.0),
        run("platform-process", 3, 420.0),
        run("vllm", 3, 400.0),
    ]
    assert rounds_summary(runs) == [
        "Output tok/s platform-process / vllm @ concurrency 64 over 3 rounds: 1.10x, 0.90x, 1.05x; "
        "median 1.05x",
        "",
    ]
    # a load whose label happens to contain ", round " but ran once: no summary
    assert (
        rounds_summary([run("platform-process", 0, 440.0, "x, round y"), run("vllm", 0, 400.0, "x, round y")])
        == []
    )


def test_with_a_limits_run_each_target_is_a_share_of_the_ceilings() -> None:
    """TPOT p50 of 0.1 s is 10 tok/s a stream: 50% of a 20 tok/s single-stream ceiling; 4 output
    tok/s is 10% of a 40 tok/s offline ceiling. Without a limits run there are no such rows."""
    summaries = {r["target"]: r["summary"] for r in runs()}
    limits = {"scheme": "int4", "ceilings": {"single_stream_tok_s": 20.0, "offline_tok_s": 40.0}}
    lines = load_table("rate 1/s", summaries, limits)  # type: ignore[arg-type]
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines[4:-1]}
    assert rows["a stream's speed / single-stream ceiling (int4)"].startswith(
        "| a stream's speed / single-stream ceiling (int4) | 50% | "
    )
    offline = rows["output tok/s / offline ceiling (int4)"]
    assert offline == "| output tok/s / offline ceiling (int4) | 10% | 2% |  |"
    assert not any("ceiling" in line for line in load_table("rate 1/s", summaries))  # type: ignore[arg-type]
