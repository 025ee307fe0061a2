"""The engine's greedy token ids equal transformers' on the same weights; sampling is seeded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from engine.engine import Engine, EngineConfig, EngineError, EngineRequest, FinishReason, StepOutput
from engine.sequence import SamplingParams
from engine.weights import load_model
from tests.conftest import hf_greedy

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
]


@pytest.fixture(scope="module")
def engine_model(artifact_dir: Path):
    return load_model(artifact_dir)


@pytest.fixture(scope="module")
def tokenizer(artifact_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))


def run_to_end(engine: Engine) -> dict[str, list[StepOutput]]:
    outputs: dict[str, list[StepOutput]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            outputs.setdefault(out.request_id, []).append(out)
    return outputs


def tokens_of(outs: list[StepOutput]) -> list[int]:
    return [t for o in outs for t in o.new_token_ids]


def test_greedy_matches_transformers(engine_model, hf_model, tokenizer) -> None:
    engine = Engine(engine_model)
    prompts = [tokenizer.encode(p, add_special_tokens=False).ids for p in PROMPTS]
    for i, ids in enumerate(prompts):
        engine.add_request(EngineRequest(f"r{i}", tuple(ids), 24, stop_token_ids=frozenset({2})))
    outputs = run_to_end(engine)
    for i, ids in enumerate(prompts):
        assert tokens_of(outputs[f"r{i}"]) == hf_greedy(hf_model, ids, 24), PROMPTS[i]
        assert outputs[f"r{i}"][-1].finish_reason in (FinishReason.LENGTH, FinishReason.STOP_TOKEN)


def test_stops_at_eos_and_reports_counts(engine_model, tokenizer) -> None:
    ids = tuple(tokenizer.encode("The capital of France is", add_special_tokens=False).ids)
    engine = Engine(engine_model)
    engine.add_request(EngineRequest("a", ids, 64, stop_token_ids=frozenset({2})))
    outs = run_to_end(engine)["a"]
    assert outs[-1].finish_reason is FinishReason.STOP_TOKEN
    assert tokens_of(outs)[-1] == 2
    assert outs[-1].num_output_tokens == len(tokens_of(outs)) < 64
    assert outs[-1].num_prompt_tokens == len(ids)


def test_ignoring_eos_generates_exactly_the_limit(engine_model, tokenizer) -> None:
    ids = tuple(tokenizer.encode("The capital of France is", add_special_tokens=False).ids)
    engine = Engine(engine_model)
    engine.add_request(EngineRequest("a", ids, 40, stop_token_ids=frozenset()))
    outs = run_to_end(engine)["a"]
    assert len(tokens_of(outs)) == 40
    assert outs[-1].finish_reason is FinishReason.LENGTH


def test_seeded_sampling_is_reproducible(engine_model, tokenizer) -> None:
    ids = tuple(tokenizer.encode("Tell me a story about", add_special_tokens=False).ids)

    def sampled(seed: int) -> list[int]:
        engine = Engine(engine_model)
        params = SamplingParams(temperature=1.0, top_k=50, top_p=0.95, seed=seed)
        engine.add_request(EngineRequest("s", ids, 16, params))
        return tokens_of(run_to_end(engine)["s"])

    first, again, other = sampled(7), sampled(7), sampled(8)
    assert first == again
    assert first != other


def test_abort_ends_request_with_aborted(engine_model) -> None:
    engine = Engine(engine_model)
    engine.add_request(EngineRequest("a", (1, 2, 3), 50))
    engine.add_request(EngineRequest("b", (4, 5, 6, 7), 2))
    first = engine.step()
    assert [o.request_id for o in first] == ["a", "b"]
    engine.abort("a")
    engine.abort("unknown")  # ignored
    outputs = run_to_end(engine)
    assert outputs["a"][-1].finish_reason is FinishReason.ABORTED
    assert outputs["a"][-1].num_output_tokens == 1
    assert len(tokens_of(first[1:] + outputs["b"])) == 2


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (EngineRequest("x", (), 4), "empty prompt"),
        (EngineRequest("x", (1,), 0), "at least 1"),
        (EngineRequest("x", (1,) * 8000, 500), "context length"),
    ],
)
def test_rejects_requests_it_cannot_serve(engine_model, request_: EngineRequest, message: str) -> None:
    with pytest.raises(EngineError, match=message):
        Engine(engine_model).add_request(request_)


def test_bfloat16_model_loads_and_generates(artifact_dir: Path) -> None:
    model = load_model(artifact_dir, torch.bfloat16)
    assert model.model.embed_tokens.weight.dtype is torch.bfloat16
    assert model.rotary.inv_freq.dtype is torch.float32
    engine = Engine(model, EngineConfig(dtype=torch.bfloat16, num_blocks=64))
    engine.add_request(EngineRequest("a", (504, 3575, 282, 4649, 314), 4))
    assert len(tokens_of(run_to_end(engine)["a"])) == 4
