"""The engine's prefix-cache summary file: written when due and changed (or stale), bounded, read
back as it was written; a failed write is logged once and never stops the loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from contracts.prefix_summary import CacheSummary, read_summary, summary_path
from worker.prefix_summary import PrefixSummaryWriter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def log_info(self, message: str) -> None:
        pass

    def log_error(self, message: str) -> None:
        self.errors.append(message)


KEYS = [bytes([i]) * 32 for i in range(1, 6)]


def source(keys: list[bytes]) -> Callable[[int], list[bytes]]:
    return lambda limit: keys[:limit]


def test_written_when_due_and_changed_bounded_and_read_back(tmp_path: Path) -> None:
    clock, log = Clock(), Log()
    path = summary_path(tmp_path, 111, "m--1", 222)
    writer = PrefixSummaryWriter(path, "compat:float32", 16, 3, log, clock, interval_s=0.5, refresh_s=5.0)
    assert writer.maybe_write(source(KEYS))
    want = CacheSummary("compat:float32", 16, frozenset(k[:8] for k in KEYS[:3]))
    assert read_summary(path) == want
    clock.now = 0.2
    assert not writer.maybe_write(source(KEYS[1:]))  # not due yet
    clock.now = 0.6
    assert not writer.maybe_write(source(KEYS))  # due, unchanged, not stale
    assert not writer.maybe_write(source(KEYS[1:]))  # changed, but checked 0 s ago: not due
    clock.now = 1.2
    assert writer.maybe_write(source(KEYS[1:]))
    assert read_summary(path) == CacheSummary("compat:float32", 16, frozenset(k[:8] for k in KEYS[1:4]))
    clock.now = 6.5
    assert writer.maybe_write(source(KEYS[1:]))  # unchanged but stale: rewritten (its host's sign of life)
    assert log.errors == []


def test_a_failed_write_is_logged_once_and_tried_again(tmp_path: Path) -> None:
    clock, log = Clock(), Log()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    writer = PrefixSummaryWriter(blocker / "m.1.json", "c", 16, 8, log, clock, interval_s=0.5)
    assert not writer.maybe_write(source(KEYS))
    clock.now = 1.0
    assert not writer.maybe_write(source(KEYS))
    assert len(log.errors) == 1 and "summary not written" in log.errors[0]
    blocker.unlink()
    clock.now = 2.0
    assert writer.maybe_write(source(KEYS))
    assert read_summary(blocker / "m.1.json") is not None
