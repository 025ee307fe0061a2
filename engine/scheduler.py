"""Continuous batching: each step, one batch of every running sequence's decode and prefill chunks
under a prompt-token budget.

    schedule() -> SchedulerOutput: decodes of all running sequences first, then prefill chunks of
                                   up to the budget's prompt tokens, in fair order over running
                                   sequences part-way through their prompt and waiting ones; the
                                   budget is fixed, or sized each step from the measured step cost,
                                   the decodes it carries and the first tokens waited for, `now`
                                   against their deadlines (engine/step_budget.py)
    update(output, sampled)      : advance num_computed_tokens, append tokens, finish, free blocks

Memory policies: `guaranteed_no_evict` reserves prompt + max output blocks at admission and never
preempts; `max_utilization` allocates as sequences grow and, when the pool runs dry, preempts the
lowest-priority, most recently admitted running sequence (its KV is recomputed later). Prefill
work is ordered by tier, then by each prompt's finish tag in weighted fair queuing across cache
salts (a whole prompt the packet), then by arrival; a step's first pick goes to a short prompt of
the first tier (engine/prefill_order.py). No torch, no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contracts.capacity import blocks_for
from contracts.tier import Tier
from engine.fair_share import FairShare
from engine.kv_cache_manager import KVCacheManager
from engine.prefill_order import due, finish_tag, next_prefill, urgent
from engine.scheduler_output import ScheduledChunk, SchedulerOutput
from engine.sequence import FinishReason, SeqStatus, Sequence
from engine.step_budget import StepCost, charge_of, chunk_fit, prefill_budget

GUARANTEED_NO_EVICT = "guaranteed_no_evict"
MAX_UTILIZATION = "max_utilization"


class CapacityError(Exception):
    """The worker cannot take this request now (its reservation does not fit); try elsewhere/later."""


class Scheduler:
    def __init__(
        self,
        kv: KVCacheManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        policy: str = GUARANTEED_NO_EVICT,
        fair_share: bool = True,
        step_cost: StepCost | None = None,
    ) -> None:
        """max_num_batched_tokens: prompt tokens a step may prefill; 0: sized each step from
        `step_cost` (required then)."""
        if policy not in (GUARANTEED_NO_EVICT, MAX_UTILIZATION):
            raise ValueError(f"unknown scheduler policy {policy!r}")
        if max_num_batched_tokens < 0 or (max_num_batched_tokens == 0 and step_cost is None):
            raise ValueError("a prefill budget of 0 is sized from a measured step cost: give one")
        self.kv = kv
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.step_cost = step_cost
        self.policy = policy
        self.fair_share = fair_share  # False: prefill in plain arrival order (first come, first served)
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.fair = FairShare()  # prefill service of each cache salt
        self.num_preemptions = 0

    # --- admission ----------------------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        """Admits atomically or raises CapacityError having changed nothing."""
        total = blocks_for(seq.num_prompt_tokens + seq.request.max_output_tokens, self.kv.block_size)
        if total > self.kv.pool.num_blocks:
            raise CapacityError(f"needs {total} KV blocks, the pool has {self.kv.pool.num_blocks}")
        if self.policy == GUARANTEED_NO_EVICT and not self.kv.try_reserve(seq.id, total):
            raise CapacityError(f"needs {total} KV blocks, {self.kv.num_unreserved_blocks} unreserved")
        if self.policy == GUARANTEED_NO_EVICT:
            self._match_prefix(seq)  # held while waiting: drawn from its own reservation
        else:  # held only once it runs, so waiting sequences never pin memory others need
            seq.num_cached_tokens = self.kv.peek_prefix(seq.token_ids, seq.request.cache_salt)
        backlogged = {s.request.cache_salt for s in self._prefilling()}
        if seq.request.cache_salt not in backlogged:
            self.fair.join(seq.request.cache_salt, backlogged)
        self.waiting.append(seq)

    def _prefilling(self) -> list[Sequence]:
        """Sequences with prompt still to compute: waiting ones and running ones part-way."""
        return self.waiting + self._part_way()

    def _part_way(self) -> list[Sequence]:
        return [s for s in self.running if s.num_uncomputed > 1]

    def _match_prefix(self, seq: Sequence) -> None:
        """Takes references on the cached prefix now, so it cannot be evicted while waiting."""
        seq.num_computed_tokens = self.kv.match_prefix(seq.id, seq.token_ids, seq.request.cache_salt)
        seq.matched_prefix = True
        if seq.num_preemptions == 0:
            seq.num_cached_tokens = seq.num_computed_tokens

    def abort(self, seq: Sequence) -> None:
        """Removes a sequence from all future scheduling and frees its blocks.

        Called between steps, so no in-flight step can still read the blocks.
        """
        self.finish(seq, FinishReason.ABORTED)

    def finish(self, seq: Sequence, reason: FinishReason) -> None:
        """Ends a sequence for `reason` wherever it is (waiting or running) and frees its blocks;
        called outside a step's model run (an abort between steps, a sampling failure after it). A
        sequence of the step just run is then skipped by `update()`."""
        if seq in self.waiting:
            self.waiting.remove(seq)
        if seq in self.running:
            self.running.remove(seq)
        self._finish(seq, reason)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # --- one step -----------------------------------------------------------------------------

    def schedule(self, now: float | None = None) -> SchedulerOutput:
        """The next step; `now`, on the clock of the sequences' `admitted_s`, sizes a measured
        budget to prompts' deadlines (None: none)."""
        chunks: list[ScheduledChunk] = []
        preempted: list[str] = []
        scheduled: set[int] = set()
        # 1. decodes: one token for every running sequence that has finished its prompt
        for seq in sorted(self.running, key=lambda s: (s.request.tier, s.arrival)):
            decoding = seq.status is SeqStatus.RUNNING and seq.num_uncomputed == 1
            if decoding and self._grow(seq, 1, scheduled, preempted):
                chunks.append(self._chunk(seq, 1))
                scheduled.add(id(seq))
        # 2. prefill chunks, in fair order, over running sequences part-way through their prompt
        #    and waiting ones (admitted only while no memory was short this step); with a measured
        #    budget each chunk is charged for the context it attends over (step_budget.py)
        left = float(self.prefill_budget(chunks, now))
        cost = None if self.max_num_batched_tokens else self.step_cost
        admit, prefilled = True, False
        too_big: set[int] = set()  # sequences whose next chunk is priced over what is left
        express = self.fair_share  # the step's first pick: a short prompt before long ones
        while left >= 1:
            admit = admit and not preempted
            nxt = self._next_prefill(scheduled | too_big, admit, short_only=express)
            if nxt is None and express:
                express = False
                continue
            express = False
            if nxt is None:
                break
            seq = nxt
            if seq.status is SeqStatus.RUNNING:
                n = chunk_fit(cost, seq.num_computed_tokens, seq.num_uncomputed, left, prefilled)
                if n == 0:
                    too_big.add(id(seq))  # a shorter context may still fit
                    continue
                if not self._grow(seq, n, scheduled, preempted):
                    continue  # it was itself preempted
            else:
                started = self._start(seq, cost, left, prefilled)
                if started is None:
                    admit = False  # never preempt for new work
                    continue
                if started == 0:
                    too_big.add(id(seq))
                    continue
                n = started
            if seq.finish_tag is None and self.fair_share:  # its place in prefill order, from now on
                seq.finish_tag = finish_tag(seq, self.fair, cost)
            chunks.append(self._chunk(seq, n))
            scheduled.add(id(seq))
            charge = charge_of(cost, seq.num_computed_tokens, n)
            left -= charge
            prefilled = True
            # fair share counts what the chunk costs, its attention too
            self.fair.charge(seq.request.cache_salt, charge, seq.request.weight)
        return SchedulerOutput(tuple(chunks), tuple(preempted))

    def update(self, output: SchedulerOutput, sampled: Mapping[str, int | tuple[int, ...]]) -> list[Sequence]:
        """Applies a finished step; returns the sequences that got tokens (finished ones included).
        A verified draft gets its emitted tokens (engine/speculative/verification.py): its accepted drafts' KV
        is computed, the rejected ones' is not."""
        touched = []
        for c in output.chunks:
            seq = c.seq
            if seq.status is not SeqStatus.RUNNING:
                continue  # aborted or failed since the step was scheduled
            new = sampled[seq.id] if c.sample else ()
            tokens = new if isinstance(new, tuple) else (new,)
            reason = None
            for token in tokens:  # up to the first that finishes the sequence
                seq.token_ids.append(token)
                if (reason := seq.finished_by(token)) is not None:
                    break
            computed = c.start + c.num_tokens - len(c.draft) + max(len(tokens) - 1, 0)
            seq.num_computed_tokens = min(computed, len(seq.token_ids) - 1) if tokens else computed
            self.kv.cache_full_blocks(seq.id, seq.token_ids, seq.num_computed_tokens, seq.request.cache_salt)
            if tokens:
                touched.append(seq)
            if reason is not None:
                self._remove_running(seq, reason)
        return touched

    def prefill_budget(self, decodes: list[ScheduledChunk], now: float | None = None) -> int:
        """Prompt tokens this step may prefill beside `decodes`: grown while short interactive
        prompts wait for their first token (step_budget.hurry_budget), and as their deadlines near
        (step_budget.due_budget; `now` None: no deadlines)."""
        cost = self.step_cost
        if self.max_num_batched_tokens or cost is None:
            return self.max_num_batched_tokens
        interactive = any(c.seq.request.tier == Tier.INTERACTIVE for c in decodes)
        # only prompts this step can prefill count: a waiting one needs a free running place
        startable = self._prefilling() if len(self.running) < self.max_num_seqs else self._part_way()
        hurry = urgent(cost, startable)
        deadlines = None if now is None else due(cost, startable, now)
        batch_only = all(s.request.tier == Tier.BATCH for s in (*self.running, *self.waiting))
        return prefill_budget(
            cost, len(decodes), interactive, urgent=hurry, batch_only=batch_only, due=deadlines
        )

    # --- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _chunk(seq: Sequence, n: int) -> ScheduledChunk:
        return ScheduledChunk(
            seq, seq.num_computed_tokens, n, seq.num_computed_tokens + n == len(seq.token_ids)
        )

    def _next_prefill(self, scheduled: set[int], admit: bool, short_only: bool = False) -> Sequence | None:
        """The next sequence to prefill a chunk of (engine/prefill_order.py): running ones part-way
        through their prompt, and waiting ones when `admit` and a running place is free."""
        candidates = [
            s
            for s in self.running
            if s.status is SeqStatus.RUNNING and s.num_uncomputed > 1 and id(s) not in scheduled
        ]
        if admit and len(self.running) < self.max_num_seqs:
            candidates += [s for s in self.waiting if id(s) not in scheduled]
        cost = None if self.max_num_batched_tokens else self.step_cost
        return next_prefill(candidates, self.fair if self.fair_share else None, short_only, cost)

    def _grow(self, seq: Sequence, n: int, scheduled: set[int], preempted: list[str]) -> bool:
        """Room for n more tokens of a running sequence, preempting others (max_utilization) if
        needed; False when the sequence itself had to be preempted."""
        while not self.kv.allocate_slots(seq.id, seq.num_computed_tokens + n):
            victim = self._victim(exclude=scheduled)
            self._preempt(victim)
            preempted.append(victim.id)
            if victim is seq:
                return False
        return True

    def _start(self, seq: Sequence, cost: StepCost | None, left: float, prefilled: bool) -> int | None:
        """Moves a waiting sequence to running with room for its first chunk (returned: what fits
        `left`), or leaves it waiting (pinning nothing under max_utilization): None when memory is
        short, 0 when its chunk does not fit what is left of the budget."""
        if not seq.matched_prefix:  # max_utilization, or preempted: blocks may still be cached
            self._match_prefix(seq)
        n = chunk_fit(cost, seq.num_computed_tokens, seq.num_uncomputed, left, prefilled)
        if n == 0 or not self.kv.allocate_slots(seq.id, seq.num_computed_tokens + n):
            if self.policy == MAX_UTILIZATION:
                self.kv.release_blocks(seq.id)
                seq.num_computed_tokens, seq.matched_prefix = 0, False
            return None if n else 0
        self.waiting.remove(seq)
        seq.status = SeqStatus.RUNNING
        self.running.append(seq)
        return n

    def _victim(self, exclude: Iterable[int]) -> Sequence:
        """Lowest priority (highest tier), most recently admitted running sequence."""
        if self.policy == GUARANTEED_NO_EVICT:
            raise AssertionError("a reserved sequence failed to allocate")
        skip = set(exclude)  # already in this step's batch; the requester itself is never skipped
        return max((s for s in self.running if id(s) not in skip), key=lambda s: (s.request.tier, s.arrival))

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.kv.release_blocks(seq.id)
        seq.status = SeqStatus.WAITING
        seq.finish_tag = None  # its prompt starts over, and takes its place again
        seq.num_preemptions += 1
        seq.num_computed_tokens = 0
        seq.matched_prefix = False
        self.waiting.append(seq)
        self.num_preemptions += 1

    def _remove_running(self, seq: Sequence, reason: FinishReason) -> None:
        self.running.remove(seq)
        self._finish(seq, reason)

    def _finish(self, seq: Sequence, reason: FinishReason) -> None:
        seq.status = SeqStatus.FINISHED
        seq.finish_reason = reason
        self.kv.free(seq.id)
