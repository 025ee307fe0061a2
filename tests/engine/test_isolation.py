"""One request's sampling can fail only that request: extreme but valid settings sample like any
other, a row of logits that cannot be sampled ends its own sequence with FinishReason.ERROR, and every
other sequence of the batch goes on exactly as it would have alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from contracts.sampling import GREEDY_BELOW_TEMPERATURE
from engine.engine import Engine, EngineConfig, EngineError, EngineRequest, FinishReason, StepOutput
from engine.model import LlamaForCausalLM
from engine.scheduler_output import SchedulerOutput
from engine.sequence import SamplingParams
from engine.weights import load_model

KEEPER = (504, 3575, 282, 4649, 314)  # "The capital of France is"
OTHER = (1, 2, 3, 4, 5, 6, 7)


@pytest.fixture(scope="module")
def model(artifact_dir: Path) -> LlamaForCausalLM:
    return load_model(artifact_dir)


def run(engine: Engine, *requests: EngineRequest) -> dict[str, list[StepOutput]]:
    for request in requests:
        engine.add_request(request)
    outputs: dict[str, list[StepOutput]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            outputs.setdefault(out.request_id, []).append(out)
    return outputs


def tokens(outs: list[StepOutput]) -> list[int]:
    return [t for o in outs for t in o.new_token_ids]


def keeper() -> EngineRequest:
    return EngineRequest("keeper", KEEPER, 12, SamplingParams(temperature=0.8, seed=5))


def poison_rows(engine: Engine, victim: str, from_step: int) -> None:
    """From the given step on, the victim's row of logits is NaN (as a numerically broken model row
    would be); every other row is the model's."""
    execute = engine.runner.execute
    steps = iter(range(1_000))

    def poisoned(step: SchedulerOutput, block_table: Callable[[str], list[int]]) -> torch.Tensor:
        logits = execute(step, block_table).clone()
        if next(steps) >= from_step:
            rows = [c.seq.id for c in step.chunks if c.sample]
            if victim in rows:
                logits[rows.index(victim)] = float("nan")
        return logits

    engine.runner.execute = poisoned  # type: ignore[method-assign]


def test_a_row_that_cannot_be_sampled_ends_only_its_own_sequence(model) -> None:
    alone = tokens(run(Engine(model, EngineConfig(num_blocks=64)), keeper())["keeper"])
    engine = Engine(model, EngineConfig(num_blocks=64))
    poison_rows(engine, "victim", from_step=3)
    victim = EngineRequest("victim", OTHER, 20, SamplingParams(temperature=1.0, seed=1))
    greedy_victim = EngineRequest("greedy-victim", OTHER[:4], 20)
    poison_rows(engine, "greedy-victim", from_step=2)
    outputs = run(engine, keeper(), victim, greedy_victim)
    assert tokens(outputs["keeper"]) == alone
    assert outputs["keeper"][-1].finish_reason is FinishReason.LENGTH
    for rid, produced in (("victim", 3), ("greedy-victim", 2)):
        last = outputs[rid][-1]
        assert (last.finish_reason, last.error) == (FinishReason.ERROR, "SamplingError")
        assert last.new_token_ids == ()
        assert last.num_output_tokens == produced == len(tokens(outputs[rid]))
    assert engine.kv.pool.num_used == 0 and not engine.scheduler.has_unfinished()


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=1e-45, seed=3),  # below the floor: greedy
        SamplingParams(temperature=GREEDY_BELOW_TEMPERATURE, top_p=1e-7, seed=3),
        SamplingParams(temperature=GREEDY_BELOW_TEMPERATURE, top_k=1, seed=3),
        SamplingParams(temperature=2.0, top_p=1e-7, seed=3),
    ],
    ids=["denormal-temperature", "floor-tiny-top-p", "floor-top-k-1", "hot-tiny-top-p"],
)
def test_extreme_valid_settings_beside_another_request_change_nothing_for_it(model, sampling) -> None:
    alone = tokens(run(Engine(model, EngineConfig(num_blocks=64)), keeper())["keeper"])
    extreme = EngineRequest("x", OTHER, 12, sampling)
    outputs = run(Engine(model, EngineConfig(num_blocks=64)), keeper(), extreme)
    assert tokens(outputs["keeper"]) == alone
    assert outputs["x"][-1].finish_reason is FinishReason.LENGTH and len(tokens(outputs["x"])) == 12
    greedy = tokens(run(Engine(model, EngineConfig(num_blocks=64)), EngineRequest("x", OTHER, 12))["x"])
    assert tokens(outputs["x"]) == greedy  # each of these is argmax in effect


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        (SamplingParams(temperature=float("nan")), "temperature"),
        (SamplingParams(temperature=float("inf")), "temperature"),
        (SamplingParams(temperature=-1.0), "temperature"),
        (SamplingParams(temperature=1.0, top_p=float("nan")), "top_p"),
        (SamplingParams(temperature=1.0, top_p=0.0), "top_p"),
    ],
)
def test_settings_that_are_not_numbers_the_sampler_can_use_are_refused(model, sampling, message) -> None:
    engine = Engine(model, EngineConfig(num_blocks=64))
    with pytest.raises(EngineError, match=message):
        engine.add_request(EngineRequest("bad", OTHER, 4, sampling))
    assert not engine.has_unfinished() and engine.kv.pool.num_used == 0
