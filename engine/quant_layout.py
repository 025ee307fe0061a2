"""The weight-only quantization schemes and what a quantized artifact's config.json records about
them, torch-free: prebuild/ picks artifacts and engine/weights.py refuses stale ones by it without
importing engine/quant.py (which quantizes to it).

    config.json "quantization": {"scheme": "int8" | "int4", "group_size": 32, "lm_head": ..., ...}

Both schemes keep a scale and a minimum per group of GROUP input channels (engine/quant.py draws
the storage). An artifact whose record lacks one of `LAYOUTS[scheme]`'s values was written by an
older scheme of that name: int8 artifacts written before int8 took groups (one symmetric scale per
output channel) record no group_size. Their tensors are not what this code reads, so they are
rebuilt, never loaded.
"""

from __future__ import annotations

from typing import Any

SCHEMES = ("none", "int8", "int4")
GROUP = 32  # input channels per group (the GGUF Q4_1 block, so its grid is kept)
# scheme -> the config.json "quantization" values that the current code writes and reads
LAYOUTS: dict[str, dict[str, Any]] = {"int8": {"group_size": GROUP}, "int4": {"group_size": GROUP}}


def is_current(record: dict[str, Any] | None, scheme: str) -> bool:
    """Whether config.json's "quantization" record (None: absent) describes `scheme` as this code
    writes it ("none": no record, or one whose scheme is "none")."""
    found = (record or {}).get("scheme", "none")
    if found != scheme:
        return False
    return all((record or {}).get(key) == value for key, value in LAYOUTS.get(scheme, {}).items())
