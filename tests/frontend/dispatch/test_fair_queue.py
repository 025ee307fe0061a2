"""Admission arithmetic: the predicted wait under fair sharing, the measured rate, fair order."""

from __future__ import annotations

import pytest

from contracts.capacity import blocks_for
from contracts.tier import BATCH, INTERACTIVE, Tier
from frontend.dispatch.fair_queue import FairQueue, Ticket, WaitPredictor


def ticket(gid: str, tenant: str, tokens: int, tier: Tier = INTERACTIVE, weight: float = 1.0) -> Ticket:
    return Ticket(gid, tenant, weight, tier, tokens, blocks_for(tokens + 16, 16))


def test_predicted_wait_counts_own_backlog_and_others_fair_share() -> None:
    p = WaitPredictor(prior_tokens_per_s=100.0)
    for i in range(6):
        p.add(ticket(f"a{i}", "A", 1700), now=0.0)
    # A's next document waits behind A's own 10,200 tokens
    assert p.predict_wait_s("A", 1.0, INTERACTIVE, 1700) == pytest.approx(102.0)
    # B's 100-token prompt waits only for A's fair share of its own cost
    assert p.predict_wait_s("B", 1.0, INTERACTIVE, 100) == pytest.approx(1.0)
    # a tenant of weight 2 is owed twice the share: A gets half as much ahead of it
    assert p.predict_wait_s("C", 2.0, INTERACTIVE, 100) == pytest.approx(0.5)


def test_batch_waits_for_all_interactive_work_and_interactive_ignores_batch() -> None:
    p = WaitPredictor(prior_tokens_per_s=100.0)
    p.add(ticket("i", "A", 300), now=0.0)
    p.add(ticket("b", "B", 5000, tier=BATCH), now=0.0)
    assert p.predict_wait_s("C", 1.0, INTERACTIVE, 50) == pytest.approx(0.5)
    assert p.predict_wait_s("C", 1.0, BATCH, 50) == pytest.approx(3.0 + 0.5)


def test_rate_is_measured_over_busy_time_and_blends_out_the_prior() -> None:
    p = WaitPredictor(prior_tokens_per_s=100.0, prior_weight_s=1.0, half_life_s=1e9)
    a, b = ticket("a", "A", 1000), ticket("b", "B", 1000)
    p.add(a, now=0.0)
    p.add(b, now=0.0)
    p.started(a, cached_tokens=0, now=1.0)
    p.started(b, cached_tokens=0, now=2.0)  # 2,000 tokens in 2 busy seconds
    assert p.tokens_per_s == pytest.approx((2000 + 100) / 3)
    p.add(ticket("c", "A", 10), now=100.0)  # idle time in between is not busy time
    p.started(ticket("c", "A", 10), cached_tokens=10, now=101.0)  # all cached: no prefill work
    assert p.tokens_per_s == pytest.approx((2000 + 100) / 4)
    assert p.backlog_tokens() == 0


def test_dropped_ticket_leaves_the_backlog() -> None:
    p = WaitPredictor()
    t = ticket("a", "A", 500)
    p.add(t, now=0.0)
    assert p.backlog_tokens(INTERACTIVE) == 500
    p.dropped(t, now=1.0)
    assert p.backlog_tokens() == 0


def test_fair_queue_interleaves_tenants_by_token_cost() -> None:
    q = FairQueue()
    for i in range(3):
        q.push(ticket(f"a{i}", "A", 100))
    q.push(ticket("b0", "B", 100))
    q.push(ticket("b1", "B", 100))
    assert [q.pop().generation_id for _ in range(5)] == ["a0", "b0", "a1", "b1", "a2"]


def test_fair_queue_puts_interactive_before_batch_and_honours_weights() -> None:
    q = FairQueue()
    q.push(ticket("batch", "A", 10, tier=BATCH))
    for i in range(4):
        q.push(ticket(f"h{i}", "H", 100, weight=2.0))
    q.push(ticket("l0", "L", 100))
    q.push(ticket("l1", "L", 100))
    order = [q.pop().generation_id for _ in range(7)]
    assert order == ["h0", "l0", "h1", "h2", "l1", "h3", "batch"]


def test_fair_queue_gives_an_idle_tenant_no_credit() -> None:
    q = FairQueue()
    q.push(ticket("c0", "C", 100))
    q.pop()
    for i in range(4):
        q.push(ticket(f"a{i}", "A", 100))
    for _ in range(3):
        q.pop()  # a0..a2: virtual time is a2's start tag, 200
    q.push(ticket("c1", "C", 100))  # starts at 200, not at C's old finish (100)
    q.push(ticket("c2", "C", 100))
    assert [q.pop().generation_id for _ in range(3)] == ["c1", "a3", "c2"]


def test_fair_queue_remove() -> None:
    q = FairQueue()
    a, b = ticket("a", "A", 10), ticket("b", "B", 10)
    q.push(a)
    q.push(b)
    q.remove(a)
    assert len(q) == 1 and q.head() is b


def test_fair_queue_place_is_where_a_push_would_go_and_changes_nothing() -> None:
    q = FairQueue()
    for i in range(3):
        q.push(ticket(f"a{i}", "A", 100))  # start tags 0, 100, 200
    b0 = ticket("b0", "B", 100)
    assert q.place(b0) == 2  # starts at 0 like a0, which arrived first
    assert q.place(ticket("a3", "A", 100)) == 4  # behind A's own backlog
    assert len(q) == 3
    q.push(b0)
    assert [t.generation_id for t in q.in_order()] == ["a0", "b0", "a1", "a2"]
