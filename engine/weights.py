"""Loading a model artifact's weights into `LlamaForCausalLM`, plain or weight-only quantized.

A quantized artifact's config.json carries `"quantization": {"scheme": "int8" | "int4", "group_size":
32, "lm_head": "none" | "int8", ...}` (engine/quant_layout.py; a record an older scheme wrote is
refused) and its safetensors hold, for every projection, the parts of engine/quant.py
(`<name>.qweight`, `.scales`, `.mins`) instead of `<name>.weight`. lm_head (with tied embeddings,
the embedding table) stays in floating point by default: quantized logits moved greedy choices
(measured with the per-channel int8 of before: 3 of 8 prompts kept their first 32 greedy tokens,
against 8 of 8 with a float lm_head). `lm_head="int8"` stores it in int8 too; with tied embeddings
the embedding table is then lm_head's dequantized weight, so the two stay one matrix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from engine import kernels
from engine.config import LlamaConfig
from engine.model import DecoderLayer, LlamaForCausalLM
from engine.quant import (
    QuantizedLinear,
    concat_parts,
    dequantize,
    kernel_rows,
    quantize,
    quantize_int8,
)
from engine.quant_layout import LAYOUTS, is_current

PROJECTIONS = {
    "self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mlp": ("gate_proj", "up_proj", "down_proj"),
}
PART_KEYS = ("qweight", "scales", "mins")


def quantization_scheme(artifact_dir: Path) -> str:
    """ "none", "int8" or "int4", from the artifact's config.json; ValueError when an older scheme
    of that name wrote its weights (engine/quant_layout.py)."""
    raw = json.loads((artifact_dir / "config.json").read_text())
    record = raw.get("quantization")
    scheme = str((record or {}).get("scheme", "none"))
    if not is_current(record, scheme):
        raise ValueError(f"{artifact_dir} holds {scheme} weights of an older layout: quantize it again")
    return scheme


def read_weights(path: Path, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """Every tensor copied into private memory (floats cast to `dtype` when given), the file unmapped.

    safetensors maps the file; tensors left viewing the mapping would keep each page they ever
    touched resident on top of the private copies the model makes (fused projections, dtype casts).
    """
    state: dict[str, torch.Tensor] = {}
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            t = f.get_tensor(key)
            cast = dtype if dtype is not None and t.is_floating_point() else t.dtype
            state[key] = t.to(dtype=cast, copy=True)
    return state


def projection_names(num_layers: int) -> list[str]:
    """Every projection weight's prefix, e.g. "model.layers.0.self_attn.q_proj"."""
    return [
        f"model.layers.{i}.{block}.{p}"
        for i in range(num_layers)
        for block, ps in PROJECTIONS.items()
        for p in ps
    ]


def quantize_state(
    state: dict[str, torch.Tensor], cfg: LlamaConfig, scheme: str, lm_head: str = "none"
) -> dict[str, torch.Tensor]:
    """A float checkpoint's tensors -> a quantized checkpoint's (see the module docstring)."""
    out = dict(state)
    for name in projection_names(cfg.num_layers):
        for key, value in quantize(out.pop(f"{name}.weight"), scheme).items():
            out[f"{name}.{key}"] = value
    if lm_head == "none":
        return out
    head = out.pop("lm_head.weight", None)
    if cfg.tie_word_embeddings:
        head = out.pop("model.embed_tokens.weight")
    assert head is not None, "a checkpoint has lm_head.weight or tied embeddings"
    for key, value in quantize_int8(head).items():
        out[f"lm_head.{key}"] = value
    return out


def save_quantized(src: Path, dst: Path, scheme: str, lm_head: str = "none") -> None:
    """Writes model.safetensors and config.json of the `scheme` version of the artifact at `src`."""
    cfg = LlamaConfig.from_file(src / "config.json")
    state = quantize_state(read_weights(src / "model.safetensors", torch.float32), cfg, scheme, lm_head)
    save_file(
        {k: v.contiguous() for k, v in state.items()},
        str(dst / "model.safetensors"),
        metadata={"format": "pt"},
    )
    raw = json.loads((src / "config.json").read_text())
    raw["quantization"] = {
        "scheme": scheme,
        "lm_head": lm_head,
        "method": "weight-only, round to nearest",
        **LAYOUTS[scheme],
    }
    (dst / "config.json").write_text(json.dumps(raw, indent=2, sort_keys=True))


def _keys(path: Path) -> set[str]:
    with safe_open(str(path), framework="pt") as f:
        return set(f.keys())


def _parts(state: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    return {k: state.pop(f"{name}.{k}") for k in PART_KEYS if f"{name}.{k}" in state}


def fuse_projections(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """Hugging Face's separate q/k/v and gate/up weights -> our fused matrices."""
    for i in range(num_layers):
        attn, mlp = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        state[attn + "qkv_proj.weight"] = torch.cat([state.pop(attn + f"{n}_proj.weight") for n in "qkv"])
        state[mlp + "gate_up_proj.weight"] = torch.cat(
            [state.pop(mlp + f"{n}_proj.weight") for n in ("gate", "up")]
        )
    return state


def _install_quantized(
    model: LlamaForCausalLM,
    state: dict[str, torch.Tensor],
    dtype: torch.dtype,
    max_kernel_rows: int,
    scheme: str,
    use_kernels: bool,
) -> None:
    """Replaces every projection and lm_head with a QuantizedLinear built from `state`'s parts."""

    def linear(names: list[str]) -> QuantizedLinear:
        parts = concat_parts([_parts(state, n) for n in names])
        return QuantizedLinear(parts, scheme, dtype, max_kernel_rows, use_kernels=use_kernels)

    for i, module in enumerate(model.model.layers):
        layer = cast(DecoderLayer, module)
        attn, mlp = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        layer.self_attn.qkv_proj = linear([attn + f"{n}_proj" for n in "qkv"])
        layer.self_attn.o_proj = linear([attn + "o_proj"])
        layer.mlp.gate_up_proj = linear([mlp + "gate_proj", mlp + "up_proj"])
        layer.mlp.down_proj = linear([mlp + "down_proj"])
    head_parts = _parts(state, "lm_head")
    if head_parts:  # stored in int8 (quantize_state): the embedding table is its dequantized weight
        if model.config.tie_word_embeddings:
            state["model.embed_tokens.weight"] = dequantize(head_parts, "int8").to(dtype)
        model.lm_head = QuantizedLinear(head_parts, "int8", dtype, max_kernel_rows, use_kernels=use_kernels)
        return
    # Stored in floating point: a quantized lm_head (in the version's own scheme) computes the
    # logits of few-row steps, the float weight rescores each row's best candidates exactly (an
    # eighth (int4) or a quarter (int8) of the bytes read per token, the same greedy choices) and is
    # the dense weight of many-row steps. Its activations may be int8 (engine/quant.py): the
    # rescoring repairs what that rounding would move.
    head = state.pop("lm_head.weight", None)
    if head is None and model.config.tie_word_embeddings:
        head = state["model.embed_tokens.weight"]
    assert head is not None, "a checkpoint has lm_head.weight or tied embeddings"
    exact = head.to(dtype)
    model.lm_head = QuantizedLinear(
        quantize(head, scheme),
        scheme,
        dtype,
        max_kernel_rows,
        dense=exact,
        use_kernels=use_kernels,
        int8_acts=True,
    )
    model.exact_head = exact


def load_model(
    artifact_dir: Path,
    dtype: torch.dtype = torch.float32,
    max_kernel_rows: int | None = None,
    use_kernels: bool | None = None,
) -> LlamaForCausalLM:
    """Builds the model from a (verified) artifact folder; quantized artifacts get QuantizedLinear
    projections. use_kernels: run the engine's kernels (engine/kernels.py; default: when they are
    loaded), fused steps in fp32 and the integer quantized matmuls; without them, PyTorch's own
    int4 kernel runs steps of at most `max_kernel_rows` tokens (default: where it is measured faster
    than the dense matmul) and int8 runs the dense weight (engine/quant.py)."""
    if use_kernels is None:
        use_kernels = kernels.loaded()
    cfg = LlamaConfig.from_file(artifact_dir / "config.json")
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    scheme = quantization_scheme(artifact_dir)
    quantized = scheme != "none"
    if max_kernel_rows is None:
        max_kernel_rows = kernel_rows(scheme, dtype)
    float_head = quantized and "lm_head.qweight" not in _keys(artifact_dir / "model.safetensors")
    # quantized parts keep their own dtypes (int codes, fp32 scales) until QuantizedLinear packs them
    state = read_weights(artifact_dir / "model.safetensors", None if quantized else dtype)
    if quantized:
        _install_quantized(model, state, dtype, max_kernel_rows, scheme, use_kernels)
    else:
        state = fuse_projections(state, cfg.num_layers)
    state = {k: v.to(dtype) for k, v in state.items()}
    tied = cfg.tie_word_embeddings and not quantized
    if tied:
        state.pop("lm_head.weight", None)
    model.load_state_dict(state, strict=not tied, assign=True)
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight
    elif float_head and cfg.tie_word_embeddings:  # exact rescoring and dense steps: the embedding table
        model.exact_head = model.model.embed_tokens.weight.data
        cast(QuantizedLinear, model.lm_head).dense = model.exact_head
    model = model.to(dtype)
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"weights missing from the artifact: {missing[:5]}")
    model.fused = use_kernels and dtype == torch.float32
    return model.eval()
