"""The scheduler's prefill budget from a measured step cost, without a model: sized by the decodes
beside it, charged for the context a chunk attends over, hurried for short interactive prompts and
grown as their deadlines near."""

from __future__ import annotations

import pytest

from contracts.tier import Tier
from engine.prefill_order import SHORT_PROMPT_TOKENS
from engine.scheduler_output import SchedulerOutput
from engine.sequence import FinishReason, Sequence
from tests.engine.helpers import make_scheduler, make_seq, plan, run_step


def test_a_measured_cost_sizes_each_steps_prefill_by_the_decodes_beside_it() -> None:
    from engine.step_budget import StepCost, prefill_budget

    cost = StepCost(fixed_s=0.010, per_decode_s=0.001, per_prefill_token_s=0.0002)
    idle = prefill_budget(cost, 0, interactive=False)  # nobody decoding: the idle step's budget
    beside_chat = prefill_budget(cost, 1, interactive=True)  # one interactive decode: the objective's
    assert beside_chat < idle

    def doc_chunk_after(first: Sequence | None) -> int:
        sched = make_scheduler(num_blocks=2048, max_num_batched_tokens=0, step_cost=cost)
        if first is not None:
            sched.add(first)
            run_step(sched)  # its prompt: it decodes from the next step on
        sched.add(make_seq("doc", 4000, max_out=1))
        steps = plan(run_step(sched))
        assert [s for s in steps if s[0] != "doc"] == ([] if first is None else [(first.id, 4, 1, True)])
        (doc,) = [n for rid, _, n, _ in steps if rid == "doc"]
        return doc

    assert doc_chunk_after(None) == idle
    assert doc_chunk_after(make_seq("chat", 4, max_out=8, salt="u")) == beside_chat
    bulk = make_seq("bulk", 4, max_out=8, salt="u", tier=Tier.BATCH)
    assert doc_chunk_after(bulk) == idle  # only a batch-tier decode: no inter-token objective to keep


def test_a_measured_cost_charges_each_chunk_for_the_context_it_attends_over() -> None:
    """With attention priced (per_attended_s), a document's chunks shrink as its prompt grows, each
    step's charge staying within the budget; a short prompt beside it gets the rest."""
    from engine.step_budget import StepCost, prefill_budget

    # a (token, key) pair costs 1% of a prompt token: position 1,000 doubles a token's charge
    cost = StepCost(fixed_s=0.010, per_decode_s=0.001, per_prefill_token_s=0.0002, per_attended_s=0.000002)
    budget = prefill_budget(cost, 0, interactive=False)
    sched = make_scheduler(num_blocks=2048, max_num_batched_tokens=0, step_cost=cost)
    sched.add(make_seq("doc", 3000, max_out=1))
    sizes, starts = [], []
    while True:
        (chunk,) = [c for c in sched.schedule().chunks if c.seq.id == "doc"]
        assert cost.chunk_charge(chunk.start, chunk.num_tokens) <= budget
        assert cost.chunk_charge(chunk.start, chunk.num_tokens + 1) > budget or chunk.sample
        sizes.append(chunk.num_tokens)
        starts.append(chunk.start)
        sched.update(SchedulerOutput((chunk,), ()), {"doc": 999} if chunk.sample else {})
        if chunk.sample:
            break
    assert sum(sizes) == 3000 and sizes[0] > sizes[-2] and sizes == sorted(sizes, reverse=True)[: len(sizes)]
    late = sched_with_doc_at(cost, 2000)
    out = late.schedule()
    (doc,) = [c for c in out.chunks if c.seq.id == "doc"]
    (chat,) = [c for c in out.chunks if c.seq.id == "chat"]
    assert chat.num_tokens == 8  # shortest remaining first within the salt: the chat's whole prompt
    assert cost.chunk_charge(0, 8) + cost.chunk_charge(doc.start, doc.num_tokens) <= budget


def sched_with_doc_at(cost, position: int):
    """A scheduler whose document has `position` prompt tokens computed, a short chat waiting."""
    sched = make_scheduler(num_blocks=2048, max_num_batched_tokens=0, step_cost=cost)
    doc = make_seq("doc", position + 1000, max_out=1)
    sched.add(doc)
    while doc.num_computed_tokens < position:
        out = sched.schedule()
        (chunk,) = out.chunks
        cut = min(chunk.num_tokens, position - chunk.start)
        sched.update(SchedulerOutput((type(chunk)(doc, chunk.start, cut, False),), ()), {})
    sched.add(make_seq("chat", 8, max_out=2))
    return sched


def test_the_first_chunk_of_a_step_moves_on_even_when_its_context_prices_it_over_the_budget() -> None:
    from engine.step_budget import StepCost

    pricey = StepCost(fixed_s=0.010, per_decode_s=0.001, per_prefill_token_s=0.0002, per_attended_s=0.01)
    sched = sched_with_doc_at(pricey, 1500)
    sched.finish(next(s for s in sched.waiting if s.id == "chat"), FinishReason.ABORTED)
    assert plan(sched.schedule()) == [("doc", 1500, 1, False)]


def test_a_budget_of_zero_needs_a_measured_cost() -> None:
    with pytest.raises(ValueError, match="measured step cost"):
        make_scheduler(max_num_batched_tokens=0)


def test_a_waiting_short_interactive_prompt_hurries_the_prefill_budget() -> None:
    """Beside interactive decodes the objective leaves 32 tokens a step; a 300-token interactive
    prompt gets a step of 80 so its first token comes in time (step_budget.hurry_budget). A
    batch-tier or long prompt of the same size in tokens still to prefill does not."""
    from engine.step_budget import StepCost

    cost = StepCost(fixed_s=0.007, per_decode_s=0.001, per_prefill_token_s=0.0007)

    def first_chunk(late: Sequence) -> int:
        sched = make_scheduler(num_blocks=2048, max_num_batched_tokens=0, step_cost=cost)
        for i in range(4):
            sched.add(make_seq(f"chat{i}", 4, max_out=8, salt=f"u{i}"))
        run_step(sched)  # their prompts: four interactive decodes from now on
        sched.add(late)
        (chunk,) = [c for c in sched.schedule().chunks if c.seq.id == late.id]
        return chunk.num_tokens

    assert first_chunk(make_seq("late", 300, max_out=2, salt="v")) == 80
    assert first_chunk(make_seq("bulk", 300, max_out=2, salt="v", tier=Tier.BATCH)) == 32
    assert first_chunk(make_seq("doc", 1500, max_out=2, salt="v")) == 32


def test_only_batch_tier_work_takes_the_longer_batch_step() -> None:
    from engine.step_budget import StepCost, prefill_budget

    cost = StepCost(fixed_s=0.010, per_decode_s=0.001, per_prefill_token_s=0.002)
    sched = make_scheduler(num_blocks=2048, max_num_batched_tokens=0, step_cost=cost)
    sched.add(make_seq("bulk", 4000, max_out=1, tier=Tier.BATCH))
    (chunk,) = sched.schedule().chunks
    assert chunk.num_tokens == prefill_budget(cost, 0, interactive=False, batch_only=True) == 240
    sched = make_scheduler(num_blocks=2048, max_num_batched_tokens=0, step_cost=cost)
    sched.add(make_seq("bulk", 4000, max_out=1, tier=Tier.BATCH))
    sched.add(make_seq("doc", 4000, max_out=1, salt="u"))  # interactive work: the idle step's bound
    assert sched.schedule().num_batched_tokens == prefill_budget(cost, 0, interactive=False) == 112


def test_short_interactive_prompts_are_due_by_the_earliest_deadline() -> None:
    """Every short interactive prompt taken at a known time and never preempted is due
    PREFILL_DEADLINE_S after it: their charge together, against the earliest deadline. Batch-tier,
    long, untimed and preempted prompts have none."""
    from engine.prefill_order import due
    from engine.step_budget import PREFILL_DEADLINE_S, StepCost

    cost = StepCost(fixed_s=0.007, per_decode_s=0.001, per_prefill_token_s=0.0007)
    seqs = {
        "later": make_seq("later", 100),
        "first": make_seq("first", 300),
        "bulk": make_seq("bulk", 100, tier=Tier.BATCH),
        "doc": make_seq("doc", SHORT_PROMPT_TOKENS + 1),
        "untimed": make_seq("untimed", 100),
        "preempted": make_seq("preempted", 100),
    }
    for name, at in (("later", 2.0), ("first", 1.0), ("bulk", 0.0), ("doc", 0.0), ("preempted", 0.0)):
        seqs[name].admitted_s = at
    seqs["preempted"].num_preemptions = 1
    assert due(cost, seqs.values(), now=1.5) == (400.0, 1.0 + PREFILL_DEADLINE_S - 1.5)
    assert due(cost, [seqs["bulk"], seqs["untimed"]], now=1.5) is None


def first_chunk_of_late(now: float | None, max_num_seqs: int = 8) -> dict[str, int]:
    """Four interactive decodes and a document part-way through its prompt; then a 450-token
    interactive prompt taken at 10.0 s. The tokens each prompt gets in the step at `now`."""
    from engine.step_budget import StepCost

    cost = StepCost(fixed_s=0.007, per_decode_s=0.001, per_prefill_token_s=0.0007)
    sched = make_scheduler(2048, max_num_seqs=max_num_seqs, max_num_batched_tokens=0, step_cost=cost)
    for i in range(4):
        sched.add(make_seq(f"chat{i}", 4, max_out=8, salt=f"u{i}"))
    sched.add(make_seq("doc", 2000, max_out=2, salt="d"))
    run_step(sched)  # the chats' prompts and the document's first chunk
    late = make_seq("late", 450, max_out=2, salt="v")
    late.admitted_s = 10.0
    sched.add(late)
    return {c.seq.id: c.num_tokens for c in sched.schedule(now).chunks if c.num_tokens > 1}


def test_a_prompt_gets_longer_steps_as_its_deadline_nears() -> None:
    """Beside four interactive decodes a 450-token prompt is hurried in steps of 80 tokens while
    its deadline is far (and with no clock); with 0.365 s left, 96 (what prefills it by then); past
    it, LATE_STEP objectives' worth, 112."""
    from engine.step_budget import PREFILL_DEADLINE_S

    assert first_chunk_of_late(None) == {"late": 80}
    assert first_chunk_of_late(10.0) == {"late": 80}
    assert first_chunk_of_late(10.0 + PREFILL_DEADLINE_S - 0.365) == {"late": 96}
    assert first_chunk_of_late(10.0 + PREFILL_DEADLINE_S) == {"late": 112}


def test_a_prompt_that_cannot_start_does_not_lengthen_the_step() -> None:
    """With no free running place the late prompt waits; neither its hurry nor its deadline grows
    the step the document gets (the interactive decodes' 32 tokens)."""
    from engine.step_budget import PREFILL_DEADLINE_S

    assert first_chunk_of_late(10.0 + PREFILL_DEADLINE_S, max_num_seqs=5) == {"doc": 32}
    assert first_chunk_of_late(10.0 + PREFILL_DEADLINE_S, max_num_seqs=6) == {"late": 112}
