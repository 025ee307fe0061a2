"""Admin's tenancy calls, whatever the transport (the Admin servicer and the HTTP app's
/v1/admin/{Method}): tenants, their keys, the record of changes, prices, the usage export of every
tenant, and the fleet's generations by state. Each takes the request message and who makes it
(recorded with the change) and answers the response message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from billing.prices import Rates
from control import api_keys, tenants
from control.errors import InvalidSetting
from control.generations import generations_by_state
from control.states import GenerationState
from control.tenant_changes import list_changes
from datastore.store import Store
from frontend.accounts.messages import (
    duration,
    export_window,
    key_message,
    key_settings,
    price_message,
    read_time,
    tenant_message,
    tenant_settings,
    timestamp,
    usage_record,
)
from frontend.accounts.tenant_calls import Reload
from lifecycle.accounts import key_accounts, prices, set_price, tenant_accounts
from lifecycle.usage_export import UsageRow, usage_export
from llm.v1 import account_pb2, admin_pb2, generations_pb2, usage_pb2

T = TypeVar("T")
LIVE = frozenset({GenerationState.QUEUED, GenerationState.RUNNING})
LIMIT_FIELDS = ("input_tokens_per_minute", "output_tokens_per_minute", "monthly_budget_micros")


class TenancyCalls:
    def __init__(
        self,
        store: Store,
        reload: Reload,
        rotation_overlap_s: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """rotation_overlap_s: how long a rotated key's old secret works when the call names none."""
        self.store = store
        self.reload = reload
        self.rotation_overlap = timedelta(seconds=rotation_overlap_s)
        self.clock = clock

    async def _write(self, change: Callable[[Session, datetime], T]) -> T:
        """Runs `change` in one transaction, then reloads this frontend's caches."""

        def run() -> T:
            with self.store.transaction() as s:
                return change(s, self.clock())

        answer = await asyncio.to_thread(run)
        await self.reload()
        return answer

    async def _tenant(self, tenant_id: str) -> account_pb2.Tenant:
        (account,) = await asyncio.to_thread(
            tenant_accounts, self.store, now=self.clock(), tenant_id=tenant_id
        )
        return tenant_message(account.tenant, account.month)

    # --- tenants ------------------------------------------------------------------------------

    async def create_tenant(self, request: admin_pb2.CreateTenantRequest, actor: str) -> account_pb2.Tenant:
        settings = tenant_settings(request.settings)
        await self._write(
            lambda s, now: tenants.create_tenant(s, request.tenant_id, settings, actor=actor, now=now)
        )
        return await self._tenant(request.tenant_id)

    async def update_tenant(self, request: admin_pb2.UpdateTenantRequest, actor: str) -> account_pb2.Tenant:
        given = {
            f: getattr(request, f)
            for f in (
                "weight",
                "max_concurrent_generations",
                "input_tokens_per_minute",
                "output_tokens_per_minute",
                "max_queued_tokens",
                "monthly_budget_micros",
            )
            if request.HasField(f)
        }
        clear = {"monthly_budget_micros"} if request.no_monthly_budget else set()
        models = None
        if request.HasField("allowed_models"):
            models = tuple(request.allowed_models.aliases)
            clear |= set() if models else {"allowed_models"}
        changes = tenants.TenantUpdate(**given, allowed_models=models or None, clear=frozenset(clear))

        def update(s: Session, now: datetime) -> None:
            if given or clear or models:
                tenants.update_tenant(s, request.tenant_id, changes, actor=actor, now=now)
            if request.HasField("disabled"):
                tenants.set_tenant_disabled(s, request.tenant_id, request.disabled, actor=actor, now=now)
            tenants.get_tenant(s, request.tenant_id)  # an unknown tenant is NOT_FOUND, even with nothing set

        await self._write(update)
        return await self._tenant(request.tenant_id)

    async def list_tenants(
        self, request: admin_pb2.ListTenantsRequest, actor: str
    ) -> admin_pb2.ListTenantsResponse:
        accounts = await asyncio.to_thread(tenant_accounts, self.store, now=self.clock())
        return admin_pb2.ListTenantsResponse(tenants=[tenant_message(a.tenant, a.month) for a in accounts])

    async def list_changes(
        self, request: admin_pb2.ListTenantChangesRequest, actor: str
    ) -> admin_pb2.ListTenantChangesResponse:
        def read() -> admin_pb2.ListTenantChangesResponse:
            with self.store.transaction() as s:
                changes = list_changes(s, tenant_id=request.tenant_id, limit=min(request.limit or 100, 1000))
            return admin_pb2.ListTenantChangesResponse(
                changes=[
                    admin_pb2.TenantChange(
                        at=timestamp(c.at),
                        actor=c.actor,
                        action=c.action,
                        tenant=c.tenant_id,
                        key_id=c.key_id or "",
                        detail_json=json.dumps(c.detail, sort_keys=True),
                    )
                    for c in changes
                ]
            )

        return await asyncio.to_thread(read)

    # --- keys ---------------------------------------------------------------------------------

    async def create_key(self, request: admin_pb2.CreateApiKeyRequest, actor: str) -> account_pb2.CreatedKey:
        expires_in = request.expires_in if request.HasField("expires_in") else None
        settings = key_settings(request.settings, expires_in, now=self.clock())
        created = await self._write(
            lambda s, now: api_keys.create_key(s, request.tenant_id, settings, actor=actor, now=now)
        )
        return account_pb2.CreatedKey(key=key_message(created.key), secret=created.secret)

    async def list_keys(
        self, request: admin_pb2.ListApiKeysRequest, actor: str
    ) -> account_pb2.ListKeysResponse:
        keys = await asyncio.to_thread(key_accounts, self.store, request.tenant_id, now=self.clock())
        return account_pb2.ListKeysResponse(keys=[key_message(k.key, k.month) for k in keys])

    async def update_key(self, request: admin_pb2.UpdateApiKeyRequest, actor: str) -> account_pb2.ApiKey:
        given = {f: getattr(request, f) for f in ("name", *LIMIT_FIELDS) if request.HasField(f)}
        clear = frozenset(request.clear)
        if not clear <= set(LIMIT_FIELDS):
            raise InvalidSetting("clear", f"names some of {', '.join(LIMIT_FIELDS)}")
        changes = api_keys.KeyUpdate(**given, scopes=tuple(request.scopes) or None, clear=clear)
        view = await self._write(
            lambda s, now: api_keys.update_key(s, request.key_id, changes, actor=actor, now=now)
        )
        return key_message(view)

    async def revoke_key(self, request: admin_pb2.RevokeApiKeyRequest, actor: str) -> account_pb2.ApiKey:
        view = await self._write(lambda s, now: api_keys.revoke_key(s, request.key_id, actor=actor, now=now))
        return key_message(view)

    async def rotate_key(self, request: admin_pb2.RotateApiKeyRequest, actor: str) -> account_pb2.CreatedKey:
        try:
            overlap = duration(request.overlap) if request.HasField("overlap") else self.rotation_overlap
        except OverflowError as e:
            raise InvalidSetting("overlap", "out of range") from e
        created = await self._write(
            lambda s, now: api_keys.rotate_key(s, request.key_id, overlap=overlap, actor=actor, now=now)
        )
        return account_pb2.CreatedKey(key=key_message(created.key), secret=created.secret)

    # --- prices, usage, generations --------------------------------------------------------

    async def set_price(
        self, request: admin_pb2.SetModelPriceRequest, actor: str
    ) -> admin_pb2.SetModelPriceResponse:
        rates = Rates(request.input_per_mtok, request.cached_input_per_mtok, request.output_per_mtok)
        now = self.clock()
        effective_at = read_time(request, "effective_at") or now
        recorded = await asyncio.to_thread(
            set_price, self.store, request.model, rates, effective_at=effective_at, actor=actor, now=now
        )
        return admin_pb2.SetModelPriceResponse(prices=[price_message(p) for p in recorded])

    async def list_prices(
        self, request: admin_pb2.ListModelPricesRequest, actor: str
    ) -> admin_pb2.ListModelPricesResponse:
        recorded = await asyncio.to_thread(prices, self.store, request.model_version)
        return admin_pb2.ListModelPricesResponse(prices=[price_message(p) for p in recorded])

    async def export_records(self, request: usage_pb2.ExportUsageRequest) -> list[dict[str, Any]]:
        """The rows as the export's file formats take them (contracts/usage_format.py)."""
        return [usage_record(r) for r in await self.export_rows(request)]

    async def export_rows(self, request: usage_pb2.ExportUsageRequest) -> list[UsageRow]:
        """Every tenant's sealed usage rows (or the one named)."""
        start, end, bucket = export_window(request, now=self.clock())
        return await asyncio.to_thread(
            usage_export, self.store, start=start, end=end, tenant_id=request.tenant, bucket=bucket
        )

    async def list_generations(
        self, request: admin_pb2.ListGenerationsRequest, actor: str
    ) -> admin_pb2.ListGenerationsResponse:
        names = generations_pb2.Generation.State
        known = {names.Value(str(state)): state for state in GenerationState}
        if any(s not in known for s in request.states):
            raise InvalidSetting("states", f"some of {', '.join(GenerationState)}")
        asked = frozenset(known[s] for s in request.states) or LIVE
        limit = min(request.limit or 100, 1000)

        def read() -> admin_pb2.ListGenerationsResponse:
            with self.store.transaction() as s:
                found = generations_by_state(s, asked, tenant_id=request.tenant_id, limit=limit)
                return admin_pb2.ListGenerationsResponse(
                    counts={str(state): n for state, n in found.counts.items()},
                    generations=[
                        admin_pb2.GenerationSummary(
                            generation_id=g.id,
                            tenant=g.tenant_id,
                            api_key_id=g.api_key_id or "",
                            model_version=g.model_version_id,
                            state=names.Value(str(g.state)),
                            created_at=timestamp(g.created_at),
                            owner_frontend=g.owner_frontend_id or "",
                            reserved_tokens=g.reserved_tokens,
                        )
                        for g in found.newest
                    ],
                )

        return await asyncio.to_thread(read)
