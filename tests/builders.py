"""Small constructors for the store tests (datastore, control, billing, lifecycle). Time is fixed:
`at(seconds)` after T0. Generations are admitted and started through the lifecycle, as the frontend
does, so each has its reservation and each attempt its watermark."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from billing.errors import QuotaExceeded
from config.settings import TenantSpec
from control.attempts import Lease
from control.generations import NewGeneration
from control.model_versions import VersionSpec, register_version, set_version_status
from control.models import ModelVersion, ModelVersionStatus, Tenant
from control.tenants import upsert_tenant
from datastore.store import Store
from lifecycle.admission import admit
from lifecycle.attempts import Dispatch, start_attempt

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)  # aligned to a minute: rate windows start here
LEASE = timedelta(seconds=30)
TENANT = "acme"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def version_spec(name: str = "smollm2-135m", version: str = "v1", weights: str = "w") -> VersionSpec:
    return VersionSpec(
        name=name,
        version=version,
        weights_sha256=sha(weights),
        tokenizer_sha256=sha("tokenizer"),
        template_sha256=sha("template"),
        compatibility_key=sha(f"compat-{weights}")[:32],
        artifact_uri=f"var/models/{name}/{version}",
    )


VERSION_ID = version_spec().version_id


def tenant_spec(
    tenant_id: str = TENANT,
    *,
    max_concurrent_generations: int = 16,
    max_queued_tokens: int = 64_000,
    input_tokens_per_minute: int = 1_000_000,
    output_tokens_per_minute: int = 200_000,
) -> TenantSpec:
    """A tenant with one API key, `key-<id>`."""
    return TenantSpec(
        tenant_id,
        (f"key-{tenant_id}",),
        max_concurrent_generations=max_concurrent_generations,
        max_queued_tokens=max_queued_tokens,
        input_tokens_per_minute=input_tokens_per_minute,
        output_tokens_per_minute=output_tokens_per_minute,
    )


def add_tenant(session: Session, spec: TenantSpec | None = None) -> Tenant:
    return upsert_tenant(session, spec or tenant_spec(), now=T0)


def add_version(session: Session, spec: VersionSpec | None = None, *, ready: bool = True) -> ModelVersion:
    version = register_version(session, spec or version_spec(), now=T0)
    if ready and version.status is not ModelVersionStatus.READY:
        set_version_status(session, version.id, ModelVersionStatus.READY, now=T0)
    return version


def seed(store: Store, *tenants: TenantSpec) -> None:
    """The default model version and the given tenants (default: TENANT with default quotas)."""
    with store.transaction() as session:
        add_version(session)
        for spec in tenants or (tenant_spec(),):
            upsert_tenant(session, spec, now=T0)


def new_generation(
    request_id: str = "r1",
    *,
    payload: str = "p1",
    tenant_id: str = TENANT,
    generation_id: str | None = None,
    input_tokens: int = 50,
    output_tokens: int = 200,
    model_version_id: str = VERSION_ID,
) -> NewGeneration:
    return NewGeneration(
        generation_id=generation_id or f"g-{tenant_id}-{request_id}-{payload}",
        tenant_id=tenant_id,
        request_id=request_id,
        payload_sha256=sha(payload),
        model_version_id=model_version_id,
        reserved_input_tokens=input_tokens,
        reserved_output_tokens=output_tokens,
    )


def on(worker_id: str = "w1") -> Dispatch:
    """A dispatch to `worker_id` with the LEASE."""
    return Dispatch(worker_id, LEASE)


def admitted(
    store: Store,
    request_id: str = "r1",
    *,
    tenant_id: str = TENANT,
    input_tokens: int = 50,
    output_tokens: int = 200,
    now: datetime = T0,
) -> str:
    """A QUEUED, reserved generation; returns its id."""
    new = new_generation(
        request_id, tenant_id=tenant_id, input_tokens=input_tokens, output_tokens=output_tokens
    )
    return admit(store, new, now=now).generation_id


def running(
    store: Store,
    request_id: str = "r1",
    *,
    tenant_id: str = TENANT,
    worker_id: str = "w1",
    input_tokens: int = 50,
    output_tokens: int = 200,
    now: datetime = T0,
) -> Lease:
    """An admitted generation with its first attempt started at `now`."""
    generation_id = admitted(
        store,
        request_id,
        tenant_id=tenant_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        now=now,
    )
    return start_attempt(store, generation_id, on(worker_id), now=now)


def race_admissions(n: int, admit_one: Callable[[int], object]) -> list[str]:
    """Runs `admit_one(i)` for i < n on n threads released at once; each outcome is "admitted" or
    the refused quota's kind, sorted."""
    start = threading.Barrier(n)
    outcomes: list[str] = []

    def run(i: int) -> None:
        start.wait()
        try:
            admit_one(i)
            outcomes.append("admitted")
        except QuotaExceeded as e:
            outcomes.append(str(e.kind))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return sorted(outcomes)
