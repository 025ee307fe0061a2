"""`bench limits` counts what a token costs from the model's own shapes: the weights it is
multiplied through are exactly the checkpoint's projections and (tied) LM head, the bytes a decode
step reads follow the scheme's storage, and the ceilings divide the measured figures by them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open

from bench.compare.serve_report import load_limits
from bench.limits import ceilings, flops_per_token, kv_bytes, matmul_params, weight_bytes_per_token
from engine.config import LlamaConfig


def test_matmul_params_are_the_checkpoints_projections_and_head(artifact_dir: Path) -> None:
    cfg = LlamaConfig.from_file(artifact_dir / "config.json")
    counted = 0
    with safe_open(str(artifact_dir / "model.safetensors"), "pt") as f:
        for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
            if name.endswith("_proj.weight"):
                counted += f.get_slice(name).get_shape()[0] * f.get_slice(name).get_shape()[1]
    head = cfg.vocab_size * cfg.hidden_size  # tied: the embedding's matrix, read as the LM head
    assert matmul_params(cfg) == counted + head


def test_storage_and_kv_bytes(artifact_dir: Path) -> None:
    cfg = LlamaConfig.from_file(artifact_dir / "config.json")
    params = matmul_params(cfg)
    assert weight_bytes_per_token(cfg, "none") == 4 * params
    assert weight_bytes_per_token(cfg, "int8") == pytest.approx(1.125 * params)
    assert weight_bytes_per_token(cfg, "int4") == pytest.approx(0.625 * params)
    per_position = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 2
    assert kv_bytes(cfg, 100, 2) == 100 * per_position
    assert flops_per_token(cfg, 0) == 2 * params
    assert flops_per_token(cfg, 10) > flops_per_token(cfg, 0)


def test_ceilings_divide_the_measured_figures(artifact_dir: Path) -> None:
    cfg = LlamaConfig.from_file(artifact_dir / "config.json")
    out = ceilings(cfg, "int4", 256, 2, bandwidth=10e9, peak_gflops=100.0)
    assert out["single_stream_tok_s"] == pytest.approx(10e9 / out["decode_bytes_per_step"])
    assert out["offline_tok_s"] == pytest.approx(100e9 / out["flops_per_token"])
    faster = ceilings(cfg, "int4", 256, 2, bandwidth=20e9, peak_gflops=200.0)
    assert faster["single_stream_tok_s"] == pytest.approx(2 * out["single_stream_tok_s"])


def test_load_limits_reads_a_run_and_tolerates_none(tmp_path: Path) -> None:
    assert load_limits(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert load_limits(tmp_path / "bad.json") is None
    (tmp_path / "ok.json").write_text(json.dumps({"ceilings": {"offline_tok_s": 5.0}}))
    assert load_limits(tmp_path / "ok.json") == {"ceilings": {"offline_tok_s": 5.0}}
