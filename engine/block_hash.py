"""Prefix-cache keys: a chained, collision-resistant hash over full blocks of token ids.

    key(block i) = blake2b(key(block i-1) | compatibility key | cache salt | token ids of block i)

The compatibility key pins the model version's weights/tokenizer and the KV dtype; the salt is
server-controlled (the tenant or trust group), so two tenants never share a key for equal tokens.
A hit is still confirmed by comparing token ids (engine/block_pool.py).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

BlockKey = bytes  # 32-byte digest


def block_key(
    parent: BlockKey | None, token_ids: Sequence[int], compatibility_key: str, salt: str
) -> BlockKey:
    h = hashlib.blake2b(digest_size=32)
    h.update(parent if parent is not None else b"\x00" * 32)
    for part in (compatibility_key.encode(), salt.encode()):
        h.update(struct.pack("<I", len(part)))
        h.update(part)
    h.update(struct.pack(f"<{len(token_ids)}i", *token_ids))
    return h.digest()


def prefix_block_keys(
    token_ids: Sequence[int], block_size: int, compatibility_key: str, salt: str
) -> list[BlockKey]:
    """Keys of every full block of `token_ids`, in order."""
    keys: list[BlockKey] = []
    parent: BlockKey | None = None
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = block_key(parent, token_ids[start : start + block_size], compatibility_key, salt)
        keys.append(parent)
    return keys
