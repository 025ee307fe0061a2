"""Admission as one transaction: create-or-get the generation, reserve its tenant's budget, and start
its first attempt. A refusal at any step (request id conflict, quota, the caller's own refusal)
rolls all of it back: no generation, no reservation, no attempt."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from billing.ledger import Charge, reserve
from control.attempts import Lease
from control.errors import ApiKeyNotValid, TenantDisabled
from control.generations import NewGeneration, existing_generation, insert_generation
from control.model_versions import require_servable
from control.states import GenerationState
from datastore.store import Store
from lifecycle.attempts import Dispatch, begin_attempt
from lifecycle.terms import read_terms


@dataclass(slots=True, frozen=True)
class Admission:
    generation_id: str
    request_id: str
    state: GenerationState  # as recorded when admission committed
    created: bool  # False: the request id names an existing generation (same payload); nothing new
    lease: Lease | None  # the first attempt's; None unless created and dispatched


def admit(
    store: Store,
    new: NewGeneration,
    *,
    now: datetime,
    dispatch: Dispatch | None = None,
    refusal: Exception | None = None,
) -> Admission:
    """Records `new` (or finds the generation its request id already names) and, if it is new,
    reserves its tenant's budget and starts its first attempt on `dispatch` (None: it stays QUEUED).

    `refusal`, when given, is raised once the tenant's quotas have passed (so a quota refusal wins)
    and before the attempt starts; like every error here it leaves nothing recorded. Raises control's
    `RequestIdConflict`, `VersionNotServable` (a retiring version), `TenantDisabled` and
    `ApiKeyNotValid` (the admitting key revoked or expired), and billing's `QuotaExceeded` and
    `BudgetExceeded`. The generation is billed at the price in effect now, pinned on its reservation.
    """
    with store.transaction() as session:
        if not insert_generation(session, new, now=now):
            generation = existing_generation(session, new)
            return Admission(generation.id, generation.request_id, generation.state, False, None)
        terms = read_terms(session, new.tenant_id, new.api_key_id, new.model_version_id, now=now)
        if terms is None:
            raise LookupError(f"unknown tenant {new.tenant_id}")
        if terms.disabled:
            raise TenantDisabled(new.tenant_id)
        if not terms.key_valid:
            raise ApiKeyNotValid(new.api_key_id or "")
        require_servable(session, new.model_version_id)
        tokens = (new.reserved_input_tokens, new.reserved_output_tokens)
        charge = Charge(new.generation_id, new.tenant_id, *tokens, key_id=new.api_key_id, rates=terms.rates)
        reserve(session, charge, terms.limits, key_limits=terms.key_limits, now=now, created_here=True)
        if refusal is not None:
            raise refusal
        if dispatch is None:
            return Admission(new.generation_id, new.request_id, GenerationState.QUEUED, True, None)
        lease = begin_attempt(session, new.generation_id, dispatch, now=now)
        return Admission(new.generation_id, new.request_id, GenerationState.RUNNING, True, lease)
