"""The vLLM peer's pure parts: its model folder beside the artifact, its requests, token counting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.load.driver import Job
from bench.load.workload import RequestSpec
from bench.peers import vllm_peer
from bench.peers.scratch_env import ScratchEnv
from bench.peers.vllm_peer import chunk_tokens, model_folder, request_body

CONFIG = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "max_position_embeddings": 8192}
TOKENIZER = {
    "added_tokens": [
        {"id": 0, "content": "<|endoftext|>"},
        {"id": 1, "content": "<|im_start|>"},
        {"id": 2, "content": "<|im_end|>"},
    ]
}


def make_artifact(root: Path) -> Path:
    artifact = root / "models" / "v1"
    artifact.mkdir(parents=True)
    (artifact / "config.json").write_text(json.dumps(CONFIG))
    (artifact / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    (artifact / "model.safetensors").write_bytes(b"weights")
    (artifact / "manifest.json").write_text("{}")
    return artifact


def test_the_model_folder_links_the_artifact_and_adds_the_two_configs(tmp_path: Path) -> None:
    artifact = make_artifact(tmp_path)
    before = sorted(p.name for p in artifact.iterdir())
    folder = model_folder(artifact, tmp_path / "scratch")
    assert folder == tmp_path / "scratch" / "v1"
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert (folder / "model.safetensors").resolve() == (artifact / "model.safetensors").resolve()
    assert json.loads((folder / "tokenizer_config.json").read_text()) == {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 8192,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|im_end|>",
    }
    assert json.loads((folder / "generation_config.json").read_text()) == {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 2,
    }
    assert sorted(p.name for p in artifact.iterdir()) == before  # the artifact is never written


def test_the_model_folder_is_made_again_without_change(tmp_path: Path) -> None:
    artifact = make_artifact(tmp_path)
    first = model_folder(artifact, tmp_path / "scratch")
    stamps = {p.name: p.lstat().st_mtime_ns for p in first.iterdir()}
    again = model_folder(artifact, tmp_path / "scratch")
    assert {p.name: p.lstat().st_mtime_ns for p in again.iterdir()} == stamps


def test_vllm_is_skipped_without_its_environment_or_an_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = ScratchEnv("vllm", "vllm", root=tmp_path / "envs")
    monkeypatch.setattr(vllm_peer, "VLLM_ENV", env)
    artifact = make_artifact(tmp_path)
    assert vllm_peer.available(artifact) == f"no scratch environment at {env.prefix} (make bench-deps)"
    (env.prefix / "bin").mkdir(parents=True)
    env.python.touch()
    package = env.prefix / "lib" / "python3.11" / "site-packages" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").touch()
    assert vllm_peer.available(artifact) is None
    assert vllm_peer.available(None) == "no model artifact (make artifact)"


def test_a_request_sends_the_token_ids_greedy_to_the_forced_length() -> None:
    job = Job(RequestSpec(0, "interactive", 0, None, 3, 5), "text", (4, 5, 6))
    assert request_body(job) == {
        "model": "smollm2-135m",
        "prompt": [4, 5, 6],
        "max_tokens": 5,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "return_token_ids": True,
    }


def test_a_chunk_counts_its_output_token_ids_not_the_prompts() -> None:
    first = {"choices": [{"text": "ab", "token_ids": [9, 10], "prompt_token_ids": [4, 5, 6]}]}
    assert chunk_tokens(first) == 2
    assert chunk_tokens({"choices": [{"text": "", "token_ids": None, "finish_reason": "length"}]}) == 0
