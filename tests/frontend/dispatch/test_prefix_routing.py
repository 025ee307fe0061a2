"""Routing by cached prefix: the expected hit counts a prompt's leading blocks a worker holds under
the request's own salt; the warm worker wins until it runs more than the spill margin beyond the
least loaded; least-loaded routing ignores the cache; another tenant's blocks never count."""

from __future__ import annotations

from contracts.block_hash import prefix_block_keys
from contracts.prefix_summary import CacheSummary, fingerprint
from frontend.dispatch.prefix_routing import (
    LEAST_LOADED,
    PromptPrefix,
    RecentPrefixes,
    choose,
    expected_hit,
    remember,
)
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool

V = "m@1"
KEY = "compat:float32"
BS = 4
PROMPT = tuple(range(1, 18))  # 17 tokens: 4 full blocks before the last token


def summary_of(tokens: tuple[int, ...], salt: str, blocks: int | None = None) -> CacheSummary:
    keys = prefix_block_keys(tokens, BS, KEY, salt)[:blocks]
    return CacheSummary(KEY, BS, frozenset(fingerprint(k) for k in keys))


def worker(wid: str, active: int = 0, cache: CacheSummary | None = None, free: int = 100) -> WorkerHandle:
    handle = WorkerHandle(wid, wid, None, capacity={V: free}, active=active)  # type: ignore[arg-type]
    if cache is not None:
        handle.caches[V] = cache
    return handle


def test_the_hit_counts_leading_blocks_and_stops_at_the_first_missing_one() -> None:
    prefix = PromptPrefix(PROMPT, "salt-a")
    assert expected_hit(prefix, summary_of(PROMPT, "salt-a"), None) == 16  # never the last token's block
    assert expected_hit(prefix, summary_of(PROMPT, "salt-a", blocks=2), None) == 8
    later_only = summary_of(PROMPT, "salt-a")
    first = fingerprint(prefix_block_keys(PROMPT, BS, KEY, "salt-a")[0])
    holes = CacheSummary(KEY, BS, later_only.fingerprints - {first})
    assert expected_hit(prefix, holes, None) == 0  # chained: nothing after a miss is usable
    assert expected_hit(prefix, None, None) == 0


def test_another_tenants_cached_blocks_never_count() -> None:
    other = summary_of(PROMPT, "salt-b")  # the very same tokens, cached for another tenant
    assert expected_hit(PromptPrefix(PROMPT, "salt-a"), other, None) == 0
    warm_for_b, cold = worker("w1", cache=other), worker("w2", cache=CacheSummary(KEY, BS), free=101)
    assert choose([warm_for_b, cold], V, PromptPrefix(PROMPT, "salt-a")) is cold  # most free blocks


def test_the_warm_worker_wins_within_the_spill_margin_then_traffic_spills() -> None:
    prefix = PromptPrefix(PROMPT, "salt-a")
    warm = worker("w1", active=3, cache=summary_of(PROMPT, "salt-a"))
    cold = worker("w2", active=0, cache=CacheSummary(KEY, BS), free=200)
    assert choose([warm, cold], V, prefix, spill_margin=3) is warm  # 3 busier: stick
    warm.active = 4
    assert choose([warm, cold], V, prefix, spill_margin=3) is cold  # 4 busier: spill
    assert choose([warm, cold], V, prefix, spill_margin=3, policy=LEAST_LOADED) is cold
    warm.active = 0
    assert choose([warm, cold], V, prefix, policy=LEAST_LOADED) is cold  # ignores the cache
    assert choose([warm, cold], V, None) is cold  # no prompt to route by: most free blocks
    assert choose([], V, prefix) is None


def test_what_this_frontend_sent_counts_before_the_next_summary() -> None:
    prefix = PromptPrefix(PROMPT, "salt-a")
    first, second = worker("w1", cache=CacheSummary(KEY, BS)), worker("w2", cache=CacheSummary(KEY, BS))
    picked = choose([first, second], V, prefix)
    assert picked is second  # a tie on everything: the larger id
    remember(picked, V, prefix)
    picked.active += 1
    assert expected_hit(prefix, second.caches[V], second.recent[V]) == 16
    assert choose([first, second], V, PromptPrefix((*PROMPT, 99), "salt-a")) is second  # follows it


def test_recent_prefixes_forget_the_oldest_past_their_limit() -> None:
    recent = RecentPrefixes(limit=2)
    recent.add([b"a", b"b"])
    recent.add([b"a"])  # refreshed: now the most recent
    recent.add([b"c"])
    assert (b"a" in recent, b"b" in recent, b"c" in recent) == (True, False, True)


def test_the_pool_routes_by_prefix_among_workers_with_room_only() -> None:
    pool = WorkerPool()
    warm = worker("w1", cache=summary_of(PROMPT, "salt-a"), free=10)
    cold = worker("w2", cache=CacheSummary(KEY, BS), free=100)
    pool.add(warm)
    pool.add(cold)
    prefix = PromptPrefix(PROMPT, "salt-a")
    assert pool.with_room(V, 5, prefix=prefix) is warm
    assert pool.with_room(V, 11, prefix=prefix) is cold  # the warm one has no room for it
    pool.policy = LEAST_LOADED
    assert pool.with_room(V, 5, prefix=prefix) is cold
