"""The asynchronous usage aggregator the frontend feeds (no database round trip per report).

    report(r) ──> queue ──> writer task: one batch ──> one transaction (in a worker thread)
    await flush_final(g, e) ── resolves once every report queued before it is durable

`report()` never blocks or touches the database. The writer takes everything queued (up to
`max_batch`), writes it idempotently with `billing.usage.record_usage`, and commits; while a batch is
being written the next one gathers, so batches grow with load. `flush_final` returns the durable
watermark of (generation, epoch) read in the transaction that made the last of those reports
durable; the frontend sends `finished` only after it. A failed batch is retried after `retry_delay`
and the flushes waiting on it raise `UsageNotDurable`.

While the store is away the queue grows, up to `max_pending` reports. At the bound it is compacted
to the newest report of each attempt: reports are cumulative, so the newest one carries all the
others did (their sequence numbers are simply never recorded). Only when more attempts than the
bound have reports waiting are the oldest dropped (`stats.dropped`, logged): those attempts are
billed at an older watermark and the rest is the unbilled estimate, as after a crash.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType

from sqlalchemy.orm import Session, sessionmaker

from billing.errors import UsageNotDurable
from billing.usage import AttemptKey, RecordOutcome, UsageReport, WatermarkView, read_watermarks, record_usage

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class AggregatorStats:
    reports: int = 0  # accepted by report()
    recorded: int = 0  # stored as new usage events
    duplicates: int = 0
    unknown: int = 0  # for no known attempt: dropped
    after_seal: int = 0  # observed only, not billed
    batches: int = 0  # committed transactions that wrote reports
    failures: int = 0  # batches that failed and were retried
    compacted: int = 0  # reports superseded by a newer one of their attempt while the queue was full
    dropped: int = 0  # reports dropped with no newer one queued (more attempts waiting than the bound)


@dataclass(slots=True)
class _Flush:
    target: int  # durable once no report queued at or before this position is waiting
    key: AttemptKey | None  # the watermark to read back; None: only durability
    future: asyncio.Future[WatermarkView | None]


class UsageAggregator:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        clock: Callable[[], datetime],
        max_batch: int = 2000,
        linger_s: float = 0.002,
        retry_delay_s: float = 0.5,
        max_pending: int = 100_000,
    ) -> None:
        """`clock` stamps each batch (called in the writer thread). `linger_s`: how long an idle
        writer waits for more reports before writing a batch no flush is waiting for."""
        if max_batch < 1 or max_pending < 1:
            raise ValueError("max_batch and max_pending must be positive")
        self._max_pending = max_pending
        self._sessions = sessions
        self._clock = clock
        self._max_batch = max_batch
        self._linger_s = linger_s
        self._retry_delay_s = retry_delay_s
        self._pending: deque[tuple[int, UsageReport]] = deque()  # (queue position, report), in order
        self._enqueued = 0  # reports ever queued: the position of the last one
        self._flushes: list[_Flush] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._stats = AggregatorStats()

    @property
    def stats(self) -> AggregatorStats:
        return self._stats

    async def __aenter__(self) -> UsageAggregator:
        self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def start(self) -> None:
        """Starts the writer task on the running event loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="usage-aggregator")

    async def close(self) -> int:
        """Writes everything queued, then stops. Returns how many reports could not be written."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        return len(self._pending)

    def report(self, report: UsageReport) -> None:
        """Queues one cumulative report; never blocks."""
        if self._closing:
            raise RuntimeError("the usage aggregator is closed")
        if len(self._pending) >= self._max_pending:
            self._compact()
        self._enqueued += 1
        self._pending.append((self._enqueued, report))
        self._stats = dataclasses.replace(self._stats, reports=self._stats.reports + 1)
        self._wake.set()

    @property
    def pending(self) -> int:
        """Reports queued and not yet durable."""
        return len(self._pending)

    def _compact(self) -> None:
        """Keeps the newest report of each attempt; then, if still at the bound, drops the oldest."""
        newest: dict[AttemptKey, int] = {}
        for position, r in self._pending:
            newest[r.key] = position
        kept = deque((p, r) for p, r in self._pending if newest[r.key] == p)
        compacted = len(self._pending) - len(kept)
        dropped = 0
        while len(kept) >= self._max_pending:
            kept.popleft()
            dropped += 1
        if dropped:
            log.error("usage queue full (%d attempts waiting): dropped %d reports", len(newest), dropped)
        self._pending = kept
        s = self._stats
        self._stats = dataclasses.replace(s, compacted=s.compacted + compacted, dropped=s.dropped + dropped)

    async def flush_final(self, generation_id: str, epoch: int) -> WatermarkView | None:
        """Waits until every report queued so far is durable; returns the durable watermark of
        (generation_id, epoch), None if no such attempt. Raises `UsageNotDurable` if the write failed."""
        return await self._flush((generation_id, epoch))

    async def flush(self) -> None:
        """Waits until every report queued so far is durable (the sweeper's first step: an attempt
        is sealed only after what this frontend holds of its usage is written)."""
        await self._flush(None)

    async def _flush(self, key: AttemptKey | None) -> WatermarkView | None:
        if self._task is None or self._task.done():
            raise RuntimeError("the usage aggregator is not running")
        future: asyncio.Future[WatermarkView | None] = asyncio.get_running_loop().create_future()
        self._flushes.append(_Flush(self._enqueued, key, future))
        self._wake.set()
        return await future

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if (
                self._linger_s > 0
                and not (self._flushes or self._closing)
                and len(self._pending) < self._max_batch
            ):
                await asyncio.sleep(self._linger_s)
            if not self._pending and not self._flushes:
                if self._closing:
                    return
                continue
            if not await self._write_one_batch() and self._closing:
                self._fail_flushes(self._flushes, None)
                return
            if self._pending or self._flushes or self._closing:
                self._wake.set()

    async def _write_one_batch(self) -> bool:
        taken = [self._pending.popleft() for _ in range(min(self._max_batch, len(self._pending)))]
        batch = [r for _, r in taken]
        # durable after this batch: every position before the next report still waiting
        covered = self._pending[0][0] - 1 if self._pending else self._enqueued
        flushes = [f for f in self._flushes if f.target <= covered]
        try:
            keys = {f.key for f in flushes if f.key is not None}
            outcome, marks = await asyncio.to_thread(self._write, batch, keys)
        except Exception as error:  # any database failure: keep the reports, fail the waiting flushes
            log.warning("usage batch of %d reports failed; retrying: %s", len(batch), type(error).__name__)
            self._pending.extendleft(reversed(taken))
            self._fail_flushes(flushes, error)
            self._stats = dataclasses.replace(self._stats, failures=self._stats.failures + 1)
            if not self._closing:
                await asyncio.sleep(self._retry_delay_s)
            return False
        s = self._stats
        self._stats = dataclasses.replace(
            s,
            recorded=s.recorded + outcome.recorded,
            duplicates=s.duplicates + outcome.duplicates,
            unknown=s.unknown + outcome.unknown,
            after_seal=s.after_seal + outcome.after_seal,
            batches=s.batches + (1 if batch else 0),
        )
        for f in flushes:
            self._flushes.remove(f)
            if not f.future.done():
                f.future.set_result(marks.get(f.key) if f.key is not None else None)
        return True

    def _fail_flushes(self, flushes: list[_Flush], error: Exception | None) -> None:
        for f in list(flushes):
            self._flushes.remove(f)
            if not f.future.done():
                failure = UsageNotDurable(*(f.key or ("", 0)))
                failure.__cause__ = error
                f.future.set_exception(failure)

    def _write(
        self, batch: list[UsageReport], keys: set[AttemptKey]
    ) -> tuple[RecordOutcome, dict[AttemptKey, WatermarkView]]:
        with self._sessions.begin() as session:
            outcome = record_usage(session, batch, now=self._clock()) if batch else RecordOutcome(0, 0, 0, 0)
            return outcome, read_watermarks(session, keys)
