"""A bounded chaos run in `make test` (bench/chaos.py; `make soak` runs it for longer): mixed load on
the real platform while the worker's stub is killed and stopped, tritonserver is killed and the
store's write lock is held, clients cancelling and disconnecting at random; then the invariants:
nothing left QUEUED or RUNNING, every bill sealed and equal to its final `finished`, every stream
ended with `finished` or a status with a reason, every refused request id usable, every KV block
free. It lasts LOAD_S and on until each kind of fault was injected and recovered from: waits on
conditions, never a timing guess."""

from __future__ import annotations

import os

from bench.chaos import FAULTS, chaos, report

LOAD_S = 20.0  # and on until every kind of fault was injected and recovered from: a few minutes


async def test_the_platform_keeps_its_invariants_under_faults_and_load() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as tests/e2e/conftest.py says why
    books, used = await chaos(LOAD_S, concurrency=3, seed=49)
    assert report(books, used), books.problems
    assert set(books.faults) == set(FAULTS), books.faults  # every kind of fault was injected
    assert books.statuses["finished"] > 0 and books.requests
