from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import func, select

from control.errors import GenerationNotFound, RequestIdConflict
from control.generations import (
    CreateOrGet,
    NewGeneration,
    create_or_get_generation,
    find_by_request_id,
    get_generation,
)
from control.models import Generation
from control.states import GenerationState
from datastore.store import Store
from tests.builders import T0, VERSION_ID, at, new_generation, seed, sha, tenant_spec


def count_generations(store: Store) -> int:
    with store.transaction() as session:
        return session.scalar(select(func.count()).select_from(Generation)) or 0


def test_a_new_request_id_creates_a_queued_generation(store: Store) -> None:
    seed(store)
    with store.transaction() as session:
        result = create_or_get_generation(session, new_generation("r1", generation_id="g1"), now=T0)
    g = result.generation
    assert result.created is True
    assert (g.id, g.tenant_id, g.request_id, g.model_version_id) == ("g1", "acme", "r1", VERSION_ID)
    assert (g.state, g.current_epoch, g.cancel_requested, g.terminal_reason) == (
        GenerationState.QUEUED,
        None,
        False,
        None,
    )
    assert (g.payload_sha256, g.reserved_input_tokens, g.reserved_output_tokens) == (sha("p1"), 50, 200)
    assert (g.created_at, g.updated_at, g.finished_at) == (T0, T0, None)


def test_a_retry_with_the_same_payload_gets_the_existing_generation(store: Store) -> None:
    seed(store)
    with store.transaction() as session:
        create_or_get_generation(session, new_generation("r1", generation_id="g1"), now=T0)
    with store.transaction() as session:
        retry = create_or_get_generation(session, new_generation("r1", generation_id="g2"), now=at(5))
    assert (retry.created, retry.generation.id, retry.generation.created_at) == (False, "g1", T0)
    assert count_generations(store) == 1


def test_a_different_payload_under_the_same_request_id_conflicts(store: Store) -> None:
    seed(store)
    with store.transaction() as session:
        create_or_get_generation(session, new_generation("r1", generation_id="g1"), now=T0)
    with pytest.raises(RequestIdConflict) as e, store.transaction() as session:
        create_or_get_generation(session, new_generation("r1", payload="p2", generation_id="g2"), now=at(1))
    assert (e.value.tenant_id, e.value.request_id, e.value.generation_id) == ("acme", "r1", "g1")
    assert count_generations(store) == 1


def test_request_ids_are_scoped_per_tenant(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    with store.transaction() as session:
        a = create_or_get_generation(session, new_generation("r1", tenant_id="a"), now=T0)
        b = create_or_get_generation(session, new_generation("r1", tenant_id="b", payload="p2"), now=T0)
    assert (a.created, b.created) == (True, True)
    assert a.generation.id != b.generation.id


def test_lookups_are_tenant_scoped(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    with store.transaction() as session:
        create_or_get_generation(session, new_generation("r1", tenant_id="a", generation_id="g1"), now=T0)
    with store.transaction() as session:
        assert get_generation(session, "a", "g1").request_id == "r1"
        with pytest.raises(GenerationNotFound):
            get_generation(session, "b", "g1")
        with pytest.raises(GenerationNotFound):
            get_generation(session, "a", "nope")
        found = find_by_request_id(session, "a", "r1")
        assert found is not None and found.id == "g1"
        assert find_by_request_id(session, "b", "r1") is None


def test_invalid_new_generations_are_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        new_generation(input_tokens=-1)
    with pytest.raises(ValueError, match="non-empty"):
        new_generation("")


Outcome = CreateOrGet | RequestIdConflict


def race(store: Store, first: NewGeneration, second: NewGeneration) -> tuple[Outcome, Outcome]:
    """Two threads, two sessions: `first` inserts and holds its transaction open until `second` has
    started its own create (which must wait for or see the first), then commits."""
    first_inserted, second_started = threading.Event(), threading.Event()
    outcomes: dict[str, Outcome] = {}
    errors: list[BaseException] = []

    def run(name: str, new: NewGeneration, before: Callable[[], None], after: Callable[[], None]) -> None:
        try:
            with store.transaction() as session:
                before()
                try:
                    outcomes[name] = create_or_get_generation(session, new, now=T0)
                except RequestIdConflict as conflict:
                    outcomes[name] = conflict
                after()
        except BaseException as e:
            errors.append(e)

    def hold() -> None:
        first_inserted.set()
        assert second_started.wait(10)
        time.sleep(0.2)  # let the second create reach the database and block on the first

    def announce() -> None:
        assert first_inserted.wait(10)
        second_started.set()

    threads = [
        threading.Thread(target=run, args=("first", first, lambda: None, hold)),
        threading.Thread(target=run, args=("second", second, announce, lambda: None)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    return outcomes["first"], outcomes["second"]


def test_concurrent_creates_with_one_request_id_make_one_generation(store: Store) -> None:
    seed(store)
    first, second = race(
        store, new_generation("r1", generation_id="g1"), new_generation("r1", generation_id="g2")
    )
    assert isinstance(first, CreateOrGet) and isinstance(second, CreateOrGet)
    assert (first.created, first.generation.id) == (True, "g1")
    assert (second.created, second.generation.id) == (False, "g1")
    assert count_generations(store) == 1


def test_concurrent_creates_with_different_payloads_one_succeeds_one_conflicts(store: Store) -> None:
    seed(store)
    first, second = race(
        store,
        new_generation("r1", generation_id="g1"),
        new_generation("r1", payload="p2", generation_id="g2"),
    )
    assert isinstance(first, CreateOrGet) and first.created and first.generation.id == "g1"
    assert isinstance(second, RequestIdConflict) and second.generation_id == "g1"
    assert count_generations(store) == 1


def test_many_concurrent_retries_make_one_generation(store: Store) -> None:
    seed(store)
    start = threading.Barrier(6)
    results: list[CreateOrGet] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            with store.transaction() as session:
                results.append(
                    create_or_get_generation(session, new_generation("r1", generation_id=f"g{i}"), now=T0)
                )
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert sum(r.created for r in results) == 1
    assert len({r.generation.id for r in results}) == 1
    assert count_generations(store) == 1
