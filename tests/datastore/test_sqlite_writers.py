"""SQLite's writers in one process take turns on the engine's lock (datastore/store.py `_Writers`),
held from BEGIN to the end of COMMIT or ROLLBACK: every transaction commits, whatever way one ends
the lock passes on, and one that waits past the store's timeout fails as a busy database does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from datastore.store import Store, open_store

T = TypeVar("T")


def sqlite_store(tmp_path: Path, timeout_s: float) -> Store:
    store = open_store(f"sqlite:///{tmp_path / 'writers.sqlite'}", timeout_s=timeout_s)
    with store.transaction() as session:
        session.execute(text("CREATE TABLE counter (n INTEGER NOT NULL)"))
        session.execute(text("INSERT INTO counter (n) VALUES (0)"))
    return store


def in_thread(call: Callable[[], T]) -> T:
    """call() on another thread (a lock still held by this one's last transaction would block it)."""
    out: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as e:  # handed back to the test's thread
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


def increment(store: Store) -> int:
    with store.transaction() as session:
        n = int(session.execute(text("SELECT n FROM counter")).scalar_one())
        session.execute(text("UPDATE counter SET n = :n"), {"n": n + 1})
        return n + 1


def count(store: Store) -> int:
    with store.transaction() as session:
        return int(session.execute(text("SELECT n FROM counter")).scalar_one())


def test_writers_on_many_threads_take_turns_and_every_one_commits(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path, timeout_s=60)
    try:
        threads = [threading.Thread(target=lambda: [increment(store) for _ in range(5)]) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert count(store) == 40  # each read-modify-write alone in its transaction: none lost
    finally:
        store.close()


def test_the_lock_passes_on_after_a_commit_a_rollback_and_a_connection_closed_midway(tmp_path: Path) -> None:
    # a short timeout: a lock left held would fail the next thread's transaction with "locked"
    store = sqlite_store(tmp_path, timeout_s=0.5)
    try:
        assert increment(store) == 1
        assert in_thread(lambda: increment(store)) == 2  # after a commit
        with pytest.raises(RuntimeError, match="abort"), store.transaction() as session:
            session.execute(text("UPDATE counter SET n = 100"))
            raise RuntimeError("abort")
        assert in_thread(lambda: increment(store)) == 3  # after a rollback: the 100 is gone
        with store.engine.connect() as connection:  # begun, then closed without commit or rollback
            connection.exec_driver_sql("UPDATE counter SET n = 200")
        assert in_thread(lambda: increment(store)) == 4
    finally:
        store.close()


def test_a_writer_waiting_past_the_timeout_fails_as_a_busy_store(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path, timeout_s=0.2)
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction() as session:
            session.execute(text("SELECT n FROM counter"))
            held.set()
            done.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(60)
        with pytest.raises(OperationalError, match="database is locked"):
            increment(store)
    finally:
        done.set()
        holder.join()
    try:
        assert in_thread(lambda: increment(store)) == 1  # the holder's end freed it
    finally:
        store.close()


def test_the_lock_passes_on_when_a_connection_is_invalidated_midway(tmp_path: Path) -> None:
    # a dropped connection (SQLAlchemy invalidates one after a disconnect-like error) is closed
    # without COMMIT or ROLLBACK: the pool's invalidate event is what gives its lock back
    store = sqlite_store(tmp_path, timeout_s=0.5)
    try:
        with store.engine.connect() as connection:
            connection.exec_driver_sql("UPDATE counter SET n = 300")
            connection.invalidate()
        assert in_thread(lambda: increment(store)) == 1  # the 300 went with the closed connection
    finally:
        store.close()
