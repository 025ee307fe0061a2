"""The dispatcher over fake worker clients: room estimates, fair waiting, refusal fallback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable

import grpc
import pytest

from contracts.tier import BATCH, INTERACTIVE
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.fair_queue import Ticket
from frontend.dispatch.worker_client import (
    WorkerCapacityError,
    WorkerChunk,
    WorkerDown,
    WorkerLost,
    WorkerRequest,
)
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from tests.refusals import refused

V = "m@1"
ACK = WorkerChunk([], 3, 0)


class FakeClient:
    """Admits (yields an admission chunk, then waits for release) or refuses every request."""

    def __init__(self, refuse: type[Exception] | None = None) -> None:
        self.refuse = refuse
        self.seen: list[str] = []

    async def generate(self, req: WorkerRequest) -> AsyncGenerator[WorkerChunk, None]:
        self.seen.append(req.generation_id)
        if self.refuse is not None:
            raise self.refuse("no")
        yield ACK
        await asyncio.Event().wait()  # runs until the dispatcher closes the stream


def pool_of(**workers: tuple[FakeClient, int]) -> WorkerPool:
    pool = WorkerPool()
    for wid, (client, blocks) in workers.items():
        pool.add(WorkerHandle(wid, wid, client, capacity={V: blocks}))  # type: ignore[arg-type]
    return pool


def ticket(gid: str, tenant: str = "A", blocks: int = 10) -> Ticket:
    return Ticket(gid, tenant, 1.0, INTERACTIVE, 100, blocks)


def request(gid: str) -> Callable[[], WorkerRequest]:
    """What dispatch() sends, built once a worker has room."""
    return lambda: WorkerRequest(
        model="m", prompt_ids=(1, 2, 3), max_output_tokens=4, end_id=0, generation_id=gid
    )


async def test_routes_to_the_worker_with_most_free_blocks_and_releases_on_exit() -> None:
    pool = pool_of(w1=(FakeClient(), 30), w2=(FakeClient(), 50))
    d = Dispatcher(pool)
    async with d.dispatch(ticket("g1", blocks=25), request("g1"), V) as got:
        assert got.worker.worker_id == "w2" and got.first == ACK
        assert pool.workers["w2"].free_blocks(V) == 25
        async with d.dispatch(ticket("g2", blocks=25), request("g2"), V) as second:
            assert second.worker.worker_id == "w1"
    assert [w.free_blocks(V) for w in pool.workers.values()] == [30, 50]
    assert [w.active for w in pool.workers.values()] == [0, 0]


async def test_a_refusal_moves_on_to_the_next_worker() -> None:
    full, ok = FakeClient(refuse=WorkerCapacityError), FakeClient()
    pool = pool_of(w1=(full, 100), w2=(ok, 50))
    async with Dispatcher(pool).dispatch(ticket("g"), request("g"), V) as got:
        assert got.worker.worker_id == "w2"
    assert full.seen == ["g"] and ok.seen == ["g"]


async def test_every_worker_refusing_is_unavailable_worker_capacity() -> None:
    pool = pool_of(w1=(FakeClient(refuse=WorkerCapacityError), 100), w2=(FakeClient(refuse=WorkerLost), 50))
    with refused() as e:
        async with Dispatcher(pool).dispatch(ticket("g"), request("g"), V):
            pass
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert [w.reserved[V] for w in pool.workers.values()] == [0, 0]


async def test_a_worker_whose_stub_died_is_passed_over_and_alone_it_is_unavailable_with_a_retry() -> None:
    """Triton's answer for a dead stub is the worker's loss, not the request's fault: the next
    worker takes it, and with none left the client gets UNAVAILABLE with a retry delay, its message
    naming no internal process."""
    down = FakeClient(refuse=WorkerDown)
    pool = pool_of(w1=(down, 100), w2=(FakeClient(), 50))
    async with Dispatcher(pool).dispatch(ticket("g"), request("g"), V) as got:
        assert got.worker.worker_id == "w2" and down.seen == ["g"]
    pool = pool_of(w1=(FakeClient(refuse=WorkerDown), 100))
    with refused() as e:
        async with Dispatcher(pool).dispatch(ticket("g"), request("g"), V):
            pass
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.UNAVAILABLE, "WORKER_UNAVAILABLE")
    assert e.value.retry_after_s is not None and e.value.retry_after_s > 0
    assert "stub" not in str(e.value).lower()
    assert pool.workers["w1"].reserved[V] == 0


class RefusesOnce(FakeClient):
    """Refuses for memory the first time (a cancelled sequence's blocks not yet freed), then admits."""

    async def generate(self, req: WorkerRequest) -> AsyncGenerator[WorkerChunk, None]:
        self.seen.append(req.generation_id)
        if len(self.seen) == 1:
            raise WorkerCapacityError("capacity: 99 unreserved")
        yield ACK
        await asyncio.Event().wait()


async def test_a_memory_refusal_by_every_worker_waits_and_tries_again_within_the_allowance() -> None:
    client = RefusesOnce()
    pool = pool_of(w1=(client, 100))
    assigned: list[str] = []

    async def on_assigned() -> None:
        assigned.append("attempt")

    d = Dispatcher(pool, queue_wait_s={INTERACTIVE: 30.0})
    async with d.dispatch(ticket("g"), request("g"), V, on_assigned) as got:
        assert got.worker.worker_id == "w1" and got.first == ACK
    assert client.seen == ["g", "g"]
    assert assigned == ["attempt"]  # one attempt, sent twice
    assert pool.workers["w1"].free_blocks(V) == 100


async def test_waits_for_room_in_fair_order() -> None:
    pool = pool_of(w1=(FakeClient(), 10))
    d = Dispatcher(pool, queue_wait_s={INTERACTIVE: 5.0})
    order: list[str] = []

    async def run(gid: str, tenant: str, hold: asyncio.Event) -> None:
        async with d.dispatch(ticket(gid, tenant), request(gid), V):
            order.append(gid)
            await hold.wait()

    release = {g: asyncio.Event() for g in ("a0", "a1", "a2", "b0")}
    tasks = [asyncio.create_task(run("a0", "A", release["a0"]))]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(run(g, t, release[g])) for g, t in (("a1", "A"), ("a2", "A"), ("b0", "B"))]
    await asyncio.sleep(0.05)
    assert order == ["a0"]  # one at a time: each takes the whole pool
    for n in range(1, 4):
        release[order[-1]].set()
        while len(order) == n:
            await asyncio.sleep(0.01)
    assert order == ["a0", "b0", "a1", "a2"]  # B's ticket overtakes A's backlog
    release["a2"].set()
    await asyncio.gather(*tasks)


async def test_queue_wait_beyond_the_allowance_is_unavailable() -> None:
    pool = pool_of(w1=(FakeClient(), 10))
    d = Dispatcher(pool, queue_wait_s={INTERACTIVE: 0.1})
    async with d.dispatch(ticket("hog"), request("hog"), V):
        with refused() as e:
            async with d.dispatch(ticket("late"), request("late"), V):
                pass
    assert e.value.reason == "WORKER_CAPACITY" and e.value.retry_after_s is not None
    assert len(d._queue) == 0 and pool.workers["w1"].free_blocks(V) == 10


async def test_drained_or_unhealthy_workers_take_nothing() -> None:
    pool = pool_of(w1=(FakeClient(), 10))
    pool.workers["w1"].draining = True
    with refused() as e:
        async with Dispatcher(pool).dispatch(ticket("g"), request("g"), V):
            pass
    assert e.value.reason == "NO_WORKER"


def test_queue_deadline_refuses_interactive_but_not_batch() -> None:
    d = Dispatcher(pool_of(w1=(FakeClient(), 10)), queue_wait_s={INTERACTIVE: 1.0, BATCH: 600.0})
    d.predictor.prior_tokens_per_s = 100.0
    d.predictor.add(Ticket("x", "A", 1.0, INTERACTIVE, 500, 1), now=0.0)
    with refused() as e:
        d.check_deadline(Ticket("y", "A", 1.0, INTERACTIVE, 100, 1))
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.reason == "QUEUE_DEADLINE"
    assert e.value.retry_after_s == pytest.approx(4.0)
    d.check_deadline(Ticket("z", "A", 1.0, BATCH, 100, 1))  # the batch tier waits up to 600 s
    d.check_deadline(Ticket("w", "B", 1.0, INTERACTIVE, 50, 1))  # another tenant: fair share only


async def test_a_ticket_too_big_for_the_room_left_does_not_hold_back_smaller_ones() -> None:
    pool = pool_of(w1=(FakeClient(), 10))
    d = Dispatcher(pool, queue_wait_s={INTERACTIVE: 5.0})
    async with d.dispatch(ticket("hog", blocks=6), request("hog"), V):
        big_cm = d.dispatch(ticket("big", blocks=8), request("big"), V)
        big = asyncio.create_task(big_cm.__aenter__())
        await asyncio.sleep(0.01)
        async with d.dispatch(ticket("small", "B", blocks=4), request("small"), V) as got:
            assert got.worker.worker_id == "w1" and not big.done()
    got_big = await big  # room freed: the big ticket goes next
    assert got_big.worker.worker_id == "w1"
    await big_cm.__aexit__(None, None, None)
    assert pool.workers["w1"].free_blocks(V) == 10


async def test_one_tenant_holds_at_most_its_share_of_a_workers_pool() -> None:
    pool = pool_of(w1=(FakeClient(), 100))
    pool.tenant_share = 0.5  # with two tenants or more (frontend/catalog/cache.py)
    d = Dispatcher(pool, queue_wait_s={INTERACTIVE: 0.2})
    async with d.dispatch(ticket("a1", "A", blocks=40), request("a1"), V):
        with refused() as e:  # 40 + 20 > A's 50: it waits, then is refused
            async with d.dispatch(ticket("a2", "A", blocks=20), request("a2"), V):
                pass
        assert e.value.reason == "WORKER_CAPACITY"
        async with d.dispatch(ticket("b1", "B", blocks=20), request("b1"), V) as got:  # B's room is kept
            assert got.worker.worker_id == "w1"
    with refused() as e:
        async with d.dispatch(ticket("big", "A", blocks=60), request("big"), V):
            pass
    assert e.value.reason == "TENANT_KV_SHARE"
    assert pool.workers["w1"].by_tenant == {(V, "A"): 0, (V, "B"): 0}


async def test_a_lost_stream_holds_the_worker_back_only_in_a_pool_that_holds_suspects() -> None:
    """A fleet pool (the registry's) holds back a worker whose stream broke at dispatch until its
    next heartbeat; `make serve`'s local pool leaves its own workers to the supervisor."""
    for holds in (False, True):
        dead, ok = FakeClient(refuse=WorkerLost), FakeClient()
        pool = pool_of(w1=(dead, 100), w2=(ok, 50))
        pool.holds_suspects = holds
        async with Dispatcher(pool).dispatch(ticket("g"), request("g"), V) as got:
            assert got.worker.worker_id == "w2"
        assert (pool.workers["w1"].suspect_since is not None) is holds
        assert [w.worker_id for w in pool.routable(V)] == (["w2"] if holds else ["w1", "w2"])


async def test_a_generation_on_its_way_to_the_queue_already_has_its_place() -> None:
    """Admission records it QUEUED before its run reaches dispatch(): GetGeneration must not
    answer position 0 (not queued here) in between."""
    d = Dispatcher(pool_of(w1=(FakeClient(), 10)), queue_wait_s={INTERACTIVE: 30.0})
    hold = asyncio.Event()

    async def run(gid: str) -> None:
        async with d.dispatch(ticket(gid, "A"), request(gid), V):
            await hold.wait()

    first = asyncio.create_task(run("a0"))  # takes the whole pool
    while d.pool.workers["w1"].free_blocks(V):
        await asyncio.sleep(0.01)
    d.arriving(ticket("a1", "A"))
    assert (d.queued("a1") or (0, 0.0))[0] == 1  # nothing waits ahead of it
    second = asyncio.create_task(run("a1"))
    while not len(d._queue):
        await asyncio.sleep(0.01)
    d.arriving(ticket("b0", "B"))  # B has run nothing: it would stand before A's second
    assert (d.queued("b0") or (0, 0.0))[0] == 1 and (d.queued("a1") or (0, 0.0))[0] == 1
    d.arrived("b0")  # refused, say: no longer anywhere
    assert d.queued("b0") is None
    hold.set()
    await asyncio.gather(first, second)
    assert d.queued("a1") is None  # it joined the queue, ran and left: nothing is kept


async def test_a_generation_handed_room_is_next_until_its_attempt_has_started() -> None:
    """Between leaving the queue and its attempt's start (QUEUED -> RUNNING, on_assigned), the
    generation is still QUEUED in the store: GetGeneration must answer it next, not position 0."""
    d = Dispatcher(pool_of(w1=(FakeClient(), 10)))
    seen: list[tuple[int, float] | None] = []

    async def starting() -> None:
        seen.append(d.queued("g"))

    async with d.dispatch(ticket("g"), request("g"), V, starting):
        assert d.queued("g") is None  # its attempt started: it is running, not queued
    assert seen == [(1, 0.0)]
