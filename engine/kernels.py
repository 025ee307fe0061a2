"""The engine's CPU kernels (engine/csrc/, built by prebuild/kernels.py) as `torch.ops.llm.*`.

`load(path)` registers the library once per process; `loaded()` says whether it is. The model and
the quantized layers pick their code path when they are built (engine/weights.py `load_model`): with
the kernels, decode steps run fused norms, rotary with the KV write, paged decode attention and
integer-dot quantized matmuls; without them, the same model runs on eager PyTorch alone.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import torch

_lock = threading.Lock()
_loaded: Path | None = None


def load(path: Path) -> str:
    """Registers the library at `path` (again: nothing) and returns the code path it was built
    with ("avx512-vnni", "avx2" or "scalar"; "+amx" when int4 steps of many rows run on AMX tiles,
    "+bf16" when they run on AVX-512 BF16 dot products). ValueError when another library is
    already loaded.

    `LLM_KERNELS_AMX_MIN_ROWS`, `LLM_KERNELS_BF16_MIN_ROWS` and `LLM_KERNELS_FMA_MIN_ROWS`
    (environment) set the rows from which int4 matmuls take the AMX path (engine/csrc/amx.h), the
    AVX-512 BF16 one (engine/csrc/bf16dot.h) or the AVX2 FMA one (engine/csrc/fma.h); a huge value
    turns it off. `LLM_KERNELS_AMX_ATTENTION=0` keeps a bf16 cache's attention scores off AMX tiles
    (engine/csrc/attention_amx.h). For side-by-side measurements."""
    global _loaded
    with _lock:
        if _loaded is None:
            torch.ops.load_library(str(path))  # type: ignore[no-untyped-call]
            _loaded = path
            for name, setter in (
                ("LLM_KERNELS_AMX_MIN_ROWS", torch.ops.llm.set_amx_min_rows),
                ("LLM_KERNELS_BF16_MIN_ROWS", torch.ops.llm.set_bf16dot_min_rows),
                ("LLM_KERNELS_FMA_MIN_ROWS", torch.ops.llm.set_fma_min_rows),
            ):
                rows = os.environ.get(name)
                if rows:
                    setter(int(rows))
            if os.environ.get("LLM_KERNELS_AMX_ATTENTION") == "0":
                torch.ops.llm.set_amx_attention(False)
        elif _loaded != path:
            raise ValueError(f"kernels already loaded from {_loaded}, not {path}")
    return isa()


def loaded() -> bool:
    return _loaded is not None


def set_threads(threads: int) -> None:
    """Threads of the kernels' own work-claiming pool (engine/csrc/pool.h), the caller included;
    torch's intra-op threads are separate."""
    torch.ops.llm.set_num_threads(max(1, threads))


def threads() -> int:
    return int(torch.ops.llm.get_num_threads()) if _loaded is not None else 0


def int8_activations() -> bool:
    """The int4 layer's int8-activation path (engine/csrc/i8dot.h) is built: AVX-512 VNNI."""
    return isa().startswith("avx512-vnni")


def isa() -> str:
    return str(torch.ops.llm.isa()) if _loaded is not None else "none"
