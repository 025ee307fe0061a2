"""A tiny Llama checkpoint as a Hugging Face folder (random weights, the real tokenizer and chat
template): small enough to build, push and load in a test in a second or two."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from llmctl.cli import main as llmctl

TINY_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 49152,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "rms_norm_eps": 1e-5,
    "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
    "dtype": "float32",
}


def tiny_hf_folder(artifact_dir: Path, into: Path, seed: int = 0) -> Path:
    """Writes config.json, model.safetensors (seeded random weights), tokenizer.json and
    tokenizer_config.json (with the chat template) into `into`."""
    import torch
    from safetensors.torch import save_file

    into.mkdir(parents=True)
    c = TINY_CONFIG
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * c["head_dim"]
    g = torch.Generator().manual_seed(seed)

    def w(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.02).contiguous()

    state = {"model.embed_tokens.weight": w(v, h), "model.norm.weight": torch.ones(h)}
    for n in range(c["num_hidden_layers"]):
        p = f"model.layers.{n}."
        state |= {
            p + "self_attn.q_proj.weight": w(h, h),
            p + "self_attn.k_proj.weight": w(kv, h),
            p + "self_attn.v_proj.weight": w(kv, h),
            p + "self_attn.o_proj.weight": w(h, h),
            p + "mlp.gate_proj.weight": w(i, h),
            p + "mlp.up_proj.weight": w(i, h),
            p + "mlp.down_proj.weight": w(h, i),
            p + "input_layernorm.weight": torch.ones(h),
            p + "post_attention_layernorm.weight": torch.ones(h),
        }
    save_file(state, str(into / "model.safetensors"), metadata={"format": "pt"})
    (into / "config.json").write_text(json.dumps(c, indent=2))
    shutil.copyfile(artifact_dir / "tokenizer.json", into / "tokenizer.json")
    template = (artifact_dir / "chat_template.jinja").read_text()
    (into / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return into


def tiny_artifact(artifact_dir: Path, root: Path, seed: int, name: str = "tiny") -> Path:
    """A tiny model built into the platform's artifact with `llmctl build` (a version of `name`)."""
    hf = tiny_hf_folder(artifact_dir, root / f"hf-{seed}", seed=seed)
    assert llmctl(["build", str(hf), str(root / f"art-{seed}"), "--name", name]) == 0
    return root / f"art-{seed}"
