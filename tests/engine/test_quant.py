"""Weight-only quantization: exact storage round trips, and kernels equal to the dense matmul."""

from __future__ import annotations

import pytest
import torch

from engine.config import native_bf16, resolve_dtype
from engine.quant import (
    QuantizedLinear,
    concat_parts,
    dequantize,
    kernel_rows,
    quantize,
    quantize_int4,
    quantize_int8,
    unpack_int4,
)


def grid_weight(n: int, k: int, group: int = 32, seed: int = 0) -> torch.Tensor:
    """Weights already on a 4-bit asymmetric grid per group (codes 0 and 15 present in each group,
    fp16 scales and minimums), as the GGUF Q4_1 source weights are."""
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (n, k // group, group), generator=gen).float()
    codes[..., 0], codes[..., 1] = 0, 15
    scales = (torch.rand(n, k // group, 1, generator=gen) * 0.01 + 0.001).half().float()
    mins = (-torch.rand(n, k // group, 1, generator=gen) * 0.05).half().float()
    return (codes * scales + mins).view(n, k)


def test_int4_recovers_a_q4_grid_exactly() -> None:
    w = grid_weight(8, 64)
    torch.testing.assert_close(dequantize(quantize_int4(w), "int4"), w, rtol=0, atol=1e-7)


def test_int4_packs_two_codes_per_byte_low_nibble_first() -> None:
    packed = torch.tensor([[0x21, 0xF0]], dtype=torch.uint8)
    assert unpack_int4(packed).tolist() == [[1, 2, 0, 15]]


def test_int8_is_per_group_and_asymmetric() -> None:
    # one row, two groups of 32: a Q4_1 group (codes 0..15 of step 17/64, minimum -1/2) and a ramp
    q4_levels = torch.arange(32) % 16 * (17 / 64) - 0.5
    ramp = torch.arange(32) * (255 / 256 / 31)  # 0 .. 255/256
    parts = quantize_int8(torch.cat([q4_levels, ramp])[None])
    assert parts["qweight"].dtype == torch.uint8 and parts["qweight"].shape == (1, 64)
    assert parts["scales"].tolist() == [[1 / 64, 1 / 256]]  # (max - min) / 255
    assert parts["mins"].tolist() == [[-0.5, 0.0]]
    assert parts["qweight"][0, :16].tolist() == [17 * c for c in range(16)]  # the Q4_1 step / 17
    assert parts["qweight"][0, 32:].tolist() == [round(i * 255 / 31) for i in range(32)]
    torch.testing.assert_close(dequantize(parts, "int8")[0, :32], q4_levels, rtol=0, atol=0)


def test_int8_keeps_a_q4_grid_to_fp16_rounding_of_its_scale() -> None:
    w = grid_weight(8, 64)
    parts = quantize_int8(w)
    step = (w.view(8, 2, 32).amax(-1) - w.view(8, 2, 32).amin(-1)) / 15  # the grid's own scale d
    err = (dequantize(parts, "int8") - w).abs().view(8, 2, 32).amax(-1)
    assert bool((err <= step * 2.0**-7).all())  # 255 codes times fp16's half ulp (2^-11) of d / 17
    assert torch.equal(parts["qweight"].view(8, 2, 32) % 17, torch.zeros(8, 2, 32, dtype=torch.uint8))


def test_unknown_scheme_and_ragged_groups_are_refused() -> None:
    with pytest.raises(ValueError, match="int2"):
        quantize(torch.zeros(4, 64), "int2")
    with pytest.raises(ValueError, match="multiple"):
        quantize_int4(torch.zeros(4, 40))
    with pytest.raises(ValueError, match="multiple"):
        quantize_int8(torch.zeros(4, 40))


def test_concat_stacks_output_channels() -> None:
    a, b = grid_weight(4, 64, seed=1), grid_weight(6, 64, seed=2)
    fused = dequantize(concat_parts([quantize_int4(a), quantize_int4(b)]), "int4")
    torch.testing.assert_close(fused, torch.cat([a, b]), rtol=0, atol=1e-7)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_and_dense_paths_compute_the_same_product(scheme: str, dtype: torch.dtype) -> None:
    w = grid_weight(96, 128, seed=3)
    parts = quantize(w, scheme)
    layer = QuantizedLinear(parts, scheme, dtype, max_kernel_rows=4)
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(4)).to(dtype)
    reference = x.float() @ dequantize(parts, scheme).T
    kernel = layer(x)  # 4 rows: the quantized kernel (int8 without the engine's: the dense matmul)
    dense = layer(torch.cat([x, x]))[:4]  # 8 rows: the dense matmul
    assert kernel.dtype == dense.dtype == dtype
    # the kernels take bf16 activations: agreement to bf16 precision
    torch.testing.assert_close(kernel.float(), reference, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(dense.float(), reference, rtol=2e-2, atol=2e-2)


def test_only_int4_has_a_pytorch_kernel_for_few_rows() -> None:
    assert [kernel_rows(s, torch.float32) for s in ("none", "int8", "int4")] == [0, 0, 32]
    assert [kernel_rows(s, torch.bfloat16) for s in ("none", "int8", "int4")] == [0, 0, 12]
    parts = quantize_int8(grid_weight(16, 64))
    assert QuantizedLinear(parts, "int8", torch.float32, 32, use_kernels=False).max_kernel_rows == 0


def test_dtype_auto_follows_native_bf16() -> None:
    assert native_bf16("flags\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert not native_bf16("flags\t: fpu avx512f avx512_vnni\n")
    assert resolve_dtype("auto") == ("bfloat16" if native_bf16() else "float32")
    assert resolve_dtype("float32") == "float32"
    with pytest.raises(ValueError, match="float16"):
        resolve_dtype("float16")
