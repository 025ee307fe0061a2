"""KV cache storage that the model attends through.

`SequenceKVCache` holds one sequence's keys and values contiguously, sized for its prompt plus its
output limit. The paged block pool (engine issue) replaces it behind the same `attend()` contract.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.config import LlamaConfig


class SequenceKVCache:
    """Keys/values of one sequence: [layers, capacity, Hkv, D] each."""

    def __init__(self, cfg: LlamaConfig, capacity: int, dtype: torch.dtype) -> None:
        shape = (cfg.num_layers, capacity, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype)
        self.v = torch.zeros(shape, dtype=dtype)
        self.capacity = capacity
        self.num_cached = 0  # tokens whose keys/values are stored
        self._step_start = 0
        self._step_len = 0

    def begin_step(self, num_tokens: int) -> None:
        """Declares that the next forward appends `num_tokens` tokens after the cached ones."""
        if self.num_cached + num_tokens > self.capacity:
            raise ValueError(f"KV capacity {self.capacity} exceeded")
        self._step_start, self._step_len = self.num_cached, num_tokens

    def end_step(self) -> None:
        self.num_cached = self._step_start + self._step_len

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        start, t = self._step_start, self._step_len
        end = start + t
        self.k[layer, start:end] = k
        self.v[layer, start:end] = v
        qh = q.transpose(0, 1).unsqueeze(0)  # [1, Hq, T, D]
        kh = self.k[layer, :end].transpose(0, 1).unsqueeze(0)  # [1, Hkv, end, D]
        vh = self.v[layer, :end].transpose(0, 1).unsqueeze(0)
        mask = None
        if t > 1:
            # query i (absolute position start+i) sees keys 0..start+i
            rows = torch.arange(start, end)[:, None]
            mask = rows >= torch.arange(end)[None, :]  # [T, end]
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, enable_gqa=True)
        return out[0].transpose(0, 1)  # [T, Hq, D]
