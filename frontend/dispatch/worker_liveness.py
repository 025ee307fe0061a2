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


class _Wait:
    """One stream waiting for its next response: the task to cancel when it waited too long."""

    __slots__ = ("fired", "since", "task", "timeout_s")

    def __init__(self, task: asyncio.Task[object], since: float, timeout_s: float) -> None:
        self.task, self.since, self.timeout_s = task, since, timeout_s
        self.fired = False  # the watchdog cancelled the task for this wait


@dataclass(slots=True)
class Liveness:
    """When one model of a worker last answered anything (clock() seconds), and the streams that
    wait on it now, watched by one timer (answer_within)."""

    clock: Callable[[], float] = time.monotonic
    last_seen: float = field(init=False)
    waits: set[_Wait] = field(init=False, default_factory=set)
    timer: asyncio.TimerHandle | None = field(init=False, default=None)
    timer_loop: asyncio.AbstractEventLoop | None = field(init=False, default=None)

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

    def watch(self, wait: _Wait) -> None:
        """Adds a wait; the timer is due no later than its deadline (timeout_s from now)."""
        self.waits.add(wait)
        loop = asyncio.get_running_loop()
        timer = self.timer  # due too late, or armed on another loop (one that has closed)
        if timer is None or self.timer_loop is not loop or timer.when() > loop.time() + wait.timeout_s:
            self._arm(loop, wait.timeout_s)

    def _arm(self, loop: asyncio.AbstractEventLoop, delay_s: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.timer_loop = loop.call_later(delay_s, self._check, loop), loop

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancels each wait past its deadline; the timer is due again at the soonest other one.
        While responses flow, `last_seen` keeps every deadline ahead: about one check a timeout."""
        self.timer = None
        soonest: float | None = None
        for wait in list(self.waits):
            remaining = self.remaining_s(wait.since, wait.timeout_s)
            if remaining <= 0:
                self.waits.discard(wait)
                wait.fired = True
                wait.task.cancel()
            elif soonest is None or remaining < soonest:
                soonest = remaining
        if soonest is not None:
            self._arm(loop, soonest)


async def answer_within(next_item: Awaitable[T], liveness: Liveness, timeout_s: float) -> T:
    """Awaits a stream's next item; TimeoutError once neither it nor anything else from the same
    model arrived for `timeout_s`. The timer runs only while the stream waits: a reader that
    paused (a slow consumer) is not the worker's silence.

    The item is awaited in the caller's own task, and the model's one timer (Liveness.watch)
    cancels that task when the wait is over, as asyncio.timeout() does: no task, future or timer of
    its own per response (a frontend streams one response a token for every live generation)."""
    task = asyncio.current_task()
    assert task is not None, "answer_within runs in a task"
    wait = _Wait(task, liveness.clock(), timeout_s)
    liveness.watch(wait)
    try:
        item = await next_item
    except asyncio.CancelledError:
        if wait.fired and task.uncancel() == 0:  # ours alone: the read is cancelled, the wait is over
            raise TimeoutError(f"the worker sent nothing for {timeout_s:g}s") from None
        raise
    finally:
        liveness.waits.discard(wait)
    if wait.fired:  # the read swallowed our cancellation and answered after all: take it back
        task.uncancel()
    return item
