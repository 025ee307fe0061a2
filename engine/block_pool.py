"""The physical KV blocks: reference counts, an O(1) LRU free queue, and the key -> block map.

A block is in exactly one of three states:
    used    ref_count > 0                     (in some sequence's block table)
    cached  ref_count == 0, holds a key       (reusable on a prefix hit, evictable)
    free    ref_count == 0, no key
Cached and free blocks both sit in the free queue, least recently released first; taking a block
from the queue evicts its key. So used + cached + free == num_blocks at all times.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from contracts.block_hash import BlockKey


@dataclass(slots=True)
class _Block:
    ref_count: int = 0
    key: BlockKey | None = None
    token_ids: tuple[int, ...] = ()  # the tokens a cached block holds, to confirm a hit


class BlockPool:
    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError("a block pool needs at least one block")
        self.num_blocks = num_blocks
        self._blocks = [_Block() for _ in range(num_blocks)]
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self._by_key: dict[BlockKey, int] = {}

    # --- counts -----------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """Blocks that can be handed out now (free + cached)."""
        return len(self._free)

    @property
    def num_cached(self) -> int:
        return sum(1 for i in self._free if self._blocks[i].key is not None)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def ref_count(self, block: int) -> int:
        return self._blocks[block].ref_count

    # --- allocation -------------------------------------------------------------------------

    def allocate(self, n: int) -> list[int]:
        """Takes n blocks from the LRU end of the free queue (evicting their keys)."""
        if n > len(self._free):
            raise ValueError(f"asked for {n} blocks, {len(self._free)} free")
        out = []
        for _ in range(n):
            block_id, _ = self._free.popitem(last=False)
            block = self._blocks[block_id]
            if block.key is not None:
                del self._by_key[block.key]
                block.key, block.token_ids = None, ()
            block.ref_count = 1
            out.append(block_id)
        return out

    def lookup(self, key: BlockKey, token_ids: Sequence[int]) -> int | None:
        """The cached block holding exactly these tokens under this key, or None."""
        block_id = self._by_key.get(key)
        if block_id is None or self._blocks[block_id].token_ids != tuple(token_ids):
            return None
        return block_id

    def share(self, block_id: int) -> None:
        """Adds a reference to a cached or used block (a prefix hit)."""
        block = self._blocks[block_id]
        if block.ref_count == 0:
            del self._free[block_id]
        block.ref_count += 1

    def release(self, blocks: Iterable[int]) -> None:
        """Drops one reference from each block; unreferenced ones join the free queue's MRU end.

        Pass a sequence's table tail-first, so its last blocks are evicted before its prefix.
        """
        for block_id in blocks:
            block = self._blocks[block_id]
            if block.ref_count <= 0:
                raise AssertionError(f"double free of block {block_id}")
            block.ref_count -= 1
            if block.ref_count == 0:
                self._free[block_id] = None

    def set_key(self, block_id: int, key: BlockKey, token_ids: Sequence[int]) -> None:
        """Registers a full, immutable, used block under its prefix key (first writer wins)."""
        block = self._blocks[block_id]
        if block.ref_count <= 0 or block.key is not None or key in self._by_key:
            return
        block.key, block.token_ids = key, tuple(token_ids)
        self._by_key[key] = block_id

    def recent_keys(self, limit: int) -> list[BlockKey]:
        """Up to `limit` keys of the blocks a prefix hit could use now, most useful first: blocks in
        use, then cached ones from the most recently released (the last to be evicted)."""
        used = [b.key for b in self._blocks if b.ref_count > 0 and b.key is not None]
        cached = (self._blocks[i].key for i in reversed(self._free))
        keys = used + [k for k in itertools.islice((k for k in cached if k is not None), limit)]
        return keys[:limit]

    def check(self) -> None:
        """Internal invariants (tests call this after every operation)."""
        refs_ok = all(b.ref_count >= 0 for b in self._blocks)
        free_ok = all((self._blocks[i].ref_count == 0) == (i in self._free) for i in range(self.num_blocks))
        keys_ok = all(self._blocks[i].key == k for k, i in self._by_key.items())
        if not (refs_ok and free_ok and keys_ok):
            raise AssertionError("block pool invariants violated")
