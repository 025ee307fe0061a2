"""Quantized model versions: their own immutable artifacts, and the quality gate against fp32
(greedy agreement on fixed prompts, perplexity on a fixed held-out text; bench/quality.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from artifacts.manifest import verify
from bench.quality import AGREEMENT_TOKENS, PROMPTS, THRESHOLDS, measure
from engine.weights import load_model
from prebuild.artifact import ensure_artifact, ensure_quantized


@functools.cache
def figures(artifact_dir: Path, scheme: str, kv_dtype: torch.dtype | None = None) -> dict:
    tokenizer = Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))
    reference = _reference(artifact_dir)
    path = artifact_dir if scheme == "none" else ensure_artifact(quantization=scheme)
    model = load_model(path, torch.float32)
    return measure(model, torch.float32, tokenizer, reference["tokens"], kv_dtype)


@functools.cache
def _reference(artifact_dir: Path) -> dict:
    tokenizer = Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))
    return measure(load_model(artifact_dir, torch.float32), torch.float32, tokenizer, None)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_quantized_version_is_its_own_immutable_artifact(artifact_dir: Path, scheme: str) -> None:
    base = verify(artifact_dir)
    path = ensure_artifact(quantization=scheme)
    manifest = verify(path)
    assert manifest.quantization == scheme and base.quantization == "none"
    assert manifest.name == base.name and manifest.version != base.version
    assert manifest.compatibility_key != base.compatibility_key  # the prefix cache never mixes them
    assert manifest.source["quantized_from"] == base.version_id
    assert ensure_quantized(artifact_dir, scheme) == path  # built once, then found
    assert ensure_quantized(path, scheme) == path
    with pytest.raises(ValueError, match=scheme):
        ensure_quantized(path, "int4" if scheme == "int8" else "int8")


def test_reference_is_deterministic_and_complete(artifact_dir: Path) -> None:
    ref = _reference(artifact_dir)
    assert len(ref["tokens"]) == len(PROMPTS) >= 20
    assert all(len(t) == AGREEMENT_TOKENS for t in ref["tokens"])
    assert figures(artifact_dir, "none")["agreement"] == 1.0


# fp32 KV as the reference runs, and bf16 KV (`kv_cache_dtype = "bfloat16"`, half the cache's memory,
# as the offline comparison serves): on AMX hosts that rounding and the tiles' bf16 activations
# together kept int4 at 75%, near its 70% gate, so the gate checks it too
@pytest.mark.parametrize("kv_dtype", [None, torch.bfloat16], ids=["fp32-kv", "bf16-kv"])
@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_quantized_version_meets_the_quality_gate(
    artifact_dir: Path, scheme: str, kv_dtype: torch.dtype | None
) -> None:
    min_agreement, max_ppl = THRESHOLDS[scheme]
    f, ref = figures(artifact_dir, scheme, kv_dtype), _reference(artifact_dir)
    assert f["agreement"] >= min_agreement
    assert f["perplexity"] <= ref["perplexity"] * (1 + max_ppl)
