"""The scheduler without a model: chunking, ordering, fairness, reservations, preemption (its budget
from a measured step cost: test_scheduler_budget.py)."""

from __future__ import annotations

import pytest

from contracts.tier import Tier
from engine.prefill_order import SHORT_PROMPT_TOKENS
from engine.scheduler import MAX_UTILIZATION, CapacityError
from engine.sequence import FinishReason, SeqStatus
from tests.engine.helpers import make_scheduler, make_seq, plan, run_step


def test_long_prompt_is_prefilled_in_budgeted_chunks_while_others_decode() -> None:
    sched = make_scheduler(max_num_batched_tokens=16)
    a = make_seq("a", 5, max_out=10)
    sched.add(a)
    assert plan(run_step(sched)) == [("a", 0, 5, True)]
    b = make_seq("b", 40)
    sched.add(b)
    # the budget is prompt tokens: a's decode comes on top of b's 16
    assert plan(run_step(sched)) == [("a", 5, 1, True), ("b", 0, 16, False)]
    assert plan(run_step(sched)) == [("a", 6, 1, True), ("b", 16, 16, False)]
    assert plan(run_step(sched)) == [("a", 7, 1, True), ("b", 32, 8, True)]
    assert plan(run_step(sched)) == [("a", 8, 1, True), ("b", 40, 1, True)]


def test_sequence_cap_and_token_budget() -> None:
    sched = make_scheduler(max_num_seqs=2, max_num_batched_tokens=100)
    for i in range(3):
        sched.add(make_seq(f"s{i}", 8))
    assert [c.seq.id for c in run_step(sched).chunks] == ["s0", "s1"]
    assert len(sched.waiting) == 1


def test_interactive_tier_is_admitted_before_batch() -> None:
    sched = make_scheduler(max_num_batched_tokens=8)
    sched.add(make_seq("batch", 8, tier=Tier.BATCH))
    sched.add(make_seq("inter", 8, tier=Tier.INTERACTIVE))
    assert plan(sched.schedule())[0][0] == "inter"


def test_weighted_fair_share_across_salts() -> None:
    """Tenant A's burst of long prompts does not monopolise prefill: B's prompts interleave."""
    sched = make_scheduler(num_blocks=512, max_num_seqs=16, max_num_batched_tokens=32)
    for i in range(4):
        sched.add(make_seq(f"a{i}", 32, max_out=1, salt="A"))
    for i in range(2):
        sched.add(make_seq(f"b{i}", 32, max_out=1, salt="B"))
    first = [run_step(sched).chunks[-1].seq.id for _ in range(4)]
    assert first == ["a0", "b0", "a1", "b1"]


def test_weights_skew_the_share() -> None:
    sched = make_scheduler(num_blocks=512, max_num_seqs=16, max_num_batched_tokens=16)
    for i in range(4):
        sched.add(make_seq(f"a{i}", 16, max_out=1, salt="A", weight=4.0))
        sched.add(make_seq(f"b{i}", 16, max_out=1, salt="B", weight=1.0))
    order = [run_step(sched).chunks[-1].seq.id for _ in range(6)]
    # finish tags, served/weight once the prompt is charged: A's 4, 8, 12, 16, B's 16, 32; ties
    # go to the earlier arrival
    assert order == ["a0", "a1", "a2", "b0", "a3", "b1"]


def test_whole_prompts_take_turns_across_salts_not_their_chunks() -> None:
    """Two salts' prompts longer than a step: each is prefilled to its end before the other salt's
    next one starts (its first token comes as soon as it can), and the salts still alternate."""
    sched = make_scheduler(num_blocks=512, max_num_seqs=16, max_num_batched_tokens=16)
    for i in range(2):
        sched.add(make_seq(f"a{i}", 32, max_out=1, salt="A"))
        sched.add(make_seq(f"b{i}", 32, max_out=1, salt="B"))
    order = [run_step(sched).chunks[-1].seq.id for _ in range(8)]
    assert order == ["a0", "a0", "b0", "b0", "a1", "a1", "b1", "b1"]


def test_guaranteed_no_evict_reserves_at_admission_and_refuses_at_once() -> None:
    sched = make_scheduler(num_blocks=10, block_size=4)
    sched.add(make_seq("a", 12, max_out=12))  # 6 blocks reserved
    free_before = sched.kv.pool.num_free
    with pytest.raises(CapacityError):
        sched.add(make_seq("b", 12, max_out=8))  # needs 5, only 4 unreserved
    assert sched.kv.pool.num_free == free_before and sched.kv.num_unreserved_blocks == 4
    assert [s.id for s in sched.waiting] == ["a"]
    sched.add(make_seq("c", 8, max_out=8))  # exactly 4
    with pytest.raises(CapacityError, match="the pool has 10"):
        sched.add(make_seq("d", 40, max_out=8))


def test_max_utilization_preempts_lowest_priority_most_recent() -> None:
    sched = make_scheduler(num_blocks=6, block_size=4, max_num_batched_tokens=64, policy=MAX_UTILIZATION)
    old, new = make_seq("old", 8, max_out=16), make_seq("new", 8, max_out=16)
    sched.add(old)
    sched.add(new)
    run_step(sched)  # both prefilled: 4 blocks used
    steps = [run_step(sched) for _ in range(5)]
    preempted = [p for s in steps for p in s.preempted]
    assert preempted and preempted[0] == "new"
    assert new.status is SeqStatus.WAITING and new.num_computed_tokens == 0
    assert new.finish_tag is None  # its prompt starts over: its place is taken again at its first chunk
    assert old.status is SeqStatus.RUNNING and old.finish_tag is not None
    assert sched.num_preemptions >= 1
    sched.kv.check()


def test_finished_and_aborted_sequences_free_their_blocks() -> None:
    sched = make_scheduler(num_blocks=16, block_size=4)
    a, b = make_seq("a", 6, max_out=2), make_seq("b", 6, max_out=50)
    sched.add(a)
    sched.add(b)
    run_step(sched)
    run_step(sched)
    assert a.finish_reason is FinishReason.LENGTH
    sched.abort(b)
    assert b.finish_reason is FinishReason.ABORTED
    assert sched.kv.pool.num_used == 0 and sched.kv.num_unreserved_blocks == 16
    assert not sched.has_unfinished()


def test_stop_token_finishes() -> None:
    sched = make_scheduler()
    seq = make_seq("a", 4, max_out=10)
    object.__setattr__(seq.request, "stop_token_ids", frozenset({7}))
    sched.add(seq)
    run_step(sched, token=7)
    assert seq.finish_reason is FinishReason.STOP_TOKEN and seq.num_output_tokens == 1


def test_a_running_long_prefill_yields_the_budget_to_another_salts_short_prompt() -> None:
    """B's short prompt, arriving while A's long prompt is part-way through prefill, is prefilled
    in the very next step (not after A's whole prompt)."""
    sched = make_scheduler(num_blocks=512, max_num_batched_tokens=16)
    sched.add(make_seq("a", 200, max_out=1, salt="A"))
    assert plan(run_step(sched)) == [("a", 0, 16, False)]
    assert plan(run_step(sched)) == [("a", 16, 16, False)]
    sched.add(make_seq("b", 10, max_out=4, salt="B"))
    # B joins at the start of A's chunk in service (32 - 16): B's prompt goes next
    assert plan(run_step(sched)) == [("b", 0, 10, True), ("a", 32, 6, False)]
    assert plan(run_step(sched)) == [("b", 10, 1, True), ("a", 38, 16, False)]


LONG = SHORT_PROMPT_TOKENS + 1  # a document: not short


def test_a_short_prompt_goes_first_even_when_its_own_salt_is_ahead_in_service() -> None:
    """A's document is prefilling, B's waits; A has the more service when A's short prompt
    arrives. It is prefilled whole in the next step, and A's document keeps the rest of it: its
    place was fixed at its first chunk, so the service A's short prompt takes does not put it
    behind B's."""
    sched = make_scheduler(num_blocks=512, max_num_batched_tokens=16)
    sched.add(make_seq("docA", LONG, max_out=1, salt="A"))
    assert plan(run_step(sched)) == [("docA", 0, 16, False)]
    sched.add(make_seq("docB", LONG, max_out=1, salt="B"))  # B joins at 0: tags 513 and 513
    assert plan(run_step(sched)) == [("docA", 16, 16, False)]  # ties: the shorter rest first
    assert plan(run_step(sched)) == [("docA", 32, 16, False)]  # A: 48 served, B: 0
    sched.add(make_seq("shortA", 10, max_out=2, salt="A"))
    assert plan(run_step(sched)) == [("shortA", 0, 10, True), ("docA", 48, 6, False)]
    assert plan(run_step(sched)) == [("shortA", 10, 1, True), ("docA", 54, 16, False)]
    assert sched.fair.served("A") == 80 and sched.fair.served("B") == 0


def test_one_short_prompt_a_step_goes_first_the_others_in_fair_order() -> None:
    """A's stream of short prompts takes the first place of each step, not the whole budget: once
    A is ahead in service, B's document keeps the rest of every step."""
    sched = make_scheduler(num_blocks=512, max_num_batched_tokens=16)
    sched.add(make_seq("early", 510, max_out=1, salt="A"))  # short: at most SHORT_PROMPT_TOKENS
    while sched.has_unfinished():
        run_step(sched)
    sched.add(make_seq("docB", LONG, max_out=1, salt="B"))  # nobody backlogged: B joins at 0
    assert plan(run_step(sched)) == [("docB", 0, 16, False)]  # its tag: 0 + 513
    for i in range(3):
        sched.add(make_seq(f"a{i}", 6, max_out=1, salt="A"))  # tags from 510 + 6 on
    for i in range(3):
        assert plan(run_step(sched)) == [(f"a{i}", 0, 6, True), ("docB", 16 + 10 * i, 10, False)]


def test_a_short_batch_prompt_does_not_go_before_an_interactive_long_one() -> None:
    sched = make_scheduler(num_blocks=512, max_num_batched_tokens=16)
    sched.add(make_seq("doc", LONG, max_out=1, salt="A"))
    sched.add(make_seq("short", 6, max_out=1, salt="B", tier=Tier.BATCH))
    assert plan(run_step(sched)) == [("doc", 0, 16, False)]


def test_first_come_first_served_when_fair_share_is_off() -> None:
    sched = make_scheduler(num_blocks=512, max_num_batched_tokens=16, fair_share=False)
    sched.add(make_seq("a", 64, max_out=1, salt="A"))
    run_step(sched)
    sched.add(make_seq("b", 10, max_out=4, salt="B"))
    firsts = [plan(run_step(sched))[0][0] for _ in range(3)]
    assert firsts == ["a", "a", "a"]
    assert plan(run_step(sched)) == [("b", 0, 10, True)]  # a finished with its one token


def test_a_salt_returning_from_idle_joins_at_the_virtual_time() -> None:
    """No credit for idle time: C, served little long ago, does not starve A when it returns."""
    sched = make_scheduler(num_blocks=512, max_num_batched_tokens=16)
    sched.add(make_seq("c0", 16, max_out=1, salt="C"))
    run_step(sched)
    run_step(sched)  # c0 done; C has 16 tokens of service
    sched.add(make_seq("a", 160, max_out=1, salt="A"))
    for _ in range(5):
        run_step(sched)  # A: 80 tokens of service, still backlogged
    sched.add(make_seq("c1", 100, max_out=1, salt="C"))
    order = [plan(run_step(sched))[0][0] for _ in range(6)]
    # C joins at the start of A's chunk in service (64), not at its old 16: c1's finish tag is
    # 164, after a's 160, so a goes on to its end first (from 16, c1's 116 would have gone first)
    assert order == ["a", "a", "a", "a", "a", "c1"]


def test_every_running_sequence_decodes_whatever_the_prompt_budget() -> None:
    """Decodes are not drawn from the prefill budget: a budget smaller than the batch no longer
    leaves sequences without their next token for a step."""
    sched = make_scheduler(num_blocks=512, max_num_seqs=8, max_num_batched_tokens=16)
    for i in range(4):
        sched.add(make_seq(f"s{i}", 4, max_out=8))
    assert plan(run_step(sched)) == [(f"s{i}", 0, 4, True) for i in range(4)]
    sched.add(make_seq("late", 40, max_out=2))
    assert plan(run_step(sched)) == [(f"s{i}", 4, 1, True) for i in range(4)] + [("late", 0, 16, False)]
