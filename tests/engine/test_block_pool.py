"""Block accounting under random operation sequences: no leak, no double free, refs never
negative, used + free + cached == total, every live block table valid."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.block_hash import prefix_block_keys
from contracts.capacity import blocks_for
from engine.block_pool import BlockPool
from engine.kv_cache_manager import KVCacheManager

BS = 4
NUM_BLOCKS = 24

ops = st.lists(
    st.tuples(
        st.sampled_from(["admit", "grow", "compute", "free"]),
        st.integers(0, 5),  # sequence slot
        st.integers(1, 30),  # size
        st.sampled_from(["A", "B"]),  # salt
        st.integers(0, 2),  # prompt family: equal families share prefixes
    ),
    max_size=60,
)


def check_totals(kv: KVCacheManager) -> None:
    kv.check()
    pool = kv.pool
    cached = pool.num_cached
    assert pool.num_used + (pool.num_free - cached) + cached == pool.num_blocks
    assert 0 <= kv.num_unreserved_blocks <= pool.num_free


@settings(max_examples=150, deadline=None)
@given(ops, st.booleans())
def test_random_operations_keep_the_books(operations, reserve: bool) -> None:
    kv = KVCacheManager(BlockPool(NUM_BLOCKS), BS, "compat")
    live: dict[str, tuple[list[int], int, str]] = {}  # id -> (tokens, computed, salt)
    reserved: dict[str, int] = {}  # id -> the tokens its reservation covers (reserve only)
    for op, slot, size, salt, family in operations:
        sid = f"s{slot}"
        if op == "admit" and sid not in live:
            tokens = [family * 1000 + i for i in range(size)]
            if reserve and not kv.try_reserve(sid, blocks_for(size + 4, BS)):
                continue
            computed = kv.match_prefix(sid, tokens, salt)
            assert computed % BS == 0 and computed < len(tokens)
            live[sid] = (tokens, computed, salt)
            reserved[sid] = size + 4
        elif op == "grow" and sid in live:
            tokens, computed, s = live[sid]
            # reserved: grows only within its reservation, however many grows it takes to get there
            target = min(len(tokens) + size, reserved[sid]) if reserve else len(tokens) + size
            before = list(kv.block_table(sid))
            if kv.allocate_slots(sid, target):
                assert len(kv.block_table(sid)) == max(len(before), blocks_for(target, BS))
                tokens.extend(7 for _ in range(target - len(tokens)))
            else:
                assert not reserve, "a reserved sequence never fails to allocate"
                assert kv.block_table(sid) == before
        elif op == "compute" and sid in live:
            tokens, _, s = live[sid]
            if kv.allocate_slots(sid, len(tokens)):
                kv.cache_full_blocks(sid, tokens, len(tokens), s)
                live[sid] = (tokens, len(tokens), s)
        elif op == "free" and sid in live:
            kv.free(sid)
            del live[sid]
        check_totals(kv)
    for sid in list(live):
        kv.free(sid)
    check_totals(kv)
    assert kv.pool.num_used == 0 and kv.num_unreserved_blocks == NUM_BLOCKS


def test_double_free_is_caught() -> None:
    pool = BlockPool(4)
    blocks = pool.allocate(2)
    pool.release(blocks)
    with pytest.raises(AssertionError, match="double free"):
        pool.release(blocks[:1])


def test_lru_eviction_order_and_prefix_hits() -> None:
    pool = BlockPool(4)
    kv = KVCacheManager(pool, BS, "compat")
    tokens = list(range(13))  # 3 full blocks + 1 token
    assert kv.allocate_slots("a", 13)
    kv.cache_full_blocks("a", tokens, 13, "A")
    table = kv.block_table("a")
    kv.free("a")  # released tail first: the prefix block is evicted last
    assert pool.num_cached == 3 and pool.num_used == 0
    # same tokens, same salt: the three full blocks are hit (the last prompt token is computed anew)
    assert kv.match_prefix("b", tokens, "A") == 12
    assert kv.block_table("b") == table[:3]
    # other salt: nothing
    assert kv.match_prefix("c", tokens, "B") == 0
    kv.free("b")
    kv.free("c")
    # allocation takes the least recently released blocks first: table[3] (never keyed), then the tail
    assert pool.allocate(2) == [table[3], table[2]]
    assert pool.num_cached == 2


def test_keys_chain_over_parents_and_salts() -> None:
    keys_a = prefix_block_keys(list(range(8)), BS, "compat", "A")
    keys_b = prefix_block_keys(list(range(8)), BS, "compat", "B")
    shifted = prefix_block_keys([99, 1, 2, 3, 4, 5, 6, 7], BS, "compat", "A")
    other_model = prefix_block_keys(list(range(8)), BS, "other", "A")
    assert len(keys_a) == 2 and len(set(keys_a + keys_b + other_model)) == 6
    assert shifted[1] != keys_a[1]  # same tokens in block 2, different parent


def test_hit_is_confirmed_by_tokens() -> None:
    pool = BlockPool(2)
    [block] = pool.allocate(1)
    key = prefix_block_keys([1, 2, 3, 4], BS, "c", "A")[0]
    pool.set_key(block, key, [1, 2, 3, 4])
    assert pool.lookup(key, [1, 2, 3, 4]) == block
    assert pool.lookup(key, [1, 2, 3, 5]) is None  # a colliding key with other tokens is not a hit


def test_recent_keys_are_used_blocks_first_then_cached_ones_last_evicted_first() -> None:
    pool = BlockPool(6)
    kv = KVCacheManager(pool, BS, "compat")
    tokens = list(range(13))
    keys = prefix_block_keys(tokens, BS, "compat", "A")
    assert kv.allocate_slots("a", 13)
    kv.cache_full_blocks("a", tokens, 13, "A")
    kv.free("a")  # released tail first: keys[0] is the most recently released
    assert pool.recent_keys(10) == [keys[0], keys[1], keys[2]]
    other = list(range(100, 105))
    assert kv.allocate_slots("b", 5)  # takes the two never-keyed blocks: nothing evicted
    kv.cache_full_blocks("b", other, 5, "B")
    [b_key] = prefix_block_keys(other, BS, "compat", "B")
    assert pool.recent_keys(10)[0] == b_key  # in use: first
    assert pool.recent_keys(2) == [b_key, keys[0]]
