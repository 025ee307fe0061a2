"""Prefix-cache keys: a chained, collision-resistant hash over full blocks of token ids (shared by
the engine, which keys its cache with them, and the frontend, which routes by them).

    key(block i) = blake2b(key(block i-1) | compatibility key | cache salt | token ids of block i)

The compatibility key pins the model version's weights/tokenizer and the KV dtype; the salt is
server-controlled (the tenant or trust group), so two tenants never share a key for equal tokens.
A hit is still confirmed by comparing token ids (engine/block_pool.py).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator, Sequence

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


def chained_blocks(
    token_ids: Sequence[int],
    block_size: int,
    compatibility_key: str,
    salt: str,
    parent: BlockKey | None = None,
) -> Iterator[tuple[Sequence[int], BlockKey]]:
    """(token ids, key) of each full block of `token_ids`, in order, lazily; `parent` is the key of
    the block just before token_ids[0] (None: they start the sequence)."""
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        block = token_ids[start : start + block_size]
        parent = block_key(parent, block, compatibility_key, salt)
        yield block, parent


def prefix_block_keys(
    token_ids: Sequence[int], block_size: int, compatibility_key: str, salt: str
) -> list[BlockKey]:
    """Keys of every full block of `token_ids`, in order."""
    return [key for _, key in chained_blocks(token_ids, block_size, compatibility_key, salt)]
