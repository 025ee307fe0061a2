"""Shared fixtures: the real model artifact and the Hugging Face reference model on the same weights."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def engine_kernels() -> str:
    """The engine's kernels, built for this machine and loaded into the test process: models built
    here run the fused path, as the workers' do (a test of the eager path passes use_kernels=False)."""
    from prebuild.kernels import load_kernels

    return load_kernels()


@pytest.fixture(scope="session")
def artifact_dir() -> Path:
    from prebuild.artifact import ensure_artifact

    return ensure_artifact()


@pytest.fixture(scope="session")
def hf_model(artifact_dir: Path):
    """transformers' LlamaForCausalLM on the artifact's fp32 weights: the greedy reference."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(artifact_dir), dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def hf_tokenizer(artifact_dir: Path):
    """transformers' tokenizer over the artifact's tokenizer.json and chat template."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(artifact_dir / "tokenizer.json"))
    tok.chat_template = (artifact_dir / "chat_template.jinja").read_text()
    return tok


def hf_greedy(hf_model, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    import torch

    with torch.inference_mode():
        out = hf_model.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=2,
        )
    return [int(t) for t in out[0][len(prompt_ids) :]]
