"""The engine's prefix-cache summary, written to a file for its worker host to publish
(contracts/prefix_summary.py says what it holds and who reads it).

The engine loop calls `maybe_write()` each turn; at most every `interval_s` it takes the keys (a
scan of the pool's blocks, on the loop's own thread, so the keys are consistent) and writes the
file when they changed, or every `refresh_s` regardless (its modification time is the host's sign
that the engine is alive). A failed write is logged once and tried again later: routing by prefix
is an optimisation, never a reason to stop serving.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from contracts.prefix_summary import CacheSummary, fingerprint, write_summary
from worker.protocol import Log

KeySource = Callable[[int], list[bytes]]  # limit -> keys, most useful first


class PrefixSummaryWriter:
    def __init__(
        self,
        path: Path,
        compatibility_key: str,
        block_size: int,
        limit: int,
        log: Log,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = 0.5,
        refresh_s: float = 5.0,
    ) -> None:
        self.path = path
        self.compatibility_key = compatibility_key
        self.block_size = block_size
        self.limit = limit
        self.log = log
        self.clock = clock
        self.interval_s = interval_s
        self.refresh_s = refresh_s
        self.written: CacheSummary | None = None
        self._checked_at: float | None = None
        self._written_at = 0.0
        self._failed = False

    def maybe_write(self, keys: KeySource) -> bool:
        """Writes the summary if due and changed (or stale); True when it wrote."""
        now = self.clock()
        if self._checked_at is not None and now - self._checked_at < self.interval_s:
            return False
        self._checked_at = now
        summary = CacheSummary(
            self.compatibility_key, self.block_size, frozenset(fingerprint(k) for k in keys(self.limit))
        )
        if summary == self.written and now - self._written_at < self.refresh_s:
            return False
        try:
            write_summary(self.path, summary)
        except OSError as e:
            if not self._failed:
                self.log.log_error(
                    f"prefix-cache summary not written ({type(e).__name__}); routing ignores it"
                )
            self._failed = True
            return False
        self._failed = False
        self.written, self._written_at = summary, now
        return True
