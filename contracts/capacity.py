"""An engine's capacity: the defaults of its KV pool and batch, and `blocks_for`, the one formula
behind the frontend's price of a request (admission, each worker's free blocks) and the engine's
reservation for it."""

from __future__ import annotations

DEFAULT_KV_CACHE_BLOCKS = 1024  # blocks in one engine's KV pool when a model sets none
DEFAULT_BLOCK_SIZE = 16  # tokens per KV block
DEFAULT_MAX_NUM_SEQS = 64  # sequences one engine runs at once


def blocks_for(num_tokens: int, block_size: int) -> int:
    """Blocks that hold `num_tokens` tokens; a request reserves blocks_for(prompt + max output)."""
    return -(-num_tokens // block_size)
