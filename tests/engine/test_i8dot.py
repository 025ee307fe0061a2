"""The int4 linear layer with int8 activations (engine/csrc/i8dot_linear.cpp): exactly the algebra
its header states against a float64 model of the same rounding, close to x @ dequant(W)^T, and used
only where asked (an lm_head rescored exactly), never by q4_linear's own dispatch."""

from __future__ import annotations

import pytest
import torch

from engine import kernels
from engine.quant import QuantizedLinear, dequantize, pack_q4, quantize_int4
from engine.quant_layout import GROUP
from prebuild.kernels import load_kernels

ops = torch.ops.llm
load_kernels()  # at collection, for the skip marks (conftest loads the same)
USABLE = kernels.int8_activations()
needs_path = pytest.mark.skipif(not USABLE, reason="this build of the kernels has no AVX-512 VNNI path")


def case(n: int, k: int, m: int, seed: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    parts = quantize_int4(torch.randn(n, k, generator=gen) * 0.05)
    return torch.randn(m, k, generator=gen) * 3, parts


def int8_model(x: torch.Tensor, parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """float64: x rounded per group of 32 to int8 (d = max|x| / 127, half to even), the centred
    codes' dot products scaled by scale * d, plus (8 * scale + min) times the group's exact sum."""
    m, k = x.shape
    w = dequantize(parts, "int4").double()  # [N, K] = code * scale + min
    scales = parts["scales"].double().repeat_interleave(GROUP, dim=1)  # [N, K]
    mins = parts["mins"].double().repeat_interleave(GROUP, dim=1)
    codes = torch.round((w - mins) / scales)  # 0 .. 15
    groups = x.view(m, k // GROUP, GROUP)
    amax = groups.abs().amax(-1, keepdim=True)
    d = amax / 127
    q = torch.round(groups * torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))).double()
    g = k // GROUP
    dots = torch.einsum("mgi,ngi->mng", q, (codes - 8).view(-1, g, GROUP))  # exact integers
    scale_g = parts["scales"].double()  # [N, G]
    zero_g = 8 * scale_g + parts["mins"].double()
    sums = groups.double().sum(-1)  # [M, G]
    y = (dots * scale_g[None] * d.double().view(m, 1, g)).sum(-1) + sums @ zero_g.T
    return y


@needs_path
@pytest.mark.parametrize(("n", "k"), [(16, 32), (40, 96), (96, 64), (3072, 576), (576, 1536)])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 9, 17, 64])
def test_i8dot_computes_the_stated_int8_algebra(n: int, k: int, m: int) -> None:
    x, parts = case(n, k, m, n + k + m)
    got = ops.q4_linear_i8dot(x, pack_q4(parts), n)
    assert got.shape == (m, n) and got.dtype == torch.float32
    model = int8_model(x, parts)
    # the same integers and scales: only fp32's rounding of the float epilogue differs
    assert float((got.double() - model).norm() / model.norm()) < 1e-5
    exact = x.double() @ dequantize(parts, "int4").double().T
    # int8 rounding: about 5.5e-3 of the output's norm on Gaussian activations (bf16: 2.3e-3)
    assert float((got.double() - exact).norm() / exact.norm()) < 1.2e-2
    assert torch.equal(got, ops.q4_linear_i8dot(x, pack_q4(parts), n))  # deterministic


@needs_path
def test_i8dot_results_do_not_depend_on_the_pools_threads() -> None:
    x, parts = case(3072, 576, 40, 5)
    packed, before = pack_q4(parts), ops.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            ops.set_num_threads(threads)
            results.append(ops.q4_linear_i8dot(x, packed, 3072))
        assert all(torch.equal(r, results[0]) for r in results[1:])
    finally:
        ops.set_num_threads(before)


@needs_path
def test_i8dot_refuses_what_does_not_match_its_packing() -> None:
    packed = pack_q4(quantize_int4(torch.randn(32, 64)))
    with pytest.raises(RuntimeError, match="does not match"):
        ops.q4_linear_i8dot(torch.randn(20, 64), packed, 48)
    with pytest.raises(RuntimeError, match="float32"):
        ops.q4_linear_i8dot(torch.randn(20, 64, dtype=torch.float64), packed, 32)


@needs_path
def test_only_a_layer_that_asks_rounds_its_activations_to_int8() -> None:
    x, parts = case(96, 64, 8, 3)  # fewer rows than int8_activation_rows() on every host
    asked = QuantizedLinear(parts, "int4", torch.float32, 0, use_kernels=True, int8_acts=True)
    plain = QuantizedLinear(parts, "int4", torch.float32, 0, use_kernels=True)
    assert torch.equal(asked(x), ops.q4_linear_i8dot(x, pack_q4(parts), 96))
    assert torch.equal(plain(x), ops.q4_linear(x, pack_q4(parts), 96))  # q4_linear never picks int8
    assert not torch.equal(asked(x), plain(x))
    q8 = QuantizedLinear(
        {"qweight": torch.randint(0, 256, (96, 64), dtype=torch.uint8), "scales": parts["scales"],
         "mins": parts["mins"]},
        "int8", torch.float32, 0, use_kernels=True, int8_acts=True,
    )  # fmt: skip
    assert not q8.int8_acts  # an int4-only path


def test_the_int4_lm_head_rounds_to_int8_only_where_the_kernels_have_the_path(artifact_dir) -> None:
    from engine.weights import load_model
    from prebuild.artifact import ensure_artifact

    model = load_model(ensure_artifact(quantization="int4"), torch.float32)
    head = model.lm_head
    assert isinstance(head, QuantizedLinear) and model.exact_head is not None  # rescored exactly
    assert head.int8_acts == USABLE
    body = [m for m in model.modules() if isinstance(m, QuantizedLinear) and m is not head]
    assert body and not any(m.int8_acts for m in body)


@needs_path
def test_int8_activations_give_way_to_amx_tiles_from_their_row_limit() -> None:
    """Where AMX tiles serve q4_linear, a layer asked for int8 activations runs q4_linear from
    int8_activation_rows() rows (32, or AMX's own threshold if higher); elsewhere never."""
    limit = int(ops.int8_activation_rows())
    amx = "+amx" in kernels.isa()
    assert limit == (max(32, int(ops.amx_min_rows())) if amx else 2**63 - 1)
    parts = quantize_int4(torch.randn(96, 64, generator=torch.Generator().manual_seed(5)) * 0.05)
    packed = pack_q4(parts)
    for m in [limit - 1, limit, limit + 7] if amx else [1, 40, 64]:
        x = torch.randn(m, 64, generator=torch.Generator().manual_seed(m))
        want = ops.q4_linear(x, packed, 96) if m >= limit else ops.q4_linear_i8dot(x, packed, 96)
        assert torch.equal(ops.q4_linear_int8_acts(x, packed, 96), want)
    if amx:
        old = int(ops.amx_min_rows())
        try:
            ops.set_amx_min_rows(1_000_000_000)  # AMX off: the int8 path serves every size
            assert int(ops.int8_activation_rows()) == 1_000_000_000
        finally:
            ops.set_amx_min_rows(old)
