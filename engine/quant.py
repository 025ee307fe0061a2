"""Weight-only quantization: int8 with a scale per output channel, int4 with a scale and a minimum
per group of input channels. Activations stay in floating point.

Storage (the artifact's safetensors, portable across kernels), for a Linear weight W [N, K]:

    int8    <name>.qweight  int8  [N, K]          W ~= qweight * scales[:, None]
            <name>.scales   fp32  [N]
    int4    <name>.qweight  uint8 [N, K // 2]     two 4-bit codes per byte, low nibble first
            <name>.scales   fp32  [N, K // G]     W[n, g*G + i] ~= code * scales[n, g] + mins[n, g]
            <name>.mins     fp32  [N, K // G]

At load a `QuantizedLinear` repacks the codes for PyTorch's CPU weight-only kernels
(`_weight_int8pack_mm`, `_weight_int4pack_mm_for_cpu`, both fed bf16 activations) and also keeps
the dequantized weight in the compute dtype: steps with few rows (decode) are bound by memory
bandwidth and run the quantized kernel, steps with many rows (prefill chunks, large batches) are
bound by compute and run the dense matmul. Both compute x @ dequant(W)^T.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SCHEMES = ("none", "int8", "int4")
INT4_GROUP = 32  # input channels per int4 group (the GGUF Q4_1 block, so its grid is kept)


def kernel_rows(scheme: str, dtype: torch.dtype) -> int:
    """Rows up to which the quantized kernel beats the dense matmul in `dtype` (measured on 2-core
    AVX-512 machines: the kernels' cost grows with rows, the dense one's barely does)."""
    if dtype == torch.bfloat16:
        return 12 if scheme == "int4" else 6
    return 32 if scheme == "int4" else 16


def quantize_int8(w: torch.Tensor) -> dict[str, torch.Tensor]:
    """w [N, K] float -> {qweight int8 [N, K], scales fp32 [N]} (symmetric, per output channel)."""
    w = w.float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
    q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return {"qweight": q, "scales": scales}


def quantize_int4(w: torch.Tensor, group: int = INT4_GROUP) -> dict[str, torch.Tensor]:
    """w [N, K] float -> {qweight uint8 [N, K/2], scales, mins fp32 [N, K/group]} (asymmetric)."""
    n, k = w.shape
    if k % group:
        raise ValueError(f"in_features {k} is not a multiple of the int4 group {group}")
    g = w.float().view(n, k // group, group)
    mins = g.amin(dim=-1)
    scales = ((g.amax(dim=-1) - mins) / 15.0).clamp(min=1e-12)
    codes = torch.round((g - mins[..., None]) / scales[..., None]).clamp(0, 15).to(torch.uint8).view(n, k)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # [N, K/2]
    return {"qweight": packed.contiguous(), "scales": scales.contiguous(), "mins": mins.contiguous()}


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> codes int32 [N, K] in 0..15."""
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1)  # [N, K/2, 2]
    return codes.view(packed.shape[0], -1).to(torch.int32)


def dequantize(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """The float32 weight [N, K] that the stored parts stand for."""
    q, scales = parts["qweight"], parts["scales"]
    if "mins" not in parts:
        return q.float() * scales[:, None]
    codes = unpack_int4(q).float()
    n, k = codes.shape
    group = k // scales.shape[1]
    w = codes.view(n, k // group, group) * scales[..., None] + parts["mins"][..., None]
    return w.view(n, k)


def quantize(w: torch.Tensor, scheme: str) -> dict[str, torch.Tensor]:
    if scheme == "int8":
        return quantize_int8(w)
    if scheme == "int4":
        return quantize_int4(w)
    raise ValueError(f"unknown quantization scheme {scheme!r} (one of {', '.join(SCHEMES[1:])})")


def concat_parts(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Stacks the output channels of several quantized weights (as fusing q/k/v does)."""
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


class QuantizedLinear(nn.Module):
    """A bias-free Linear whose weight is stored quantized; see the module docstring."""

    def __init__(
        self,
        parts: dict[str, torch.Tensor],
        dtype: torch.dtype,
        max_kernel_rows: int,
        dense: torch.Tensor | None = None,
    ) -> None:
        """dense: the weight that many-row steps multiply by (default: the dequantized parts; an
        lm_head passes its float weight, which it holds anyway for exact rescoring)."""
        super().__init__()
        self.out_features, self.in_features = parts["qweight"].shape[0], parts["scales"].numel()
        self.dtype = dtype
        self.max_kernel_rows = max_kernel_rows  # rows up to which the quantized kernel runs
        self.scheme = "int4" if "mins" in parts else "int8"
        weight = dequantize(parts) if dense is None else dense
        self.in_features = weight.shape[1]
        self.dense = weight.to(dtype)  # [N, K] in the compute dtype
        if self.scheme == "int8":
            self.qweight = parts["qweight"].contiguous()
            self.scales = parts["scales"].to(torch.bfloat16)
        else:
            scales, mins = parts["scales"], parts["mins"]
            self.group = self.in_features // scales.shape[1]
            self.qweight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
                unpack_int4(parts["qweight"]), 1
            )
            # the kernel computes (code - 8) * scale + zero: zero = min + 8 * scale
            self.scales = torch.stack((scales, mins + 8 * scales), dim=-1).transpose(0, 1).contiguous()
            self.scales = self.scales.to(torch.bfloat16)  # [K/G, N, 2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > self.max_kernel_rows:
            return F.linear(x, self.dense)
        xb = x.to(torch.bfloat16)
        if self.scheme == "int8":
            out = torch.ops.aten._weight_int8pack_mm(xb, self.qweight, self.scales)
        else:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(xb, self.qweight, self.group, self.scales)
        result: torch.Tensor = out.to(x.dtype)
        return result

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, scheme={self.scheme}"
