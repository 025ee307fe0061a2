"""`bench aiperf`'s own parts: loads parse, AIPerf is asked for exactly our workload (sizes, greedy,
ignore_eos, the load's mode), its export and our summary line up row by row, and differences over
10% are flagged; the tokenizer is laid out as the offline hub cache AIPerf reads."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import pytest

from bench import aiperf
from bench.load.workload import Load


def args(**over: object) -> argparse.Namespace:
    base = {
        "input_tokens": 128,
        "output_tokens": 64,
        "requests": 16,
        "seed": 3,
        "ttft_slo": 1.0,
        "itl_slo": 0.1,
    }
    return argparse.Namespace(**(base | over))


def test_loads_parse_and_bad_ones_are_refused() -> None:
    assert aiperf.loads_arg("concurrency:1,rate:0.5") == [Load(concurrency=1), Load(rate=0.5)]
    with pytest.raises(argparse.ArgumentTypeError):
        aiperf.load_arg("burst:3")


def test_aiperf_is_asked_for_our_workload(tmp_path: Path) -> None:
    argv = aiperf.aiperf_argv("http://127.0.0.1:9", "m", Load(concurrency=4), args(), tmp_path)
    pairs = dict(itertools.pairwise(argv))
    assert pairs["--prompt-input-tokens-mean"] == "128" and pairs["--prompt-input-tokens-stddev"] == "0"
    assert pairs["--prompt-output-tokens-mean"] == "64" and pairs["--prompt-output-tokens-stddev"] == "0"
    assert pairs["--concurrency"] == "4" and pairs["--request-count"] == "16"
    assert pairs["--endpoint-type"] == "completions" and "--streaming" in argv
    assert {"ignore_eos:true", "temperature:0", "min_tokens:64"} <= set(argv)
    assert pairs["--goodput"] == "time_to_first_token:1000 inter_token_latency:100"
    rated = aiperf.aiperf_argv("http://127.0.0.1:9", "m", Load(rate=0.5), args(), tmp_path)
    assert "--concurrency" not in rated and rated[rated.index("--request-rate") + 1] == "0.5"


def test_rows_line_up_and_large_differences_are_flagged() -> None:
    theirs = {
        "time_to_first_token": {"p50": 100.0, "p95": 200.0},
        "inter_token_latency": {"p50": 20.0, "p95": 30.0},
        "output_token_throughput": {"avg": 50.0},
        "request_throughput": {"avg": 1.0},
        "good_request_count": {"avg": 3.0},
        "request_count": {"avg": 4.0},
    }
    ours = {
        "ttft_s": {"p50": 0.105, "p95": 0.3},
        "tpot_s": {"p50": 0.02, "p95": 0.03},
        "output_tok_per_s": 50.0,
        "request_per_s": 1.0,
        "goodput_share": 0.75,
    }
    rows = {label: (a, o) for label, a, o in aiperf.compare_rows(theirs, ours)}
    assert rows["TTFT p50 (ms)"] == (100.0, pytest.approx(105.0))
    assert rows["goodput (share)"] == (0.75, 0.75)
    assert aiperf.difference(100.0, 105.0) == "+5%"
    assert aiperf.difference(200.0, 300.0) == "+50% (> 10%)"
    assert aiperf.difference(None, 1.0) == "–"


def test_the_tokenizer_is_an_offline_hub_cache(
    tmp_path: Path, artifact_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aiperf, "HF_HOME", tmp_path / "hf")
    monkeypatch.setattr(aiperf, "ENVS_DIR", tmp_path)
    env = aiperf.tokenizer_cache(artifact_dir)
    assert env == {"HF_HOME": str((tmp_path / "hf").resolve()), "HF_HUB_OFFLINE": "1"}
    repo = tmp_path / "hf" / "hub" / "models--llm-platform--smollm2-135m"
    snapshot = repo / "snapshots" / (repo / "refs" / "main").read_text()
    assert json.loads((snapshot / "tokenizer.json").read_text()) == json.loads(
        (artifact_dir / "tokenizer.json").read_text()
    )
    assert json.loads((snapshot / "tokenizer_config.json").read_text())["eos_token"]
