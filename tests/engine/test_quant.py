"""Weight-only quantization: exact storage round trips, and kernels equal to the dense matmul."""

from __future__ import annotations

import pytest
import torch

from engine.config import native_bf16, resolve_dtype
from engine.quant import QuantizedLinear, concat_parts, dequantize, quantize, quantize_int4, unpack_int4


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
    torch.testing.assert_close(dequantize(quantize_int4(w)), w, rtol=0, atol=1e-7)


def test_int4_packs_two_codes_per_byte_low_nibble_first() -> None:
    packed = torch.tensor([[0x21, 0xF0]], dtype=torch.uint8)
    assert unpack_int4(packed).tolist() == [[1, 2, 0, 15]]


def test_int8_is_per_channel_and_symmetric() -> None:
    w = torch.tensor([[0.5, -1.0, 0.25], [2.0, 0.0, -2.0]])
    parts = quantize(w, "int8")
    assert parts["qweight"].tolist() == [[64, -127, 32], [127, 0, -127]]
    torch.testing.assert_close(parts["scales"], torch.tensor([1.0 / 127, 2.0 / 127]))


def test_unknown_scheme_and_ragged_groups_are_refused() -> None:
    with pytest.raises(ValueError, match="int2"):
        quantize(torch.zeros(4, 64), "int2")
    with pytest.raises(ValueError, match="multiple"):
        quantize_int4(torch.zeros(4, 40))


def test_concat_stacks_output_channels() -> None:
    a, b = grid_weight(4, 64, seed=1), grid_weight(6, 64, seed=2)
    fused = dequantize(concat_parts([quantize_int4(a), quantize_int4(b)]))
    torch.testing.assert_close(fused, torch.cat([a, b]), rtol=0, atol=1e-7)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_and_dense_paths_compute_the_same_product(scheme: str, dtype: torch.dtype) -> None:
    w = grid_weight(96, 128, seed=3)
    parts = quantize(w, scheme)
    layer = QuantizedLinear(parts, dtype, max_kernel_rows=4)
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(4)).to(dtype)
    reference = x.float() @ dequantize(parts).T
    kernel = layer(x)  # 4 rows: the quantized kernel
    dense = layer(torch.cat([x, x]))[:4]  # 8 rows: the dense matmul
    assert kernel.dtype == dense.dtype == dtype
    # the kernels take bf16 activations: agreement to bf16 precision
    torch.testing.assert_close(kernel.float(), reference, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(dense.float(), reference, rtol=2e-2, atol=2e-2)


def test_dtype_auto_follows_native_bf16() -> None:
    assert native_bf16("flags\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert not native_bf16("flags\t: fpu avx512f avx512_vnni\n")
    assert resolve_dtype("auto") == ("bfloat16" if native_bf16() else "float32")
    assert resolve_dtype("float32") == "float32"
    with pytest.raises(ValueError, match="float16"):
        resolve_dtype("float16")
