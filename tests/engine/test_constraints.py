"""Structured outputs in the engine, on the real model: every constrained generation that finishes
on its own parses and validates against its schema, greedy and sampled, batched with each other and
with free rows; one cut by the output limit is a prefix the grammar accepts; a free row beside
constrained ones gets exactly the tokens it gets alone."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from tokenizers import Tokenizer

from bench.load.schemas import SCHEMAS
from contracts.guides import GUIDE_EBNF, GUIDE_JSON, GUIDE_JSON_SCHEMA, GUIDE_LARK, GUIDE_REGEX
from engine.constraints import Grammars
from engine.engine import Engine, EngineConfig, EngineError, EngineRequest, FinishReason, StepOutput
from engine.model import LlamaForCausalLM
from engine.sequence import SamplingParams
from engine.weights import load_model

EOS = 2
MAX_OUT = 64


@pytest.fixture(scope="module")
def model(artifact_dir: Path) -> LlamaForCausalLM:
    return load_model(artifact_dir)


@pytest.fixture(scope="module")
def tok(artifact_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))


def engine_for(model: LlamaForCausalLM, artifact_dir: Path) -> Engine:
    config = EngineConfig(num_blocks=512, max_num_seqs=64, max_num_batched_tokens=512)
    return Engine(model, config, grammars=Grammars(artifact_dir / "tokenizer.json", [EOS]))


def prompt(tok: Tokenizer, text: str) -> tuple[int, ...]:
    chat = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    return tuple(tok.encode(chat, add_special_tokens=False).ids)


def run(engine: Engine, requests: list[EngineRequest]) -> dict[str, list[StepOutput]]:
    outputs: dict[str, list[StepOutput]] = {r.request_id: [] for r in requests}
    for r in requests:
        engine.add_request(r)
    while engine.has_unfinished():
        for out in engine.step():
            outputs[out.request_id].append(out)
    return outputs


def generated(outs: list[StepOutput]) -> tuple[list[int], FinishReason | None]:
    ids = [t for o in outs for t in o.new_token_ids]
    return ids, outs[-1].finish_reason


@pytest.mark.parametrize("sampling", [SamplingParams(), SamplingParams(temperature=0.9, top_p=0.95, seed=7)])
def test_every_schema_is_kept_greedy_and_sampled(
    model: LlamaForCausalLM, tok: Tokenizer, artifact_dir: Path, sampling: SamplingParams
) -> None:
    assert len(SCHEMAS) >= 50
    engine = engine_for(model, artifact_dir)
    requests = [
        EngineRequest(
            name,
            prompt(tok, f"Give an example of a {name.replace('_', ' ')} as JSON."),
            MAX_OUT,
            sampling,
            frozenset({EOS}),
            guide=(GUIDE_JSON_SCHEMA, json.dumps(schema)),
        )
        for name, schema in SCHEMAS.items()
    ]
    completed = 0
    for name, outs in run(engine, requests).items():
        ids, reason = generated(outs)
        if reason is FinishReason.STOP_TOKEN:
            assert ids[-1] == EOS
            jsonschema.validate(json.loads(tok.decode(ids[:-1], skip_special_tokens=False)), SCHEMAS[name])
            completed += 1
        else:  # cut by the output limit: a prefix the grammar still accepts
            assert reason is FinishReason.LENGTH, (name, reason)
            fresh = engine.grammars.matcher(GUIDE_JSON_SCHEMA, json.dumps(SCHEMAS[name]))  # type: ignore[union-attr]
            assert fresh.consume_tokens(ids), name
    assert completed >= len(SCHEMAS) * 3 // 4  # most of these fit MAX_OUT tokens


def test_regex_choice_and_grammars_are_kept(
    model: LlamaForCausalLM, tok: Tokenizer, artifact_dir: Path
) -> None:
    guides = {
        "regex": (GUIDE_REGEX, r"[0-9]{3}-[0-9]{4}"),
        "choice": (GUIDE_REGEX, "(yes|no|maybe)"),
        "lark": (GUIDE_LARK, 'start: "The answer is " NUMBER "."\nNUMBER: /[0-9]+/\n'),
        "gbnf": (GUIDE_EBNF, 'root ::= "(" [a-z]+ ")"'),
    }
    requests = [
        EngineRequest(name, prompt(tok, "Answer briefly."), MAX_OUT, stop_token_ids=frozenset({EOS}), guide=g)
        for name, g in guides.items()
    ]
    outputs = run(engine_for(model, artifact_dir), requests)
    texts = {}
    for name, outs in outputs.items():
        ids, reason = generated(outs)
        assert reason is FinishReason.STOP_TOKEN, name
        texts[name] = tok.decode(ids[:-1], skip_special_tokens=False)
    import re

    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", texts["regex"])
    assert texts["choice"] in ("yes", "no", "maybe")
    assert re.fullmatch(r"The answer is [0-9]+\.", texts["lark"])
    assert re.fullmatch(r"\([a-z]+\)", texts["gbnf"])


def test_any_json_object_is_an_object_or_its_prefix(
    model: LlamaForCausalLM, tok: Tokenizer, artifact_dir: Path
) -> None:
    engine = engine_for(model, artifact_dir)
    request = EngineRequest(
        "j", prompt(tok, "A JSON object."), MAX_OUT, stop_token_ids=frozenset({EOS}), guide=(GUIDE_JSON, "")
    )
    ids, reason = generated(run(engine, [request])["j"])
    if reason is FinishReason.STOP_TOKEN:
        assert isinstance(json.loads(tok.decode(ids[:-1], skip_special_tokens=False)), dict)
    else:
        assert engine.grammars.matcher(GUIDE_JSON, "").consume_tokens(ids)  # type: ignore[union-attr]
        assert tok.decode(ids[:1]).startswith("{")


def test_a_free_row_gets_the_same_tokens_beside_constrained_rows(
    model: LlamaForCausalLM, tok: Tokenizer, artifact_dir: Path
) -> None:
    free = EngineRequest(
        "free", prompt(tok, "Write a sentence about the sea."), 24, stop_token_ids=frozenset({EOS})
    )
    alone, _ = generated(run(engine_for(model, artifact_dir), [free])["free"])
    constrained = [
        EngineRequest(
            f"c{i}",
            prompt(tok, "JSON please."),
            24,
            stop_token_ids=frozenset({EOS}),
            guide=(GUIDE_JSON_SCHEMA, json.dumps(SCHEMAS["person"])),
        )
        for i in range(3)
    ]
    together, _ = generated(run(engine_for(model, artifact_dir), [*constrained, free])["free"])
    assert together == alone


def test_a_guide_the_engine_cannot_serve_is_refused_at_admission(
    model: LlamaForCausalLM, tok: Tokenizer, artifact_dir: Path
) -> None:
    engine = engine_for(model, artifact_dir)
    ids = prompt(tok, "x")
    with pytest.raises(EngineError, match="INVALID_REGEX"):
        engine.add_request(
            EngineRequest("r", ids, 8, stop_token_ids=frozenset({EOS}), guide=(GUIDE_REGEX, "(a"))
        )
    with pytest.raises(EngineError, match="end-of-sequence"):  # ignore_eos cannot end a grammar
        engine.add_request(EngineRequest("e", ids, 8, guide=(GUIDE_REGEX, "a+")))
    with pytest.raises(EngineError, match="no structured output"):
        Engine(model, EngineConfig(num_blocks=8)).add_request(
            EngineRequest("g", ids, 8, stop_token_ids=frozenset({EOS}), guide=(GUIDE_JSON, ""))
        )
    with pytest.raises(EngineError, match="top_logprobs"):
        engine.add_request(EngineRequest("l", ids, 8, logprobs=True, top_logprobs=21))
    assert not engine.has_unfinished()
