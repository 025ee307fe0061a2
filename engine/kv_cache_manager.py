"""Per-sequence block tables over the block pool, prefix-cache matching, and reservations.

The scheduler's boundary with memory: `allocate_slots()` either makes room for a sequence's next
tokens or returns False having allocated nothing. A reservation (guaranteed_no_evict) promises a
sequence its worst-case block count at admission; every block it later takes out of the free queue
is drawn from that promise, and `num_free_blocks >= outstanding reservations` always holds, so a
reserved sequence never fails to allocate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from contracts.block_hash import BlockKey, chained_blocks
from contracts.capacity import blocks_for
from engine.block_pool import BlockPool


class KVCacheManager:
    def __init__(self, pool: BlockPool, block_size: int, compatibility_key: str) -> None:
        self.pool = pool
        self.block_size = block_size
        self.compatibility_key = compatibility_key
        self._tables: dict[str, list[int]] = {}
        self._keys: dict[str, list[BlockKey]] = {}  # keys of the sequence's full, registered blocks
        self._reserved: dict[str, int] = {}  # blocks promised but not yet taken
        self._outstanding = 0  # sum of _reserved

    # --- reservations -------------------------------------------------------------------------

    @property
    def num_unreserved_blocks(self) -> int:
        """Blocks in the free queue not promised to any sequence."""
        return self.pool.num_free - self._outstanding

    def try_reserve(self, seq_id: str, num_blocks: int) -> bool:
        """Promises `num_blocks` to a sequence, atomically: all or nothing."""
        if num_blocks > self.num_unreserved_blocks:
            return False
        self._reserved[seq_id] = self._reserved.get(seq_id, 0) + num_blocks
        self._outstanding += num_blocks
        return True

    def _draw(self, seq_id: str, n: int) -> None:
        take = min(n, self._reserved.get(seq_id, 0))
        if take:
            self._reserved[seq_id] -= take
            self._outstanding -= take

    # --- block tables -------------------------------------------------------------------------

    def block_table(self, seq_id: str) -> list[int]:
        return self._tables.get(seq_id, [])

    def _cached_prefix(self, token_ids: Sequence[int], salt: str) -> Iterator[tuple[int, BlockKey]]:
        """(block, key) of each cached full block of the prefix, in order, while they hit.

        The block holding the last token is never yielded, so at least one token is computed (its
        logits start generation) and no shared block is ever written.
        """
        prefix = token_ids[: len(token_ids) - 1]
        for chunk, key in chained_blocks(prefix, self.block_size, self.compatibility_key, salt):
            block = self.pool.lookup(key, chunk)
            if block is None:
                return
            yield block, key

    def peek_prefix(self, token_ids: Sequence[int], salt: str) -> int:
        """Tokens a match would cover now, taking no reference."""
        return sum(self.block_size for _ in self._cached_prefix(token_ids, salt))

    def match_prefix(self, seq_id: str, token_ids: Sequence[int], salt: str) -> int:
        """Shares the longest cached run of full prefix blocks; returns the tokens it covers."""
        assert seq_id not in self._tables, "prefix matching happens once, before any allocation"
        table: list[int] = []
        keys: list[BlockKey] = []
        for block, key in self._cached_prefix(token_ids, salt):
            if self.pool.ref_count(block) == 0:
                if not self._can_take(seq_id, 1):
                    break
                self._draw(seq_id, 1)
            self.pool.share(block)
            table.append(block)
            keys.append(key)
        self._tables[seq_id] = table
        self._keys[seq_id] = keys
        return len(table) * self.block_size

    def _can_take(self, seq_id: str, n: int) -> bool:
        return n <= self.num_unreserved_blocks + self._reserved.get(seq_id, 0)

    def allocate_slots(self, seq_id: str, num_tokens: int) -> bool:
        """Grows the sequence's table to hold `num_tokens` tokens; False (nothing done) if it can't."""
        table = self._tables.setdefault(seq_id, [])
        self._keys.setdefault(seq_id, [])
        need = blocks_for(num_tokens, self.block_size) - len(table)
        if need <= 0:
            return True
        if not self._can_take(seq_id, need):
            return False
        self._draw(seq_id, need)
        table.extend(self.pool.allocate(need))
        return True

    def cache_full_blocks(self, seq_id: str, token_ids: Sequence[int], num_computed: int, salt: str) -> None:
        """Registers every block that is now full of computed tokens under its prefix key."""
        table, keys = self._tables[seq_id], self._keys[seq_id]
        bs = self.block_size
        new = token_ids[len(keys) * bs : min(num_computed // bs, len(table)) * bs]
        parent = keys[-1] if keys else None
        for chunk, key in chained_blocks(new, bs, self.compatibility_key, salt, parent):
            self.pool.set_key(table[len(keys)], key, chunk)
            keys.append(key)

    def trim(self, seq_id: str, num_tokens: int) -> None:
        """Frees the sequence's blocks past the first `num_tokens` tokens (slots of draft tokens
        verification rejected: engine/speculative/speculation.py), tail first; a reserved sequence gets them
        back into its reservation, so its promise is whole again."""
        table = self._tables.get(seq_id, [])
        keep = blocks_for(num_tokens, self.block_size)
        if len(table) <= keep:
            return
        extra = table[keep:]
        del table[keep:]
        del self._keys[seq_id][keep:]  # (only full computed blocks have keys: none of these)
        self.pool.release(reversed(extra))
        if seq_id in self._reserved:
            self._reserved[seq_id] += len(extra)
            self._outstanding += len(extra)

    def release_blocks(self, seq_id: str) -> None:
        """Returns the sequence's blocks (tail first), keeping its reservation."""
        table = self._tables.pop(seq_id, [])
        self._keys.pop(seq_id, None)
        self.pool.release(reversed(table))

    def free(self, seq_id: str) -> None:
        """Releases the sequence's blocks and whatever reservation it still holds."""
        self.release_blocks(seq_id)
        self._outstanding -= self._reserved.pop(seq_id, 0)

    def check(self) -> None:
        self.pool.check()
        if self._outstanding != sum(self._reserved.values()) or self._outstanding > self.pool.num_free:
            raise AssertionError("reservations exceed the free blocks")
        for table in self._tables.values():
            if any(self.pool.ref_count(b) <= 0 for b in table) or len(set(table)) != len(table):
                raise AssertionError("a block table holds an unreferenced or repeated block")
