"""A tenant's own account (the Account service, and the Usage service's export), whatever the
transport: the caller's tenant with its month of spend, its keys (list, create, revoke) and its
usage export. The caller is a key with the `usage` scope (frontend/auth.py checks it); another
tenant's key is NOT_FOUND, as an unknown one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from control.api_keys import create_key, revoke_key
from datastore.store import Store
from frontend.accounts.messages import (
    export_window,
    key_message,
    key_settings,
    tenant_message,
    usage_record,
    usage_row_message,
)
from frontend.auth import Tenant
from frontend.refusals import NotPermitted
from lifecycle.accounts import key_accounts, tenant_accounts
from lifecycle.usage_export import UsageRow, usage_export
from llm.v1 import account_pb2, usage_pb2

Reload = Callable[[], Awaitable[object]]  # reloads this frontend's caches after a write committed


def actor_of(tenant: Tenant) -> str:
    """Who a tenant's change is recorded as: the tenant and the key it used."""
    return f"tenant {tenant.id} (key {tenant.key_id})"


class AccountCalls:
    def __init__(
        self, store: Store, reload: Reload, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ):
        self.store = store
        self.reload = reload
        self.clock = clock

    async def get(self, tenant: Tenant) -> account_pb2.AccountInfo:
        now = self.clock()
        (account,) = await asyncio.to_thread(tenant_accounts, self.store, now=now, tenant_id=tenant.id)
        keys = await asyncio.to_thread(key_accounts, self.store, tenant.id, now=now)
        mine = next((k for k in keys if k.key.id == tenant.key_id), None)
        return account_pb2.AccountInfo(
            tenant=tenant_message(account.tenant, account.month),
            key=key_message(mine.key, mine.month) if mine is not None else None,
        )

    async def list_keys(self, tenant: Tenant) -> account_pb2.ListKeysResponse:
        keys = await asyncio.to_thread(key_accounts, self.store, tenant.id, now=self.clock())
        return account_pb2.ListKeysResponse(keys=[key_message(k.key, k.month) for k in keys])

    async def create_key(
        self, tenant: Tenant, request: account_pb2.CreateKeyRequest
    ) -> account_pb2.CreatedKey:
        now = self.clock()
        expires_in = request.expires_in if request.HasField("expires_in") else None
        settings = key_settings(request.settings, expires_in, now=now)

        def create() -> account_pb2.CreatedKey:
            with self.store.transaction() as s:
                created = create_key(s, tenant.id, settings, actor=actor_of(tenant), now=now)
            return account_pb2.CreatedKey(key=key_message(created.key), secret=created.secret)

        answer = await asyncio.to_thread(create)
        await self.reload()  # the new key works on this frontend from this answer on
        return answer

    async def revoke_key(self, tenant: Tenant, request: account_pb2.RevokeKeyRequest) -> account_pb2.ApiKey:
        def revoke() -> account_pb2.ApiKey:
            with self.store.transaction() as s:  # another tenant's key: NOT_FOUND, as an unknown one
                view = revoke_key(
                    s, request.key_id, actor=actor_of(tenant), now=self.clock(), tenant_id=tenant.id
                )
            return key_message(view)

        answer = await asyncio.to_thread(revoke)
        await self.reload()
        return answer

    async def export(self, tenant: Tenant, request: usage_pb2.ExportUsageRequest) -> list[usage_pb2.UsageRow]:
        """The caller's sealed usage rows (another tenant's: PERMISSION_DENIED, as GetUsage)."""
        rows = await self.export_rows(tenant, request)
        return [usage_row_message(r) for r in rows]

    async def export_records(
        self, tenant: Tenant, request: usage_pb2.ExportUsageRequest
    ) -> list[dict[str, Any]]:
        """The rows as the export's file formats take them (contracts/usage_format.py)."""
        return [usage_record(r) for r in await self.export_rows(tenant, request)]

    async def export_rows(self, tenant: Tenant, request: usage_pb2.ExportUsageRequest) -> list[UsageRow]:
        if request.tenant and request.tenant != tenant.id:
            raise NotPermitted("TENANT_MISMATCH", "a tenant may read only its own usage")
        start, end, bucket = export_window(request, now=self.clock())
        return await asyncio.to_thread(
            usage_export, self.store, start=start, end=end, tenant_id=tenant.id, bucket=bucket
        )
