"""Is a worker's model alive? Every response it sends on any stream is a sign of life, and a stream
waits for its next response only while the model has shown one within the inactivity timeout.

A stream may stay silent for long on a live worker: its prompt's prefill spans many steps, or it
waits in the engine behind `max_num_seqs` (its admission response came long ago). What a live
model does answer within one engine step is a new request: the admission response, or a refusal
sent from the engine loop. So the supervisor sends a tiny canary to a model that has been silent
for its probe interval (serving/probes.py): a live model is then never silent for longer than the
probe interval plus one step, and the timeout (`[frontend] worker_inactivity_timeout_s`) only has
to exceed that. Each Triton model is its own Python-backend stub process, so liveness is kept per
model, not per server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class Liveness:
    """When one model of a worker last answered anything (clock() seconds)."""

    clock: Callable[[], float] = time.monotonic
    last_seen: float = field(init=False)

    def __post_init__(self) -> None:
        self.last_seen = self.clock()

    def seen(self) -> None:
        self.last_seen = self.clock()

    def silent_s(self) -> float:
        return self.clock() - self.last_seen

    def remaining_s(self, since: float, timeout_s: float) -> float:
        """How much longer a stream that has waited since `since` may wait: until `timeout_s`
        after the later of that and the model's last sign of life (<= 0: it waited too long)."""
        return timeout_s - (self.clock() - max(since, self.last_seen))


async def answer_within(next_item: Awaitable[T], liveness: Liveness, timeout_s: float) -> T:
    """Awaits a stream's next item; TimeoutError once neither it nor anything else from the same
    model arrived for `timeout_s`. The timer runs only while the stream waits: a reader that
    paused (a slow consumer) is not the worker's silence."""
    since = liveness.clock()
    pending = asyncio.ensure_future(next_item)
    try:
        while True:
            remaining = liveness.remaining_s(since, timeout_s)
            if remaining <= 0:
                raise TimeoutError(f"the worker sent nothing for {timeout_s:g}s")
            done, _ = await asyncio.wait({pending}, timeout=remaining)
            if done:
                return pending.result()
    finally:
        if not pending.done():
            pending.cancel()
