"""Weight-only quantization: int8 with a scale per output channel, int4 with a scale and a minimum
per group of input channels. Activations stay in floating point.

Storage (the artifact's safetensors, portable across kernels), for a Linear weight W [N, K]:

    int8    <name>.qweight  int8  [N, K]          W ~= qweight * scales[:, None]
            <name>.scales   fp32  [N]
    int4    <name>.qweight  uint8 [N, K // 2]     two 4-bit codes per byte, low nibble first
            <name>.scales   fp32  [N, K // G]     W[n, g*G + i] ~= code * scales[n, g] + mins[n, g]
            <name>.mins     fp32  [N, K // G]

At load a `QuantizedLinear` repacks the codes for the engine's own kernels when they are loaded
(engine/kernels.py: `llm::q4_linear` / `llm::q8_linear`, integer dot products over activations
quantized per 32 channels; `pack_q4` / `pack_q8` write their tiles). They beat the dense fp32 matmul
at every step size measured (1 to 512 rows on one core: 6x at 1 row, 1.4x at 512), so the layer
keeps no dense copy. Without them it uses PyTorch's CPU weight-only kernels
(`_weight_int8pack_mm`, `_weight_int4pack_mm_for_cpu`, both fed bf16 activations) for few-row
steps and a dequantized dense copy for many-row ones. All compute x @ dequant(W)^T.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine import kernels

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
    """w [N, K] float -> {qweight uint8 [N, K/2], scales, mins fp32 [N, K/group]} (asymmetric).

    Scales and minimums are fp16 values (held in fp32), as in GGUF's Q4_1, whose grid this keeps
    exactly: the kernels store them in fp16, so what they compute is what `dequantize` gives."""
    n, k = w.shape
    if k % group:
        raise ValueError(f"in_features {k} is not a multiple of the int4 group {group}")
    g = w.float().view(n, k // group, group)
    mins = g.amin(dim=-1).half().float()
    # at least fp16's smallest normal: a constant group keeps a usable scale
    scales = ((g.amax(dim=-1) - mins) / 15.0).clamp(min=2.0**-14).half().float()
    if not (torch.isfinite(mins).all() and torch.isfinite(scales).all()):
        raise ValueError("weights beyond fp16's range cannot take int4 scales")
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


def pack_q4(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """int4 parts of W [N, K] -> the tiles `llm::q4_linear` reads: uint8 [ceil(N/16), K/32, 320]
    (engine/csrc/quant_linear.cpp draws the layout); rows past N are zero."""
    codes, scales, mins = unpack_int4(parts["qweight"]).to(torch.uint8), parts["scales"], parts["mins"]
    n, k = codes.shape
    if k % INT4_GROUP or scales.shape[1] != k // INT4_GROUP:
        raise ValueError(f"the kernels need groups of {INT4_GROUP} input channels")
    tiles, groups, pad = -(-n // 16), k // INT4_GROUP, -n % 16
    codes, scales, mins = (F.pad(t, (0, 0, 0, pad)) for t in (codes, scales, mins))
    c = codes.view(tiles, 16, k // 8, 4, 2)  # [tile, row, block b, pair p, j]: k = 8b + 2p + j
    # a row's 32-bit word holds code(8b + 2p + j) at bit 16 j + 4 p, so its byte 2 j + h holds the
    # pairs p = 2h (low nibble) and 2h + 1 (high nibble)
    nibbles = (c[..., 0::2, :] | (c[..., 1::2, :] << 4)).transpose(-1, -2)  # [tile, row, b, j, h]
    blocks = nibbles.reshape(tiles, 16, k // 8, 4).permute(0, 2, 1, 3).reshape(tiles, groups, 256)
    meta = torch.stack((scales.view(tiles, 16, groups), mins.view(tiles, 16, groups)), dim=2)
    meta = meta.permute(0, 3, 2, 1).to(torch.float16).contiguous()  # [tile, group, scale/min, row]
    return torch.cat((blocks, meta.view(torch.uint8).reshape(tiles, groups, 64)), dim=-1).contiguous()


def pack_q8(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """int8 qweight [N, K] -> the tiles `llm::q8_linear` reads: uint8 [ceil(N/16), K/32, 512] (the
    signed codes' bytes, each row's pairs of channels side by side)."""
    q = parts["qweight"]
    n, k = q.shape
    if k % INT4_GROUP:
        raise ValueError(f"the kernels need a multiple of {INT4_GROUP} input channels")
    tiles = -(-n // 16)
    pairs = (
        F.pad(q, (0, 0, 0, -n % 16)).view(tiles, 16, k // 2, 2).permute(0, 2, 1, 3)
    )  # [tile, pair, row, 2]
    return pairs.reshape(tiles, k // INT4_GROUP, 512).contiguous().view(torch.uint8)


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
        use_kernels: bool | None = None,
    ) -> None:
        """dense: the weight that many-row steps multiply by (default: the dequantized parts; an
        lm_head passes its float weight, which it holds anyway for exact rescoring). use_kernels:
        run the engine's kernels (default: when they are loaded)."""
        super().__init__()
        self.out_features = parts["qweight"].shape[0]
        self.in_features = parts["qweight"].shape[1] * (2 if "mins" in parts else 1)
        self.dtype = dtype
        self.max_kernel_rows = max_kernel_rows  # rows up to which PyTorch's quantized kernel runs
        self.scheme = "int4" if "mins" in parts else "int8"
        # the engine's kernels: every step size, no dense copy (the module docstring)
        self.packed: torch.Tensor | None = None
        self.row_scales: torch.Tensor | None = None  # int8: fp32 [N]
        if use_kernels is None:
            use_kernels = kernels.loaded()
        if use_kernels and self.in_features % INT4_GROUP == 0:
            self.packed = pack_q4(parts) if self.scheme == "int4" else pack_q8(parts)
            self.row_scales = None if self.scheme == "int4" else parts["scales"].float().contiguous()
            self.dense = dense  # only lm_head passes one: its exact rescoring weight
            return
        weight = dequantize(parts) if dense is None else dense
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
        if self.packed is not None:
            xf = x if x.dtype == torch.float32 and x.is_contiguous() else x.float().contiguous()
            if self.row_scales is None:
                y: torch.Tensor = torch.ops.llm.q4_linear(xf, self.packed, self.out_features)
            else:
                y = torch.ops.llm.q8_linear(xf, self.packed, self.row_scales)
            return y if x.dtype == torch.float32 else y.to(x.dtype)
        assert self.dense is not None
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
        path = "llm kernels" if self.packed is not None else "aten kernels"
        return f"{self.in_features}, {self.out_features}, scheme={self.scheme}, {path}"
