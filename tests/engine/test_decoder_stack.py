"""Every layer of a step in one kernel call (`llm::decoder_stack`, engine/csrc/stack.cpp) against
the same kernels called layer by layer from Python: the same logits bit for bit over prefill chunks,
decodes and a prompt after a cached prefix, for every scheme; the layer-by-layer path wherever the
stack cannot run; and the call's own checks."""

from __future__ import annotations

from typing import cast

import pytest
import torch

from engine.engine import Engine, EngineConfig, EngineRequest
from engine.model import DecoderLayer, LlamaForCausalLM, decoder_stack_args
from engine.runner import ModelRunner
from engine.weights import load_model
from prebuild.artifact import ensure_artifact

ops = torch.ops.llm


def logits_of_every_step(model: LlamaForCausalLM, stacked: bool) -> list[torch.Tensor]:
    """The logits of each step of a fixed load: two prompts prefilled in 48-token chunks beside
    decodes, then a prompt sharing a cached prefix; the KV cache in bf16 (as the worker runs int4)."""
    model.stacked = stacked
    seen: list[torch.Tensor] = []
    execute = ModelRunner.execute

    def record(runner: ModelRunner, *args: object) -> torch.Tensor:
        out = execute(runner, *args)  # type: ignore[arg-type]
        seen.append(out.clone())
        return out

    config = EngineConfig(num_blocks=64, max_num_batched_tokens=48, kv_dtype=torch.bfloat16)
    engine = Engine(model, config)
    engine.runner.execute = record.__get__(engine.runner)  # type: ignore[method-assign]
    engine.add_request(EngineRequest("a", tuple(range(100, 190)), 6))
    engine.add_request(EngineRequest("b", tuple(range(300, 340)), 6))
    while engine.has_unfinished():
        engine.step()
    engine.add_request(EngineRequest("c", (*range(100, 164), *range(900, 920)), 4))  # 64 cached
    while engine.has_unfinished():
        engine.step()
    return seen


@pytest.mark.parametrize("scheme", ["none", "int8", "int4"])
def test_the_stack_gives_the_layer_by_layer_logits_bit_for_bit(artifact_dir, scheme: str) -> None:
    model = load_model(ensure_artifact(quantization=scheme), torch.float32)
    assert model.fused  # the kernels are loaded (tests/conftest.py)
    assert decoder_stack_args(model)  # every projection is one the stack runs
    by_layer = logits_of_every_step(model, stacked=False)
    stacked = logits_of_every_step(model, stacked=True)
    assert len(by_layer) == len(stacked) >= 10
    assert all(torch.equal(a, b) for a, b in zip(by_layer, stacked, strict=True))


class Wrapped(torch.nn.Module):
    """A projection the stack does not know (a module of another type), computing the same."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.inner(x)
        return out


def test_a_projection_the_stack_cannot_run_keeps_the_layers_one_by_one(artifact_dir) -> None:
    model = load_model(ensure_artifact(quantization="int4"), torch.float32)
    reference = logits_of_every_step(model, stacked=False)
    fresh = load_model(ensure_artifact(quantization="int4"), torch.float32)
    layer = cast(DecoderLayer, fresh.model.layers[3])
    layer.mlp.down_proj = Wrapped(layer.mlp.down_proj)
    assert decoder_stack_args(fresh) == ()
    assert all(torch.equal(a, b) for a, b in zip(reference, logits_of_every_step(fresh, True), strict=True))


def test_the_stack_refuses_lists_that_do_not_make_whole_layers() -> None:
    x = torch.zeros(1, 64)
    cache = torch.zeros(2, 16, 1, 64)
    with pytest.raises(RuntimeError, match="4 projections, 2 norms"):
        ops.decoder_stack(
            x, [torch.zeros(64, 64)] * 3, [0, 0, 0], [64, 64, 64], [torch.ones(64)] * 3, [cache], [cache],
            torch.zeros(1, dtype=torch.int64), torch.zeros(1, 1, dtype=torch.int64),
            torch.ones(1, dtype=torch.int64), torch.ones(1, 64), torch.zeros(1, 64), 1, 1, 1e-5,
        )  # fmt: skip
