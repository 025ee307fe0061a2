"""Speculative decoding on the real model: greedy outputs equal the same version without
speculation token for token (fp32 target with its int4 draft, int4 target with prompt lookup),
through chunked prompts, preemption and cancellation; drafts' blocks come back; seeded sampling
repeats; constrained generations stay valid."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from tokenizers import Tokenizer

from bench.load.schemas import SCHEMAS
from contracts.guides import GUIDE_JSON_SCHEMA
from engine.constraints import Grammars
from engine.engine import Engine, EngineConfig, EngineRequest, FinishReason, StepOutput
from engine.model import LlamaForCausalLM
from engine.scheduler import MAX_UTILIZATION
from engine.sequence import SamplingParams
from engine.speculative.speculation import SpeculativeConfig
from engine.weights import load_model
from prebuild.artifact import ensure_artifact
from tests.engine.helpers import LONG_TEXT

EOS = frozenset({2})
# copies from its prompt, so prompt lookup drafts well
COPY = "Repeat the list exactly: red apple, green pear, yellow banana, purple plum, orange mango. " * 3


@pytest.fixture(scope="module")
def fp32(artifact_dir: Path) -> LlamaForCausalLM:
    return load_model(artifact_dir)


@pytest.fixture(scope="module")
def int4() -> LlamaForCausalLM:
    return load_model(ensure_artifact(quantization="int4"))


@pytest.fixture(scope="module")
def tok(artifact_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def prompts(tok: Tokenizer) -> dict[str, tuple[int, ...]]:
    def enc(text: str) -> tuple[int, ...]:
        return tuple(tok.encode(text, add_special_tokens=False).ids)

    return {
        "story": enc("Once upon a time, in a small village by the sea, there lived an old fisherman who"),
        "code": enc("def fibonacci(n):\n    "),
        "copy": enc(COPY),
        "long": enc(LONG_TEXT)[:700],
    }


def run(
    engine: Engine, requests: list[EngineRequest], abort: dict[int, str] | None = None
) -> dict[str, list[StepOutput]]:
    """Runs to completion; `abort`: step number -> request id aborted before that step."""
    outputs: dict[str, list[StepOutput]] = {r.request_id: [] for r in requests}
    for r in requests:
        engine.add_request(r)
    step = 0
    while engine.has_unfinished():
        if abort and step in abort:
            engine.abort(abort[step])
        for out in engine.step():
            outputs[out.request_id].append(out)
        step += 1
    return outputs


def ids(outs: list[StepOutput]) -> tuple[int, ...]:
    return tuple(t for o in outs for t in o.new_token_ids)


def speculative(method: str, k: int = 0, **config: object) -> EngineConfig:
    return EngineConfig(speculative=SpeculativeConfig(method, k), **config)  # type: ignore[arg-type]


def greedy_requests(prompts: dict[str, tuple[int, ...]], n: int = 40) -> list[EngineRequest]:
    return [EngineRequest(name, p, n, stop_token_ids=EOS) for name, p in prompts.items()]


@pytest.mark.parametrize("k", [0, 4])
def test_fp32_target_with_int4_draft_is_token_for_token_the_target(fp32, int4, prompts, k) -> None:
    config = {"num_blocks": 256, "max_num_batched_tokens": 128}  # the long prompt in chunks
    plain = run(Engine(fp32, EngineConfig(**config)), greedy_requests(prompts))  # type: ignore[arg-type]
    engine = Engine(fp32, speculative("draft", k, **config), draft_model=int4)
    spec = run(engine, greedy_requests(prompts))
    for name in prompts:
        assert ids(spec[name]) == ids(plain[name]), name
        assert spec[name][-1].num_output_tokens == len(ids(plain[name]))
    assert engine.speculator is not None and engine.speculator.stats.accepted > 0
    assert engine.kv.pool.num_used == 0
    engine.kv.check()


def test_int4_target_with_prompt_lookup_is_token_for_token_the_target(int4, prompts) -> None:
    plain = run(Engine(int4, EngineConfig(num_blocks=256)), greedy_requests(prompts, 60))
    engine = Engine(int4, speculative("ngram", 5, num_blocks=256))
    spec = run(engine, greedy_requests(prompts, 60))
    for name in prompts:
        assert ids(spec[name]) == ids(plain[name]), name
    stats = engine.speculator.stats  # type: ignore[union-attr]
    assert stats.accepted > 0 and stats.drafted > stats.accepted
    steps = sum(len(outs) for outs in spec.values())
    assert steps < sum(len(outs) for outs in plain.values())  # several tokens in some steps
    assert engine.kv.pool.num_used == 0


def test_preemption_under_max_utilization_leaves_outputs_exact(int4, prompts) -> None:
    # as tests/engine/test_engine.py: growth forces preemption in a 42-block pool; drafts never
    # preempt (they take free blocks only), verification and recomputation stay exact, and a
    # preempted sequence's draft KV is computed again (the int4 version drafts for itself here:
    # the draft model's path, at the cheaper model's cost)
    config = {"num_blocks": 42, "max_num_batched_tokens": 128, "policy": MAX_UTILIZATION}
    requests = [
        EngineRequest("story", prompts["story"], 40),
        EngineRequest("code", prompts["code"], 40),
        EngineRequest("medium", prompts["long"][:600], 24),
    ]
    plain_engine = Engine(int4, EngineConfig(**config))  # type: ignore[arg-type]
    plain = run(plain_engine, requests)
    engine = Engine(int4, speculative("draft", 3, **config), draft_model=int4)
    spec = run(engine, requests)
    assert engine.scheduler.num_preemptions > 0
    for r in requests:
        assert ids(spec[r.request_id]) == ids(plain[r.request_id]), r.request_id
    engine.kv.check()
    assert engine.kv.pool.num_used == 0


def test_cancelling_a_speculating_request_frees_its_blocks_and_leaves_others_exact(int4, prompts) -> None:
    requests = [EngineRequest("victim", prompts["copy"], 80), EngineRequest("keeper", prompts["copy"], 30)]
    plain = run(Engine(int4, EngineConfig(num_blocks=128)), requests[1:])
    engine = Engine(int4, speculative("ngram", 4, num_blocks=128))
    spec = run(engine, requests, abort={5: "victim"})
    assert spec["victim"][-1].finish_reason is FinishReason.ABORTED
    assert 0 < spec["victim"][-1].num_output_tokens < 80
    assert ids(spec["keeper"]) == ids(plain["keeper"])
    assert engine.kv.pool.num_used == 0 and engine.kv.num_unreserved_blocks == 128


def test_rejected_drafts_blocks_return_to_the_reservation(int4, prompts) -> None:
    engine = Engine(int4, speculative("ngram", 8, num_blocks=128, block_size=4))
    engine.add_request(EngineRequest("r", prompts["story"], 40))
    engine.step()  # the prompt
    unreserved = engine.kv.num_unreserved_blocks
    while engine.has_unfinished():
        engine.step()
        seq = engine._seqs.get("r")
        if seq is not None:  # never more blocks than its tokens need: rejected drafts' are back
            assert len(engine.kv.block_table("r")) <= -(-len(seq.token_ids) // 4)
            assert engine.kv.num_unreserved_blocks == unreserved
        engine.kv.check()
    assert engine.kv.pool.num_used == 0


def test_seeded_sampling_with_fixed_drafts_repeats(fp32, int4, prompts) -> None:
    sampling = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, seed=1234)

    def sampled() -> tuple[int, ...]:
        engine = Engine(fp32, speculative("draft", 3, num_blocks=128), draft_model=int4)
        return ids(run(engine, [EngineRequest("s", prompts["story"], 16, sampling)])["s"])

    first = sampled()
    assert len(first) == 16 and sampled() == first


def test_constrained_json_is_valid_with_speculation(int4, tok, artifact_dir, prompts) -> None:
    grammars = Grammars(artifact_dir / "tokenizer.json", [2])
    names = list(SCHEMAS)[:12]
    requests = []
    for i, name in enumerate(names):
        ask = f"Give an example of a {name.replace('_', ' ')} as JSON."
        text = f"<|im_start|>user\n{ask}<|im_end|>\n<|im_start|>assistant\n"
        sampling = SamplingParams() if i % 2 == 0 else SamplingParams(temperature=0.8, seed=i)
        requests.append(
            EngineRequest(
                name,
                tuple(tok.encode(text, add_special_tokens=False).ids),
                64,
                sampling,
                EOS,
                guide=(GUIDE_JSON_SCHEMA, json.dumps(SCHEMAS[name])),
            )
        )
    config = speculative("ngram", 4, num_blocks=512, max_num_seqs=16, max_num_batched_tokens=512)
    engine = Engine(int4, config, grammars=grammars)
    plain_config = EngineConfig(num_blocks=512, max_num_seqs=16, max_num_batched_tokens=512)
    plain = run(Engine(int4, plain_config, grammars=grammars), requests[::2])  # the greedy ones
    completed = 0
    for name, outs in run(engine, requests).items():
        if name in plain:
            assert ids(outs) == ids(plain[name]), name
        out = ids(outs)
        if outs[-1].finish_reason is FinishReason.STOP_TOKEN:
            jsonschema.validate(
                json.loads(tok.decode(list(out[:-1]), skip_special_tokens=False)), SCHEMAS[name]
            )
            completed += 1
        else:
            assert outs[-1].finish_reason is FinishReason.LENGTH
            assert grammars.matcher(GUIDE_JSON_SCHEMA, json.dumps(SCHEMAS[name])).consume_tokens(list(out))
    assert completed >= len(names) // 2
    assert engine.speculator.stats.accepted > 0  # type: ignore[union-attr]
