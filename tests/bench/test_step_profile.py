"""`bench profile` files each profiled op under one category: the fused int4 gate_up (whose name
also holds "silu") is a matmul, and only ops outside the `aten::` / `llm::` namespaces are not
counted (their children are)."""

from __future__ import annotations

import pytest

from bench.step_profile import category


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
