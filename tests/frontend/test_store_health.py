"""The store probe: its verdict follows the store, and a flip is announced once."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from sqlalchemy.exc import OperationalError

from datastore.store import Store
from frontend.store_health import StoreProbe
from tests.datastore.stores import migrated, store

__all__ = ["migrated", "store"]  # the store fixtures: both backends


class FlakyStore(Store):
    """A real store whose transactions fail to connect while `down`."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.engine)
        self.down = False

    @contextmanager
    def transaction(self) -> Any:
        if self.down:
            raise OperationalError("BEGIN", {}, ConnectionRefusedError("store down"))
        with super().transaction() as session:
            yield session


async def test_the_probe_follows_the_store_and_announces_each_flip(store: Store) -> None:
    flaky = FlakyStore(store)
    flips: list[bool] = []
    probe = StoreProbe(flaky, interval_s=60, on_change=lambda: flips.append(probe.available))
    assert await probe.check() and probe.available and flips == []
    flaky.down = True
    assert not await probe.check() and not await probe.check()
    flaky.down = False
    assert await probe.check()
    assert flips == [False, True]
