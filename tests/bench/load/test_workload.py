"""The serving workload: seeded request mixes with exact shares, and their arrival schedules."""

from __future__ import annotations

import pytest

from bench.load.workload import (
    MIXES,
    PREFIX_TOKENS,
    Load,
    RequestSpec,
    build_requests,
    loads,
    poisson_offsets,
)


def test_the_same_seed_builds_the_same_requests_and_another_seed_others() -> None:
    mixed = MIXES["mixed"]
    assert build_requests(mixed, 10, seed=0) == build_requests(mixed, 10, seed=0)
    assert build_requests(mixed, 10, seed=0) != build_requests(mixed, 10, seed=1)


def test_mixed_requests_for_seed_0() -> None:
    assert build_requests(MIXES["mixed"], 10, seed=0)[:3] == [
        RequestSpec(0, "interactive", tenant=1, prefix=1, body_tokens=112, output_tokens=67),
        RequestSpec(1, "interactive", tenant=1, prefix=None, body_tokens=218, output_tokens=38),
        RequestSpec(2, "document", tenant=0, prefix=None, body_tokens=1778, output_tokens=64),
    ]


def test_mixed_shares_are_exact_and_lengths_inside_their_ranges() -> None:
    reqs = build_requests(MIXES["mixed"], 1000, seed=0)
    docs = [r for r in reqs if r.kind == "document"]
    short = [r for r in reqs if r.kind == "interactive"]
    assert (len(docs), sum(r.prefix is not None for r in reqs)) == (200, 500)
    assert {r.prefix for r in reqs} == {None, 0, 1, 2, 3} and {r.tenant for r in reqs} == {0, 1}
    assert all(1200 <= r.body_tokens <= 1800 and r.output_tokens == 64 for r in docs)
    assert all(64 <= r.body_tokens <= 256 and 32 <= r.output_tokens <= 96 for r in short)
    assert [r.index for r in reqs] == list(range(1000))


def test_a_prefixed_request_counts_its_prefix_in_its_prompt() -> None:
    assert RequestSpec(0, "interactive", 0, 2, 100, 32).prompt_tokens == PREFIX_TOKENS + 100
    assert RequestSpec(0, "interactive", 0, None, 100, 32).prompt_tokens == 100


def test_offline_is_64_identical_shapes_sent_at_once() -> None:
    offline = MIXES["offline"]
    reqs = build_requests(offline, offline.requests, seed=0)
    assert len(reqs) == 64
    assert {(r.kind, r.tenant, r.prefix, r.prompt_tokens, r.output_tokens, r.batch_tier) for r in reqs} == {
        ("interactive", 0, None, 128, 128, True)  # throughput work: the platform's BATCH tier
    }
    assert loads(offline, 64, [], None) == [Load(concurrency=64)]
    others = [r for m in ("interactive", "mixed", "decode") for r in build_requests(MIXES[m], 50, seed=0)]
    assert not any(r.batch_tier for r in others)


def test_decode_is_one_request_at_a_time_of_128_in_and_256_out() -> None:
    decode = MIXES["decode"]
    reqs = build_requests(decode, decode.requests, seed=0)
    assert len(reqs) == 8
    assert {(r.prefix, r.prompt_tokens, r.output_tokens) for r in reqs} == {(None, 128, 256)}
    assert loads(decode, 8, [], None) == [Load(concurrency=1)]
    assert loads(decode, 8, [0.5], None) == [Load(rate=0.5)]


def test_poisson_offsets_are_seeded_increasing_and_scale_with_the_rate() -> None:
    at_1 = poisson_offsets(4, 1.0, seed=0)
    assert at_1 == pytest.approx(
        [1.8401147551972885, 2.7809600753531027, 4.125158000680068, 4.559226322265722]
    )
    assert poisson_offsets(4, 2.0, seed=0) == pytest.approx([t / 2 for t in at_1])
    assert poisson_offsets(4, 1.0, seed=1) != at_1
    with pytest.raises(ValueError, match="positive"):
        poisson_offsets(4, 0.0, seed=0)


def test_loads_are_the_rates_or_the_concurrency_or_the_mixs_default() -> None:
    mixed = MIXES["mixed"]
    assert loads(mixed, 32, [0.5, 1.0], None) == [Load(rate=0.5), Load(rate=1.0)]
    assert loads(mixed, 32, [], 8) == [Load(concurrency=8)]
    assert loads(mixed, 32, [], None) == [Load(rate=1.0)]
    assert [x.label for x in loads(mixed, 32, [0.5], None) + loads(mixed, 32, [], 8)] == [
        "rate 0.5/s",
        "concurrency 8",
    ]
    with pytest.raises(ValueError, match="not both"):
        loads(mixed, 32, [1.0], 8)
    with pytest.raises(ValueError, match="either"):
        Load()
    with pytest.raises(ValueError, match="positive"):
        Load(rate=0.0)
    with pytest.raises(ValueError, match="positive"):
        Load(concurrency=0)
