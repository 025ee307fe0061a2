"""`bench profile` files each profiled op under one category: the fused int4 gate_up (whose name
also holds "silu") is a matmul, and only ops outside the `aten::` / `llm::` namespaces are not
counted (their children are); the prefill step is split into the same categories."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.step_profile import CATEGORIES, category, profile_prefill
from engine.weights import load_model


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("llm::q4_linear", "matmul"),
        ("llm::q4_gate_up_silu", "matmul"),
        ("llm::q4_linear_int8_acts", "matmul"),
        ("aten::linear", "matmul"),
        ("llm::paged_decode_attention", "attention"),
        ("llm::silu_mul", "norm/act"),
        ("llm::add_rms_norm", "norm/act"),
        ("llm::rope_store", "norm/act"),
        ("aten::empty", "other ops"),
        ("LlamaForCausalLM.forward", None),
    ],
)
def test_each_op_falls_in_its_category(op: str, expected: str | None) -> None:
    assert category(op) == expected


def test_the_prefill_split_sees_each_layers_kernels(artifact_dir: Path) -> None:
    """The prefill step runs layer by layer under the profiler, so its matmuls and attention are
    counted (a stacked step is one op the categories cannot split), and the model is left as it was."""
    model = load_model(artifact_dir)
    stacked = model.stacked
    split = profile_prefill(model, 2, 24)
    assert split["matmul"] > 0 and split["attention"] > 0
    counted = sum(split[name] for name in (*CATEGORIES, "other ops"))
    assert counted == pytest.approx(split["step"], rel=1e-6) or split["other ops"] == 0.0
    assert split["ms a token"] == pytest.approx(split["step"] / 48)
    assert model.stacked == stacked
