"""Weight-only quantization: a scale and a minimum per group of 32 input channels, on 256 levels
(int8) or 16 (int4). Activations stay in floating point.

Storage (the artifact's safetensors, portable across kernels), for a Linear weight W [N, K] and
G = 32 (engine/quant_layout.py, which config.json records):

    int8    <name>.qweight  uint8 [N, K]          W[n, g*G + i] ~= code * scales[n, g] + mins[n, g]
            <name>.scales   fp32  [N, K // G]     code = qweight[n, g*G + i] in 0..255
            <name>.mins     fp32  [N, K // G]
    int4    <name>.qweight  uint8 [N, K // 2]     two 4-bit codes per byte, low nibble first
            <name>.scales   fp32  [N, K // G]     W[n, g*G + i] ~= code * scales[n, g] + mins[n, g]
            <name>.mins     fp32  [N, K // G]

Scales and minimums are fp16 values held in fp32 (the kernels store them in fp16). A GGUF Q4_1
group (16 levels: code * d + m, d and m fp16) keeps its minimum exactly under both; int4 keeps its
grid exactly, int8 to within fp16's rounding of its scale d / 17 (at most 15 * 2^-11 d, under
0.75% of d).

At load a `QuantizedLinear` repacks the codes for the engine's own kernels when they are loaded
(engine/kernels.py: `llm::q4_linear` / `llm::q8_linear`, integer dot products over activations
quantized per 32 channels; `pack_q4` / `pack_q8` write their tiles). They beat the dense fp32 matmul
at every step size measured (1 to 512 rows on one core: 6x at 1 row, 1.4x at 512), so the layer
keeps no dense copy. Without them, int4 uses PyTorch's CPU weight-only kernel
(`_weight_int4pack_mm_for_cpu`, fed bf16 activations) for few-row steps and a dequantized dense copy
for many-row ones; int8 uses the dense copy for every step (PyTorch's `_weight_int8pack_mm` takes one
scale per output channel, not groups). All compute x @ dequant(W)^T.

An int4 layer built with `int8_acts` runs `llm::q4_linear_i8dot` where the kernels have it (AVX-512
VNNI): activations rounded to int8, 1.3-1.7x faster, about 5x the rounding error of bf16
(engine/csrc/i8dot.h). Only an lm_head whose best candidates are rescored exactly asks for it. Where
AMX tiles serve `llm::q4_linear`, steps of 32 rows or more go there instead (`llm::q4_linear_int8_acts`,
engine/csrc/ops.cpp).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine import kernels
from engine.quant_layout import GROUP, SCHEMES


def kernel_rows(scheme: str, dtype: torch.dtype) -> int:
    """Rows up to which PyTorch's int4 kernel beats the dense matmul in `dtype` (measured on 2-core
    AVX-512 machines: the kernel's cost grows with rows, the dense one's barely does); 0 for the
    other schemes, which have no PyTorch kernel (int8: the module docstring)."""
    if scheme != "int4":
        return 0
    return 12 if dtype == torch.bfloat16 else 32


def _asymmetric(w: torch.Tensor, levels: int, group: int) -> tuple[torch.Tensor, ...]:
    """w [N, K] float -> codes uint8 [N, K] in 0..levels, scales and mins fp32 [N, K/group] holding
    fp16 values: W ~= code * scale + min over each group of `group` input channels."""
    n, k = w.shape
    if k % group:
        raise ValueError(f"in_features {k} is not a multiple of the group {group}")
    g = w.float().view(n, k // group, group)
    mins = g.amin(dim=-1).half().float()
    # at least fp16's smallest normal: a constant group keeps a usable scale
    scales = ((g.amax(dim=-1) - mins) / levels).clamp(min=2.0**-14).half().float()
    if not (torch.isfinite(mins).all() and torch.isfinite(scales).all()):
        raise ValueError("weights beyond fp16's range cannot take fp16 scales")
    codes = torch.round((g - mins[..., None]) / scales[..., None]).clamp(0, levels).to(torch.uint8)
    return codes.view(n, k), scales.contiguous(), mins.contiguous()


def quantize_int8(w: torch.Tensor, group: int = GROUP) -> dict[str, torch.Tensor]:
    """w [N, K] float -> {qweight uint8 [N, K], scales, mins fp32 [N, K/group]} (asymmetric)."""
    codes, scales, mins = _asymmetric(w, 255, group)
    return {"qweight": codes.contiguous(), "scales": scales, "mins": mins}


def quantize_int4(w: torch.Tensor, group: int = GROUP) -> dict[str, torch.Tensor]:
    """w [N, K] float -> {qweight uint8 [N, K/2], scales, mins fp32 [N, K/group]} (asymmetric)."""
    codes, scales, mins = _asymmetric(w, 15, group)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # [N, K/2]
    return {"qweight": packed.contiguous(), "scales": scales, "mins": mins}


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> codes int32 [N, K] in 0..15."""
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1)  # [N, K/2, 2]
    return codes.view(packed.shape[0], -1).to(torch.int32)


def dequantize(parts: dict[str, torch.Tensor], scheme: str) -> torch.Tensor:
    """The float32 weight [N, K] that `scheme`'s stored parts stand for."""
    codes = (unpack_int4(parts["qweight"]) if scheme == "int4" else parts["qweight"]).float()
    scales, mins = parts["scales"], parts["mins"]
    n, k = codes.shape
    group = k // scales.shape[1]
    w = codes.view(n, k // group, group) * scales[..., None] + mins[..., None]
    return w.view(n, k)


def _tile_meta(parts: dict[str, torch.Tensor], tiles: int, groups: int, pad: int) -> torch.Tensor:
    """Each tile's group metadata: uint8 [tile, group, 64], the fp16 scales of its 16 rows, then
    their fp16 minimums."""
    scales, mins = (F.pad(parts[key], (0, 0, 0, pad)).view(tiles, 16, groups) for key in ("scales", "mins"))
    meta = torch.stack((scales, mins), dim=2).permute(0, 3, 2, 1)  # [tile, group, scale/min, row]
    return meta.to(torch.float16).contiguous().view(torch.uint8).reshape(tiles, groups, 64)


def _tile_shape(codes: torch.Tensor, parts: dict[str, torch.Tensor]) -> tuple[int, int, int]:
    """(tiles, groups, padding rows) of W [N, K]; ValueError unless its groups are the kernels'."""
    n, k = codes.shape
    if k % GROUP or parts["scales"].shape[1] != k // GROUP:
        raise ValueError(f"the kernels need groups of {GROUP} input channels")
    return -(-n // 16), k // GROUP, -n % 16


def pack_q4(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """int4 parts of W [N, K] -> the tiles `llm::q4_linear` reads: uint8 [ceil(N/16), K/32, 320]
    (engine/csrc/quant_linear.cpp draws the layout); rows past N are zero."""
    codes = unpack_int4(parts["qweight"]).to(torch.uint8)
    tiles, groups, pad = _tile_shape(codes, parts)
    k = codes.shape[1]
    c = F.pad(codes, (0, 0, 0, pad)).view(tiles, 16, k // 8, 4, 2)  # [tile, row, block b, pair p, j]
    # a row's 32-bit word holds code(8b + 2p + j) at bit 16 j + 4 p, so its byte 2 j + h holds the
    # pairs p = 2h (low nibble) and 2h + 1 (high nibble)
    nibbles = (c[..., 0::2, :] | (c[..., 1::2, :] << 4)).transpose(-1, -2)  # [tile, row, b, j, h]
    blocks = nibbles.reshape(tiles, 16, k // 8, 4).permute(0, 2, 1, 3).reshape(tiles, groups, 256)
    return torch.cat((blocks, _tile_meta(parts, tiles, groups, pad)), dim=-1).contiguous()


def pack_q8(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """int8 parts of W [N, K] -> the tiles `llm::q8_linear` reads: uint8 [ceil(N/16), K/32, 576]
    (engine/csrc/quant_linear.cpp draws the layout: the centred codes (code - 128) as signed bytes,
    each row's pairs of channels side by side, then the group's scales and minimums); rows past N
    are zero."""
    codes = parts["qweight"]
    tiles, groups, pad = _tile_shape(codes, parts)
    centred = (codes.to(torch.int16) - 128).to(torch.int8)
    k = codes.shape[1]
    pairs = (
        F.pad(centred, (0, 0, 0, pad)).view(tiles, 16, k // 2, 2).permute(0, 2, 1, 3)
    )  # [tile, pair, row, 2]
    blocks = pairs.reshape(tiles, groups, 512).contiguous().view(torch.uint8)
    return torch.cat((blocks, _tile_meta(parts, tiles, groups, pad)), dim=-1).contiguous()


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
        scheme: str,
        dtype: torch.dtype,
        max_kernel_rows: int,
        dense: torch.Tensor | None = None,
        use_kernels: bool | None = None,
        int8_acts: bool = False,
    ) -> None:
        """parts: `scheme`'s stored tensors. dense: the weight that many-row steps multiply by
        (default: the dequantized parts; an lm_head passes its float weight, which it holds anyway
        for exact rescoring). use_kernels: run the engine's kernels (default: when they are loaded).
        int8_acts: int4 activations may be rounded to int8 (the module docstring)."""
        super().__init__()
        if scheme not in SCHEMES[1:]:
            raise ValueError(f"unknown quantization scheme {scheme!r}")
        self.scheme = scheme
        self.out_features = parts["qweight"].shape[0]
        self.in_features = parts["qweight"].shape[1] * (2 if scheme == "int4" else 1)
        self.dtype = dtype
        # rows up to which PyTorch's quantized kernel runs (int4 only: int8 has none in PyTorch)
        self.max_kernel_rows = max_kernel_rows if scheme == "int4" else 0
        # the engine's kernels: every step size, no dense copy (the module docstring)
        self.packed: torch.Tensor | None = None
        if use_kernels is None:
            use_kernels = kernels.loaded()
        self.int8_acts = False  # llm::q4_linear_int8_acts instead of llm::q4_linear
        if use_kernels and self.in_features % GROUP == 0:
            self.packed = pack_q4(parts) if scheme == "int4" else pack_q8(parts)
            self.int8_acts = int8_acts and scheme == "int4" and kernels.int8_activations()
            self.dense = dense  # only lm_head passes one: its exact rescoring weight
            return
        weight = dequantize(parts, scheme) if dense is None else dense
        self.dense = weight.to(dtype)  # [N, K] in the compute dtype
        if scheme == "int4":
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
            ops = torch.ops.llm
            op = ops.q4_linear if self.scheme == "int4" else ops.q8_linear
            op = ops.q4_linear_int8_acts if self.int8_acts else op
            y: torch.Tensor = op(xf, self.packed, self.out_features)
            return y if x.dtype == torch.float32 else y.to(x.dtype)
        assert self.dense is not None
        if x.shape[0] > self.max_kernel_rows:
            return F.linear(x, self.dense)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x.to(torch.bfloat16), self.qweight, self.group, self.scales
        )
        result: torch.Tensor = out.to(x.dtype)
        return result

    def extra_repr(self) -> str:
        path = (
            "llm kernels" if self.packed is not None else "aten kernels" if self.max_kernel_rows else "dense"
        )
        return f"{self.in_features}, {self.out_features}, scheme={self.scheme}, {path}"
