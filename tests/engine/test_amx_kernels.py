"""The AMX path of the int4 linear layer (engine/csrc/amx_linear.cpp) against x @ dequant(W)^T in
float64, and its place in `llm::q4_linear`: many-row steps take it, few-row steps keep the VNNI path.
On a CPU without AMX the path is absent and says so."""

from __future__ import annotations

import pytest
import torch

from engine.quant import dequantize, pack_q4, quantize_int4
from prebuild.kernels import load_kernels

ops = torch.ops.llm
AMX = load_kernels().endswith("+amx")  # at collection, for the skip marks (conftest loads the same)
needs_amx = pytest.mark.skipif(not AMX, reason="this CPU (or this build's -march) has no AMX tiles")
# bf16 activations and bf16-rounded dequantized weights: about 2-3e-3 of the output's norm
BF16_TOLERANCE = 6e-3


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref.double()).norm() / ref.double().norm())


def case(n: int, k: int, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    parts = quantize_int4(torch.randn(n, k, generator=gen) * 0.05)
    x = torch.randn(m, k, generator=gen) * 3
    return x, pack_q4(parts), x.double() @ dequantize(parts).double().T


@needs_amx
@pytest.mark.parametrize(("n", "k"), [(96, 64), (40, 96), (16, 32), (3072, 576), (576, 1536)])
@pytest.mark.parametrize("m", [1, 16, 17, 33, 64])
def test_amx_matmul_is_x_times_the_dequantized_weight(n: int, k: int, m: int) -> None:
    x, packed, ref = case(n, k, m, n + k + m)
    got = ops.q4_linear_amx(x, packed, n)
    assert got.shape == (m, n) and got.dtype == torch.float32
    assert rel_err(got, ref) < BF16_TOLERANCE
    assert torch.equal(got[:, :], ops.q4_linear_amx(x, packed, n))  # deterministic


@needs_amx
def test_q4_linear_takes_the_amx_path_from_its_row_threshold() -> None:
    rows = ops.amx_min_rows()
    assert rows >= 1
    many, packed, ref_many = case(80, 64, rows, 1)
    few = many[: rows - 1] if rows > 1 else many[:0]
    assert torch.equal(ops.q4_linear(many, packed, 80), ops.q4_linear_amx(many, packed, 80))
    if few.shape[0]:  # the VNNI path: int16 activations, far closer to float64
        assert rel_err(ops.q4_linear(few, packed, 80), ref_many[: few.shape[0]]) < 1e-4
    before = rows
    try:
        ops.set_amx_min_rows(10**9)  # the path turned off: VNNI for every step size
        assert rel_err(ops.q4_linear(many, packed, 80), ref_many) < 1e-4
    finally:
        ops.set_amx_min_rows(before)
    assert ops.amx_min_rows() == before


@needs_amx
def test_amx_results_do_not_depend_on_the_pools_threads() -> None:
    x, packed, _ = case(3072, 576, 40, 5)
    before = ops.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            ops.set_num_threads(threads)
            results.append(ops.q4_linear_amx(x, packed, 3072))
        assert all(torch.equal(r, results[0]) for r in results[1:])
    finally:
        ops.set_num_threads(before)


@needs_amx
def test_amx_matmul_refuses_what_does_not_match_its_packing() -> None:
    packed = pack_q4(quantize_int4(torch.randn(32, 64)))
    with pytest.raises(RuntimeError, match="does not match"):
        ops.q4_linear_amx(torch.randn(20, 64), packed, 48)
    with pytest.raises(RuntimeError, match="float32"):
        ops.q4_linear_amx(torch.randn(20, 64, dtype=torch.float64), packed, 32)


@pytest.mark.skipif(AMX, reason="this CPU has AMX: the tests above run its path")
def test_without_amx_the_path_refuses_and_q4_linear_stays_vnni() -> None:
    x, packed, ref = case(64, 64, 40, 9)
    with pytest.raises(RuntimeError, match="AMX"):
        ops.q4_linear_amx(x, packed, 64)
    assert rel_err(ops.q4_linear(x, packed, 64), ref) < 1e-4
