"""Log-probabilities on the real model: each generated token's, and its most likely alternatives',
equal transformers' log-softmax of the same fp32 weights' logits within 1e-4, whatever the batch;
under a constraint they are the model's own (taken before the mask)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from contracts.guides import GUIDE_JSON_SCHEMA
from engine.constraints import Grammars
from engine.engine import Engine, EngineConfig, EngineRequest, StepOutput
from engine.model import LlamaForCausalLM
from engine.sequence import SamplingParams
from engine.weights import load_model

EOS = frozenset({2})
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def model(artifact_dir: Path) -> LlamaForCausalLM:
    return load_model(artifact_dir)


def run(engine: Engine, requests: list[EngineRequest]) -> dict[str, list[StepOutput]]:
    outputs: dict[str, list[StepOutput]] = {r.request_id: [] for r in requests}
    for r in requests:
        engine.add_request(r)
    while engine.has_unfinished():
        for out in engine.step():
            outputs[out.request_id].append(out)
    return outputs


def reference(hf_model, prompt: tuple[int, ...], generated: list[int]) -> torch.Tensor:
    """transformers' log-softmax at each generated position: [len(generated), vocab]."""
    ids = torch.tensor([list(prompt) + generated[:-1]])
    with torch.inference_mode():
        logits = hf_model(ids).logits[0, len(prompt) - 1 :].float()
    return torch.log_softmax(logits, dim=-1)


@pytest.mark.parametrize("batched", [False, True])
def test_logprobs_equal_transformers(
    model: LlamaForCausalLM, hf_model, artifact_dir: Path, batched: bool
) -> None:
    tok = Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))
    prompt = tuple(tok.encode("The capital of France is", add_special_tokens=False).ids)
    asked = EngineRequest("a", prompt, 8, stop_token_ids=EOS, logprobs=True, top_logprobs=5)
    others = [
        EngineRequest(f"o{i}", tuple(tok.encode(f"Count to {i}:", add_special_tokens=False).ids), 8,
                      SamplingParams(temperature=0.7, seed=i))
        for i in range(3)
    ] if batched else []  # fmt: skip
    everything = run(Engine(model, EngineConfig(num_blocks=64)), [asked, *others])
    outs = everything["a"]
    generated = [t for o in outs for t in o.new_token_ids]
    logprobs = [lp for o in outs for lp in o.logprobs]
    assert len(logprobs) == len(generated) and generated
    expected = reference(hf_model, prompt, generated)
    for position, (token, lp) in enumerate(zip(generated, logprobs, strict=True)):
        assert lp.token_id == token
        assert abs(lp.logprob - float(expected[position, token])) < TOLERANCE
        values, ids = torch.topk(expected[position], 5)
        assert [t for t, _ in lp.top] == ids.tolist()
        assert max(abs(v - float(w)) for (_, v), w in zip(lp.top, values, strict=True)) < TOLERANCE
    assert all(not o.logprobs for r in others for o in everything[r.request_id])  # only who asked


def test_constrained_logprobs_are_the_models_before_the_mask(
    model: LlamaForCausalLM, hf_model, artifact_dir: Path
) -> None:
    tok = Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))
    prompt = tuple(tok.encode("Name a colour:", add_special_tokens=False).ids)
    schema = {"enum": ["red", "green"]}
    request = EngineRequest(
        "c",
        prompt,
        6,
        stop_token_ids=EOS,
        guide=(GUIDE_JSON_SCHEMA, json.dumps(schema)),
        logprobs=True,
        top_logprobs=3,
    )
    engine = Engine(
        model, EngineConfig(num_blocks=64), grammars=Grammars(artifact_dir / "tokenizer.json", [2])
    )
    outs = run(engine, [request])["c"]
    generated = [t for o in outs for t in o.new_token_ids]
    logprobs = [lp for o in outs for lp in o.logprobs]
    expected = reference(hf_model, prompt, generated)
    for position, lp in enumerate(logprobs):
        assert abs(lp.logprob - float(expected[position, lp.token_id])) < TOLERANCE
        assert [t for t, _ in lp.top] == torch.topk(expected[position], 3).indices.tolist()
    # the first token is the quote the schema forces, whatever the model prefers
    assert tok.decode(generated[:1]) == '"' and logprobs[0].top[0][0] != generated[0]
