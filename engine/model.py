"""A Llama-family decoder in plain PyTorch (the architecture of SmolLM2).

Tokens of one step are flattened into one dimension T; `positions` gives each token's index in its
sequence. Attention is delegated to a KV cache object (see engine/kv_cache.py) that stores this
step's keys/values and attends each query over its sequence's cached prefix, so the model itself
holds no per-sequence state. Module and parameter names match Hugging Face's checkpoints.
"""

from __future__ import annotations

from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import LlamaConfig
from engine.kv_cache import StackInputs
from engine.quant import QuantizedLinear

RESCORE = 8  # candidates per row scored exactly when lm_head is approximate
# llm::decoder_stack's projection kinds (engine/csrc/stack.cpp)
DENSE, Q4, Q8, Q4_INT8 = 0, 1, 2, 3
# its weights, kinds, output sizes (4 a layer: qkv, o, gate_up, down) and norms (2 a layer + final)
StackArgs = tuple[list[torch.Tensor], list[int], list[int], list[torch.Tensor]] | tuple[()]


class KVCache(Protocol):
    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Stores k, v [T, Hkv, D] for this step and returns attention output [T, Hq, D] for q."""
        ...

    def attend_qkv(
        self, layer: int, qkv: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor
    ) -> torch.Tensor:
        """The same from the unrotated q|k|v projection [T, (Hq + 2 Hkv) * D] (the engine's kernels)."""
        ...

    def stack_inputs(self, tokens: int) -> StackInputs | None:
        """Every layer's caches and the step's token rows for `llm::decoder_stack`; None: this cache
        is not the paged one, and the layers run one by one."""
        ...


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused kernel: the same products in the same order
            return F.rms_norm(x, (x.shape[-1],), self.weight, eps=self.eps)
        # normalise in fp32, scale in the model dtype (Hugging Face's order of operations)
        normed = F.rms_norm(x.to(torch.float32), (x.shape[-1],), eps=self.eps).to(x.dtype)
        return self.weight * normed


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, "rotate half" layout, computed in fp32. forward() gives cos and a
    signed sin whose first half is negated, so that rotate_half(x) * sin == roll(x) * signed_sin."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        # A plain attribute, not a buffer: Module.to(dtype) must leave it in fp32.
        with torch.device("cpu"):  # real values also when the model is built on "meta"
            self.inv_freq = 1.0 / (
                theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
            )

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq[None, :]  # [T, D/2]
        sin = freqs.sin()
        cos = freqs.cos()
        return torch.cat((cos, cos), dim=-1).to(dtype), torch.cat((-sin, sin), dim=-1).to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x: [T, H, D]; cos/signed_sin: [T, D] (RotaryEmbedding). Hugging Face's
    x * cos + rotate_half(x) * sin, where rotate_half(x) = [-x2, x1] = roll(x, D/2) * sign: the
    same products, in three operations instead of eight."""
    rolled = torch.roll(x, x.shape[-1] // 2, dims=-1)
    return torch.addcmul(x * cos[:, None, :], rolled, signed_sin[:, None, :])


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_heads
        self.num_kv_heads = cfg.num_kv_heads
        self.head_dim = cfg.head_dim
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        # q, k and v projections fused into one matrix: rows [q | k | v]
        # (nn.Module: a quantized version installs engine.quant.QuantizedLinear in their place)
        self.qkv_proj: nn.Module = nn.Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj: nn.Module = nn.Linear(self.q_size, cfg.hidden_size, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache, layer: int
    ) -> torch.Tensor:
        t, qk_size = x.shape[0], self.q_size + self.kv_size
        qkv = self.qkv_proj(x)  # [T, (Hq + 2 Hkv) * D]
        # q and k rotated together: [T, Hq + Hkv, D]
        qk = apply_rotary(
            qkv[:, :qk_size].view(t, self.num_heads + self.num_kv_heads, self.head_dim), cos, sin
        )
        q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]  # [T, Hq, D], [T, Hkv, D]
        v = qkv[:, qk_size:].reshape(t, self.num_kv_heads, self.head_dim)  # [T, Hkv, D]
        attn = cache.attend(layer, q, k, v)  # [T, Hq, D]
        out: torch.Tensor = self.o_proj(attn.reshape(t, self.num_heads * self.head_dim))
        return out


class MLP(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        # gate and up projections fused into one matrix: rows [gate | up]
        self.gate_up_proj: nn.Module = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj: nn.Module = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        out: torch.Tensor = self.down_proj(F.silu(gate) * up)
        return out


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache, layer: int
    ) -> torch.Tensor:
        h: torch.Tensor = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, layer)
        out: torch.Tensor = h + self.mlp(self.post_attention_layernorm(h))
        return out


class LlamaModel(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        # an explicit, uninitialised weight: the random init would be overwritten by load_model
        empty = torch.empty((cfg.vocab_size, cfg.hidden_size))
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, _weight=empty)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg)
        self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rope_theta)
        self.lm_head: nn.Module = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        # When lm_head is an approximation (quantized): the float weight [vocab, hidden] with which
        # each row's RESCORE best candidates are scored exactly.
        self.exact_head: torch.Tensor | None = None
        # Steps run the engine's fused kernels (engine/kernels.py; fp32 activations only): set by
        # engine/weights.py `load_model` when the kernels are loaded.
        self.fused = False
        # Fused steps run every layer in one call, llm::decoder_stack (engine/csrc/stack.cpp), where
        # the cache and the projections allow; False: layer by layer (the reference it equals).
        self.stacked = True
        self._stack: StackArgs | None = None  # its weights (decoder_stack_args), built at first use

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        cache: KVCache,
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """input_ids, positions: [T] -> final hidden states [T, hidden]; with `keep` (int64 row
        indices: the rows a step samples), those rows' only [len(keep), hidden]. Every row's keys
        and values are stored either way; with the kernels, the last layer runs only the kept rows
        past that (what the others would compute there feeds nothing)."""
        x = self.model.embed_tokens(input_ids)
        cos, sin = self.rotary(positions, x.dtype)
        if self.fused:
            return self._forward_fused(x, cos, sin, cache, keep)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, cache, i)
        out: torch.Tensor = self.model.norm(x)
        return out if keep is None else out.index_select(0, keep)

    def _forward_fused(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache, keep: torch.Tensor | None
    ) -> torch.Tensor:
        """The same layers with the kernels: each residual add is fused into the norm after it,
        so x [T, hidden] is the residual stream (updated in place) and h what the next block reads.
        The last layer runs the `keep` rows only, once every row's key and value are stored."""
        ops, eps, cfg = torch.ops.llm, self.config.rms_norm_eps, self.config
        t = x.shape[0]
        if self._stack is None:
            self._stack = decoder_stack_args(self)
        step = cache.stack_inputs(t) if self.stacked and self._stack else None
        if step is not None and self._stack:  # every layer in one call: the same kernels, in order
            weights, kinds, outs, norms = self._stack
            h_out: torch.Tensor = ops.decoder_stack(
                x, weights, kinds, outs, norms, step.k_caches, step.v_caches, step.slots, step.tables,
                step.lens, cos, sin, cfg.num_heads, cfg.num_kv_heads, eps, keep,
            )  # fmt: skip
            return h_out
        layers = [cast(DecoderLayer, m) for m in self.model.layers]
        h = ops.rms_norm(x, layers[0].input_layernorm.weight, eps)
        for i, layer in enumerate(layers):
            attn, mlp = layer.self_attn, layer.mlp
            a = cache.attend_qkv(i, attn.qkv_proj(h), cos, sin)  # [T, Hq, D]
            if keep is not None and i == len(layers) - 1:  # each row's attention is its own: the same bits
                a, x, t = a.index_select(0, keep), x.index_select(0, keep), keep.shape[0]
                if t == 0:
                    return x
            h = ops.add_rms_norm(x, attn.o_proj(a.view(t, -1)), layer.post_attention_layernorm.weight, eps)
            after = layers[i + 1].input_layernorm if i + 1 < len(layers) else self.model.norm
            h = ops.add_rms_norm(x, mlp.down_proj(_gate_up_silu(mlp.gate_up_proj, h)), after.weight, eps)
        out: torch.Tensor = h
        return out

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [N, hidden] -> fp32 logits [N, vocab]. With an approximate lm_head, each row's
        RESCORE highest logits are replaced by exact ones, so greedy choices are the float head's."""
        logits: torch.Tensor = self.lm_head(hidden).float()
        if self.exact_head is not None:
            top = (  # [N, RESCORE]
                torch.ops.llm.topk_indices(logits, RESCORE)
                if self.fused
                else logits.topk(RESCORE, dim=-1).indices
            )
            rows = self.exact_head[top].float()  # [N, RESCORE, hidden]
            logits.scatter_(1, top, torch.einsum("nd,nkd->nk", hidden.float(), rows))
        return logits


def _projection(module: nn.Module) -> tuple[torch.Tensor, int, int] | None:
    """(weight, kind, output size) of a projection llm::decoder_stack can run, else None."""
    if isinstance(module, QuantizedLinear) and module.packed is not None:
        kind = Q4_INT8 if module.int8_acts else Q4 if module.scheme == "int4" else Q8
        return module.packed, kind, module.out_features
    if type(module) is nn.Linear and module.bias is None and module.weight.dtype == torch.float32:
        return module.weight, DENSE, module.out_features
    return None


def _gate_up_silu(projection: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, as llm::decoder_stack makes it: fused for a packed int4 projection."""
    found = _projection(projection)
    if found is not None and found[1] == Q4:
        fused: torch.Tensor = torch.ops.llm.q4_gate_up_silu(h, found[0], found[2])
        return fused
    out: torch.Tensor = torch.ops.llm.silu_mul(projection(h))
    return out


def decoder_stack_args(model: LlamaForCausalLM) -> StackArgs:
    """llm::decoder_stack's weights for `model`; () when a projection is one it cannot run."""
    layers = [cast(DecoderLayer, m) for m in model.model.layers]
    weights: list[torch.Tensor] = []
    kinds: list[int] = []
    outs: list[int] = []
    norms: list[torch.Tensor] = [layers[0].input_layernorm.weight]
    for i, layer in enumerate(layers):
        attn, mlp = layer.self_attn, layer.mlp
        for module in (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj):
            found = _projection(module)
            if found is None:
                return ()
            weights.append(found[0])
            kinds.append(found[1])
            outs.append(found[2])
        after = layers[i + 1].input_layernorm if i + 1 < len(layers) else model.model.norm
        norms += [layer.post_attention_layernorm.weight, after.weight]
    return weights, kinds, outs, norms
