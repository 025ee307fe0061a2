"""Retrying a store call: only when its connection broke, and a bounded number of times."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

import datastore.retry as retry
from datastore.retry import ATTEMPTS, broken_connection, retrying


def broken() -> OperationalError:
    return OperationalError("COMMIT", {}, ConnectionResetError("server closed"), connection_invalidated=True)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "BACKOFF_S", 0.0)


def test_a_call_whose_connection_broke_runs_again() -> None:
    calls: list[int] = []

    def write(x: int) -> int:
        calls.append(x)
        if len(calls) < ATTEMPTS:
            raise broken()
        return x * 2

    assert retrying(write, 21) == 42
    assert calls == [21] * ATTEMPTS


def test_it_gives_up_after_the_last_attempt() -> None:
    calls = []

    def write() -> None:
        calls.append(1)
        raise broken()

    with pytest.raises(OperationalError):
        retrying(write)
    assert len(calls) == ATTEMPTS


def test_other_store_errors_are_not_retried() -> None:
    calls = []
    locked = OperationalError("BEGIN", {}, Exception("database is locked"))

    def write() -> None:
        calls.append(1)
        raise locked

    with pytest.raises(OperationalError):
        retrying(write)
    assert calls == [1] and not broken_connection(locked)
    assert not broken_connection(IntegrityError("INSERT", {}, Exception("duplicate")))
