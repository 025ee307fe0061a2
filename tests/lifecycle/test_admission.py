"""Admission is one transaction over control and billing: all of it is recorded, or none of it."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from billing.errors import QuotaExceeded, QuotaKind
from billing.ledger import RateUsage, TenantLoad, rate_usage, tenant_load
from billing.models import Reservation, Watermark
from billing.usage import UsageCounts, read_watermark
from control.attempts import Lease
from control.errors import RequestIdConflict, VersionNotServable
from control.model_versions import set_version_status
from control.models import Attempt, Generation, ModelVersionStatus
from control.states import GenerationState
from datastore.retry import retrying
from datastore.store import Store
from lifecycle.admission import Admission, admit
from tests.builders import T0, TENANT, VERSION_ID, at, new_generation, on, race_admissions, seed, tenant_spec

S = GenerationState


class TooLate(Exception):
    """A refusal the caller decided before admission (the frontend's queue deadline)."""


def counts(store: Store) -> dict[str, int]:
    """Rows on each side: control's generations and attempts, billing's reservations and watermarks."""
    with store.transaction() as session:
        return {
            model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
            for model in (Generation, Attempt, Reservation, Watermark)
        }


def ledger(store: Store) -> tuple[TenantLoad, RateUsage]:
    with store.transaction() as session:
        return tenant_load(session, TENANT), rate_usage(session, TENANT, now=T0)


NOTHING = {"generations": 0, "attempts": 0, "reservations": 0, "usage_watermarks": 0}


def test_a_new_request_is_recorded_reserved_and_started_at_once(store: Store) -> None:
    seed(store)
    new = new_generation("r1")
    admission = admit(store, new, now=T0, dispatch=on("w1"))
    lease = Lease(new.generation_id, 1, "w1", at(30))
    assert admission == Admission(new.generation_id, "r1", S.RUNNING, created=True, lease=lease)
    assert counts(store) == {"generations": 1, "attempts": 1, "reservations": 1, "usage_watermarks": 1}
    assert ledger(store) == (TenantLoad(1, 250), RateUsage(T0, 50, 200))
    with store.transaction() as session:
        view = read_watermark(session, new.generation_id, 1)
    assert view is not None and (view.billable, view.sealed) == (UsageCounts(), False)


def test_without_a_dispatch_it_stays_queued_and_reserved(store: Store) -> None:
    seed(store)
    admission = admit(store, new_generation("r1"), now=T0)
    assert (admission.state, admission.created, admission.lease) == (S.QUEUED, True, None)
    assert counts(store) == {"generations": 1, "attempts": 0, "reservations": 1, "usage_watermarks": 0}


def test_a_retry_gets_the_same_generation_and_charges_nothing_more(store: Store) -> None:
    seed(store)
    first = admit(store, new_generation("r1"), now=T0, dispatch=on())
    again = admit(store, new_generation("r1", generation_id="g-other"), now=at(1), dispatch=on())
    assert again == Admission(first.generation_id, "r1", S.RUNNING, created=False, lease=None)
    assert counts(store) == {"generations": 1, "attempts": 1, "reservations": 1, "usage_watermarks": 1}
    assert ledger(store)[0] == TenantLoad(1, 250)


def test_a_request_id_conflict_records_nothing_new(store: Store) -> None:
    seed(store)
    admit(store, new_generation("r1"), now=T0, dispatch=on())
    with pytest.raises(RequestIdConflict):
        admit(store, new_generation("r1", payload="other"), now=at(1), dispatch=on())
    assert counts(store) == {"generations": 1, "attempts": 1, "reservations": 1, "usage_watermarks": 1}


def test_a_quota_refusal_rolls_back_both_sides(store: Store) -> None:
    seed(store, tenant_spec(max_queued_tokens=100))
    with pytest.raises(QuotaExceeded) as e:
        admit(store, new_generation("r1", input_tokens=50, output_tokens=200), now=T0, dispatch=on())
    assert (e.value.kind, e.value.limit, e.value.requested) == (QuotaKind.QUEUED_TOKENS, 100, 250)
    assert counts(store) == NOTHING
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))


def test_the_tenants_stored_quotas_are_the_ones_applied(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=1))
    admit(store, new_generation("r1"), now=T0)
    with pytest.raises(QuotaExceeded) as e:
        admit(store, new_generation("r2"), now=T0)
    assert (e.value.kind, e.value.limit, e.value.in_use) == (QuotaKind.CONCURRENT_GENERATIONS, 1, 1)


def test_the_callers_refusal_comes_after_the_quotas_and_records_nothing(store: Store) -> None:
    seed(store, tenant_spec(max_queued_tokens=100))
    with pytest.raises(QuotaExceeded):  # over quota and late: the quota refusal wins
        admit(store, new_generation("r1"), now=T0, dispatch=on(), refusal=TooLate())
    with pytest.raises(TooLate):
        admit(store, new_generation("r2", output_tokens=10), now=T0, dispatch=on(), refusal=TooLate())
    assert counts(store) == NOTHING
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))


def test_an_admission_retried_after_its_commit_finds_itself_and_reserves_once(store: Store) -> None:
    """A failover breaks the connection after COMMIT: the retry (datastore/retry.py) must not admit
    twice. It finds the generation by request id with the id it was given itself, which is how the
    frontend tells its own first try from another request's (frontend/generations/manager.py)."""
    seed(store)
    new = new_generation("r1")
    broke: list[bool] = []

    def admit_then_lose_the_answer() -> Admission:
        admission = admit(store, new, now=T0)
        if not broke:
            broke.append(True)
            raise OperationalError("COMMIT", {}, ConnectionResetError("reset"), connection_invalidated=True)
        return admission

    again = retrying(admit_then_lose_the_answer)
    assert (again.created, again.generation_id, again.state) == (False, new.generation_id, S.QUEUED)
    assert counts(store) == {"generations": 1, "attempts": 0, "reservations": 1, "usage_watermarks": 0}
    assert ledger(store)[0] == TenantLoad(1, 250)  # reserved once


@pytest.mark.parametrize("status", [ModelVersionStatus.DRAINING, ModelVersionStatus.RETIRED])
def test_a_retiring_version_takes_no_new_generation_and_nothing_is_recorded(
    store: Store, status: ModelVersionStatus
) -> None:
    seed(store)
    with store.transaction() as session:
        set_version_status(session, VERSION_ID, ModelVersionStatus.DRAINING, now=T0)
        set_version_status(session, VERSION_ID, status, now=T0)
    with pytest.raises(VersionNotServable) as refused:
        admit(store, new_generation("r1"), now=T0, dispatch=on("w1"))
    assert (refused.value.version_id, refused.value.status) == (VERSION_ID, str(status))
    assert counts(store) == NOTHING
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))


@pytest.mark.parametrize("rows", ["created by the race", "there already"])
def test_concurrent_admissions_never_overshoot_a_quota(store: Store, rows: str) -> None:
    """Admission charges the tenant's ledger and rate window by conditional UPDATEs and creates
    their rows only when an UPDATE matched nothing: six at once, three allowed, whether the rows
    exist or the racers create them (PostgreSQL: READ COMMITTED, real concurrency)."""
    seed(store, tenant_spec(max_concurrent_generations=3))
    if rows == "there already":
        admit(store, new_generation("first"), now=T0)
    before, _ = ledger(store)
    outcomes = race_admissions(6, lambda i: retrying(admit, store, new_generation(f"race-{i}"), now=T0))
    allowed = 3 - before.active_generations
    assert outcomes == ["CONCURRENT_GENERATIONS"] * (6 - allowed) + ["admitted"] * allowed
    load, rate = ledger(store)
    assert load == TenantLoad(3, 3 * 250)
    assert (rate.input_tokens, rate.output_tokens) == (3 * 50, 3 * 200)
    assert counts(store)["reservations"] == 3
