"""Small constructors for engine tests."""

from __future__ import annotations

import itertools

from contracts.tier import Tier
from engine.block_pool import BlockPool
from engine.kv_cache_manager import KVCacheManager
from engine.scheduler import GUARANTEED_NO_EVICT, Scheduler
from engine.scheduler_output import SchedulerOutput
from engine.sequence import EngineRequest, Sequence
from engine.step_budget import StepCost

_arrivals = itertools.count()


def make_seq(
    rid: str,
    prompt_len: int,
    max_out: int = 4,
    salt: str = "t",
    tier: Tier = Tier.INTERACTIVE,
    weight: float = 1.0,
    base: int | None = None,
) -> Sequence:
    """A sequence whose prompt is `prompt_len` consecutive ids from `base` (distinct per call by default)."""
    arrival = next(_arrivals)
    start = arrival * 10_000 if base is None else base
    prompt = tuple(start + i for i in range(prompt_len))
    req = EngineRequest(rid, prompt, max_out, cache_salt=salt, tier=tier, weight=weight)
    return Sequence(req, arrival, None, list(prompt))


def make_scheduler(
    num_blocks: int = 64,
    block_size: int = 4,
    max_num_seqs: int = 8,
    max_num_batched_tokens: int = 16,
    policy: str = GUARANTEED_NO_EVICT,
    fair_share: bool = True,
    step_cost: StepCost | None = None,
) -> Scheduler:
    kv = KVCacheManager(BlockPool(num_blocks), block_size, "compat")
    return Scheduler(kv, max_num_seqs, max_num_batched_tokens, policy, fair_share, step_cost)


LONG_TEXT = " ".join(
    f"Paragraph {i}: the harbour town of Saint-Malo kept {i * 7 % 23} fishing boats, "
    f"{i * 13 % 31} bakeries and a lighthouse whose keeper logged the weather every {i % 5 + 2} hours; "
    "merchants traded salt, wool, cider and copper, and the tide rose twelve metres twice a day."
    for i in range(1, 120)
)


def plan(out: SchedulerOutput) -> list[tuple[str, int, int, bool]]:
    return [(c.seq.id, c.start, c.num_tokens, c.sample) for c in out.chunks]


def run_step(sched, token: int = 999):
    out = sched.schedule()
    sched.update(out, {c.seq.id: token for c in out.chunks if c.sample})
    return out
