"""The generations this frontend is running, and who follows them.

LiveGeneration  one run: its retained event log, its task, its attempt's lease, the client
                streams following it, and why it was stopped
LiveRegistry    every run of this frontend, kept `retain_s` after its log closes so a Resume
                can still read it, and while the retained logs of all closed runs hold at most
                `retain_max_bytes` (beyond, the oldest go first: a Resume of one gets
                CURSOR_EXPIRED, as after `retain_s`). Runs are forgotten in the order their logs
                closed, so each admission looks only at the oldest, not at every run retained. A
                run no client follows for `grace_s` is cancelled (DISCONNECTED)
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from control.attempts import Lease
from frontend.api_errors import ApiError
from frontend.generations.stream_log import EventLog
from frontend.generations.telemetry import GenerationObserver

log = logging.getLogger(__name__)
DISCONNECTED = "DISCONNECTED"  # recorded when no client came back within the grace period


@dataclass(slots=True)
class LiveGeneration:
    generation_id: str
    tenant_id: str
    log: EventLog
    task: asyncio.Task[None] | None = None
    error: ApiError | None = None  # the run ended without `finished` (refused, or the store failed)
    finished: bool = False  # its `finished` event is in the log
    closed_at: float | None = None  # loop time the log closed
    clients: int = 0  # client streams (Generate, Resume) following it now
    delivered: bool = False  # a follower took its last event (or its error)
    cancel_reason: str = "CANCELED"  # recorded terminal reason when its task is cancelled
    lease: Lease | None = None  # its attempt's lease once it left the queue (renewed while it runs)
    cancel_requested_at: float | None = None  # loop time of the cancel intent (lag metric)
    closed_bytes: int = 0  # its log's retained bytes when it closed (the retention budget's share)
    observer: GenerationObserver | None = None  # its trace and latency figures
    _grace: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class LiveRegistry:
    def __init__(
        self,
        grace_s: float,
        retain_s: float,
        retain_max_bytes: int = 64 << 20,
        clock: Callable[[], float] = _loop_time,
    ) -> None:
        """clock: the event loop's time by default (tests pass their own)."""
        self.grace_s = grace_s
        self.retain_s = retain_s
        self.retain_max_bytes = retain_max_bytes
        self._clock = clock
        self._live: dict[str, LiveGeneration] = {}
        self._closed: deque[LiveGeneration] = deque()  # retained runs, in the order their logs closed
        self.closed_bytes = 0  # their logs' retained bytes when they closed
        self.evicted = 0  # closed runs forgotten before retain_s, for the budget
        self.followers = 0  # client streams following any run, forgotten ones included
        self.relays = 0  # client streams this frontend passes on from the frontends running them
        self.admitting = 0  # Generate calls past the drain check, not yet added (their admission)

    def add(self, live: LiveGeneration) -> None:
        self._live[live.generation_id] = live

    def get(self, generation_id: str) -> LiveGeneration | None:
        return self._live.get(generation_id)

    def retained(self, tenant_id: str, generation_id: str) -> LiveGeneration | None:
        """The tenant's retained run (None for another tenant's)."""
        self.forget_expired()
        live = self._live.get(generation_id)
        return live if live is not None and live.tenant_id == tenant_id else None

    def open(self) -> list[LiveGeneration]:
        """Runs whose log is still open (their leases are renewed, every third of the lease: the
        retained runs are expired then too, so an idle frontend lets them go)."""
        self.forget_expired()
        return [g for g in self._live.values() if not g.log.closed]

    def client_joined(self, live: LiveGeneration) -> None:
        live.clients += 1
        self.followers += 1
        if live._grace is not None:
            live._grace.cancel()
            live._grace = None

    def client_left(self, live: LiveGeneration) -> None:
        """A client stream ended: cancel the run once none has come back within grace_s."""
        live.clients -= 1
        self.followers -= 1
        if live.clients > 0 or live.log.closed or live.task is None:
            return

        def expire() -> None:
            live._grace = None
            if live.clients == 0 and live.running:
                log.info("generation %s: no client for %.1fs, cancelling", live.generation_id, self.grace_s)
                self.cancel(live, DISCONNECTED)

        live._grace = asyncio.get_running_loop().call_later(self.grace_s, expire)

    def cancel(self, live: LiveGeneration, reason: str, intent_at: float | None = None) -> None:
        """Stops a run (a client's cancel, or from inside the gateway, e.g. reason SLOW_CONSUMER); it
        ends CANCELED with usage sealed and `reason` recorded. No-op once it has ended or is being
        cancelled already: the first cancellation's reason and time stand. intent_at: the loop time
        the cancel was asked for (default: now)."""
        if live.running and live.cancel_requested_at is None:
            assert live.task is not None
            live.cancel_reason = reason
            live.cancel_requested_at = asyncio.get_running_loop().time() if intent_at is None else intent_at
            live.task.cancel()

    def closed(self, live: LiveGeneration) -> None:
        """Its log has closed: it is retained for `retain_s` from now, then forgotten; sooner,
        oldest first, while the closed runs' logs hold more than `retain_max_bytes`."""
        live.closed_at = self._clock()
        live.closed_bytes = live.log.retained_bytes
        self._closed.append(live)
        self.closed_bytes += live.closed_bytes
        self.forget_expired()

    def retention(self) -> tuple[int, int, int]:
        """(closed runs retained, their logs' bytes when they closed, runs forgotten early)."""
        return len(self._closed), self.closed_bytes, self.evicted

    def forget_expired(self) -> None:
        """Forgets the runs retained longer than `retain_s`, or beyond the byte budget. They
        closed in order, so only the oldest are looked at: a frontend retaining thousands of runs
        does not walk them all on every admission. A run added again under the same generation id
        stays (defensive: generation ids are fresh today)."""
        now = self._clock()
        while self._closed:
            oldest = self._closed[0]
            assert oldest.closed_at is not None
            expired = now - oldest.closed_at > self.retain_s
            if not expired and self.closed_bytes <= self.retain_max_bytes:
                return
            self._closed.popleft()
            self.closed_bytes -= oldest.closed_bytes
            self.evicted += not expired
            if self._live.get(oldest.generation_id) is oldest:
                del self._live[oldest.generation_id]

    def idle(self) -> bool:
        """No run is going on or being admitted, no client follows one (here, or through this
        frontend's relay of another frontend's run), and every ended one was delivered to the end
        or left unfollowed for the grace period (a client that lost its stream may come back,
        through any frontend, within it)."""
        # followers counts every client stream, a run's forgotten for the byte budget included
        if self.relays > 0 or self.admitting > 0 or self.followers > 0:
            return False
        now = self._clock()
        for g in self._live.values():
            if g.running:
                return False
            if not g.delivered and g.closed_at is not None and now - g.closed_at < self.grace_s:
                return False
        return True

    async def wait_idle(self, timeout_s: float, poll_s: float = 0.2) -> bool:
        """Waits up to `timeout_s` until idle(); True when it became idle in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.idle():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(poll_s)
        return True

    async def shutdown(self) -> None:
        """Cancels every run (each ends CANCELED, usage flushed) and waits for them."""
        tasks = [g.task for g in self._live.values() if g.task is not None and not g.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=30)
