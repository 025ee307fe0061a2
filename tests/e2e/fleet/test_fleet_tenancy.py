"""Tenants and keys across a fleet (issue 51): a tenant and key created through one frontend work
through the other once its catalog refresh has seen them; a key revoked through one is refused by
the other at once for new generations (admission reads the key in the store) and for every call
after its refresh; and a monthly budget holds across both frontends, as the quotas do, because it
is charged by conditional updates in the admission transaction."""

from __future__ import annotations

import asyncio
import secrets

import grpc
import pytest

from llm.v1 import admin_pb2, admin_pb2_grpc, usage_pb2, usage_pb2_grpc
from tests.e2e.conftest import auth
from tests.e2e.fleet.client import MODEL, generate, read, read_rest, reason_of, request
from tests.e2e.fleet.harness import ADMIN_KEY

pytestmark = pytest.mark.fleet
Channels = tuple[grpc.aio.Channel, grpc.aio.Channel]
RATE = 1_000_000_000  # micro-USD per million tokens: 1,000 micro-USD a token of every kind


async def until_accepted(channel: grpc.aio.Channel, key: str) -> None:
    """Until the frontend knows the key (its catalog refresh): a usage read stops being refused."""
    usage = usage_pb2_grpc.UsageStub(channel)
    async with asyncio.timeout(120):
        while True:
            try:
                await usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(key))
                return
            except grpc.aio.AioRpcError as e:
                assert e.code() == grpc.StatusCode.UNAUTHENTICATED
            await asyncio.sleep(0.1)


async def until_refused(channel: grpc.aio.Channel, key: str) -> None:
    usage = usage_pb2_grpc.UsageStub(channel)
    async with asyncio.timeout(120):
        while True:
            try:
                await usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(key))
            except grpc.aio.AioRpcError as e:
                assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
                return
            await asyncio.sleep(0.1)


async def onboard(channel: grpc.aio.Channel) -> tuple[str, str, str]:
    admin = admin_pb2_grpc.AdminStub(channel)
    tenant = f"fleet-{secrets.token_hex(3)}"
    await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant_id=tenant), metadata=auth(ADMIN_KEY))
    created = await admin.CreateApiKey(
        admin_pb2.CreateApiKeyRequest(tenant_id=tenant), metadata=auth(ADMIN_KEY)
    )
    return tenant, created.key.id, created.secret


async def test_a_key_made_on_one_frontend_works_on_the_other_and_its_revocation_reaches_it(
    channels: Channels,
) -> None:
    f1, f2 = channels
    _, key_id, secret = await onboard(f1)
    await until_accepted(f2, secret)
    assert (await read_rest(generate(f2, request(2), secret)))[-1].HasField("finished")
    admin = admin_pb2_grpc.AdminStub(f1)
    await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(key_id=key_id), metadata=auth(ADMIN_KEY))
    with pytest.raises(grpc.aio.AioRpcError) as refused:  # a new generation: at once, on either frontend
        await read_rest(generate(f2, request(2), secret))
    assert (refused.value.code(), reason_of(refused.value)) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
    )
    await until_refused(f2, secret)  # every call: after f2's catalog refresh


async def test_a_budget_holds_across_both_frontends(channels: Channels) -> None:
    f1, f2 = channels
    admin = admin_pb2_grpc.AdminStub(f1)
    price = admin_pb2.SetModelPriceRequest(
        model=MODEL, input_per_mtok=RATE, cached_input_per_mtok=RATE, output_per_mtok=RATE
    )
    await admin.SetModelPrice(price, metadata=auth(ADMIN_KEY))
    try:
        tenant, _, secret = await onboard(f1)
        await until_accepted(f2, secret)
        first = await read_rest(generate(f1, request(3), secret))
        cost = (first[0].started.input_tokens + 3) * RATE // 1_000_000  # every request costs the same
        fits = 3
        update = admin_pb2.UpdateTenantRequest(tenant_id=tenant, monthly_budget_micros=cost * (1 + fits))
        await admin.UpdateTenant(update, metadata=auth(ADMIN_KEY))
        calls = [generate(channels[i % 2], request(3), secret) for i in range(2 * fits)]

        async def outcome(call: grpc.aio.UnaryStreamCall) -> str:
            try:
                await read(call, 1)
                await read_rest(call)
                return "admitted"
            except grpc.aio.AioRpcError as e:
                assert (e.code(), reason_of(e)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "BUDGET_EXCEEDED")
                return "refused"

        outcomes = await asyncio.gather(*(outcome(call) for call in calls))
        assert sorted(outcomes) == ["admitted"] * fits + ["refused"] * fits
        spent = await usage_pb2_grpc.UsageStub(f2).GetUsage(
            usage_pb2.GetUsageRequest(), metadata=auth(secret)
        )
        assert spent.spend_micros == cost * (1 + fits)
    finally:
        await admin.SetModelPrice(admin_pb2.SetModelPriceRequest(model=MODEL), metadata=auth(ADMIN_KEY))
