"""Every layer of a step in one kernel call (`llm::decoder_stack`, engine/csrc/stack.cpp) against
the same kernels called layer by layer from Python: the same logits bit for bit over prefill chunks,
decodes and a prompt after a cached prefix, for every scheme; the layer-by-layer path wherever the
stack cannot run; the last layer run for the sampled rows only; and the call's own checks."""

from __future__ import annotations

from typing import cast

import pytest
import torch

from engine.engine import Engine, EngineConfig, EngineRequest
from engine.kv_cache import PagedKVCache, PrefillSpan, StepLayout
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


def one_step(model: LlamaForCausalLM, keep: torch.Tensor | None) -> tuple[torch.Tensor, PagedKVCache]:
    """A fresh cache and one step: a 40-token prompt chunk (blocks 0-2) and a 20-token one (blocks
    4-5) side by side; the final hidden states of the `keep` rows and the cache the step wrote."""
    cfg = model.config
    cache = PagedKVCache(cfg, 8, 16, torch.bfloat16)
    spans = (PrefillSpan(0, 40, 40, torch.tensor([0, 1, 2])), PrefillSpan(40, 20, 20, torch.tensor([4, 5])))
    slots = [*range(40), *range(64, 84)]
    empty = torch.zeros(0, dtype=torch.int64)
    layout = StepLayout(torch.tensor(slots), empty, torch.zeros((0, 0), dtype=torch.int64), empty, spans)
    cache.begin_step(layout)
    ids = torch.tensor([100 + (7 * i) % 900 for i in range(60)])
    positions = torch.tensor([*range(40), *range(20)])
    with torch.inference_mode():
        return model(ids, positions, cache, keep), cache


@pytest.mark.parametrize("stacked", [True, False])
def test_the_last_layer_runs_only_the_kept_rows_and_stores_every_row(artifact_dir, stacked: bool) -> None:
    model = load_model(ensure_artifact(quantization="int4"), torch.float32)
    model.stacked = stacked
    every, full_cache = one_step(model, None)
    keep = torch.tensor([59, 39, 7])  # out of order: the rows come back in keep's order
    kept, cache = one_step(model, keep)
    assert kept.shape == (3, model.config.hidden_size)
    # the kept rows' last layer ran at 3 rows, not 60: another matmul path, so close, not equal;
    # any other row is far off (a wrong row would not pass)
    torch.testing.assert_close(kept, every[keep], rtol=0.05, atol=0.05)
    assert not torch.allclose(kept, every[torch.tensor([58, 38, 8])], rtol=0.05, atol=0.05)
    assert torch.equal(cache.k, full_cache.k) and torch.equal(cache.v, full_cache.v)
    none, cache = one_step(model, torch.zeros(0, dtype=torch.int64))  # a chunk that samples nothing
    assert none.shape == (0, model.config.hidden_size)
    assert torch.equal(cache.k, full_cache.k) and torch.equal(cache.v, full_cache.v)
