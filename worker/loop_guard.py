"""What keeps the engine loop (adapter.py) answering, and how it ends.

After a failed step the loop drops the engine and builds another (`Rebuilder`). The failed engine is
dropped first, so the worker never holds two KV pools at once (a pool is allocated whole when an
engine is built). Building may fail in turn (the memory the step ran out of is still short): the
loop must not die of it, or the model would stay loaded and ready in Triton while no request got an
answer again. Until a build succeeds the loop runs on `Unavailable`, which refuses every request for
capacity (the frontend answers UNAVAILABLE and may route elsewhere), and it tries again after 1 s,
then twice as long each time up to REBUILD_MAX_WAIT_S.

At unload the loop ends its own live requests on its way out. `close()` waits for it a while; a loop
still in its step then closes the outputs (outbox, metrics, spans) itself when the step returns.
`Handover` decides which of the two closes them, so exactly one does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from engine.engine import CapacityError, EngineRequest, Stats, StepOutput
from worker.protocol import Log, StepEngine

REBUILD_FIRST_WAIT_S = 1.0
REBUILD_MAX_WAIT_S = 30.0


class Unavailable:
    """The engine slot while no engine could be built: holds nothing, refuses everything."""

    schedule_s = 0.0
    last_batch_tokens = 0

    def add_request(self, request: EngineRequest) -> StepOutput:
        raise CapacityError("the engine is being rebuilt after a failed step")

    def abort(self, request_id: str) -> None:
        pass

    def has_unfinished(self) -> bool:
        return False

    def step(self) -> list[StepOutput]:
        return []

    def stats(self) -> Stats:
        return Stats(0, 0, 0, running=0, waiting=0, preemptions=0, prefix_query_tokens=0,
                     prefix_hit_tokens=0, last_batch_tokens=0)  # fmt: skip

    def prefix_keys(self, limit: int) -> list[bytes]:
        return []  # no engine, no cache


UNAVAILABLE = Unavailable()


class Rebuilder:
    """Builds the next engine when one is due: at once after a failed step, then with a doubling
    wait after each failed build."""

    def __init__(self, new_engine: Callable[[], StepEngine], log: Log, clock: Callable[[], float]) -> None:
        self._new_engine, self._log, self._clock = new_engine, log, clock
        self._wait_s = 0.0
        self._next_at = float("-inf")

    def build(self) -> StepEngine:
        """A new engine, or UNAVAILABLE when the last build failed and the next is not due yet or
        fails too (logged)."""
        now = self._clock()
        if now < self._next_at:
            return UNAVAILABLE
        try:
            engine = self._new_engine()
        except Exception as e:
            self._wait_s = min(REBUILD_MAX_WAIT_S, max(REBUILD_FIRST_WAIT_S, 2 * self._wait_s))
            self._next_at = now + self._wait_s
            self._log.log_error(
                f"engine rebuild failed: {type(e).__name__}: {e}; next try in {self._wait_s:g} s"
            )
            return UNAVAILABLE
        self._wait_s, self._next_at = 0.0, float("-inf")
        return engine


class Handover:
    """Who closes the loop's outputs at unload: close(), or the loop it stopped waiting for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop_done = False  # the loop has ended its requests
        self._loop_closes = False  # close() gave up waiting: the loop closes the outputs

    def loop_ended(self) -> bool:
        """The loop has ended its requests; True: it closes the outputs itself."""
        with self._lock:
            self._loop_done = True
            return self._loop_closes

    def close_gives_up(self, loop_running: bool) -> bool:
        """close() has waited; True: the loop, still in its step, closes the outputs."""
        with self._lock:
            self._loop_closes = loop_running and not self._loop_done
            return self._loop_closes
