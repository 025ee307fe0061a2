"""Tenants as a product, over real gRPC on the session platform, driven with llmctl as an operator
would: a tenant and its keys onboarded at run time, scopes, rotation, revocation (at once here, and
on a frontend that did not make it within its catalog refresh), disabling, model lists, prices,
budgets and the usage export; every refusal with its status and reason."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from control.api_keys import revoke_key
from llm.v1 import (
    account_pb2,
    account_pb2_grpc,
    admin_pb2,
    admin_pb2_grpc,
    generations_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)
from llm.v1 import generations_pb2 as pb
from llmctl.cli import main as llmctl
from serving.platform import Platform
from tests.e2e.conftest import KEY_ADMIN, KEY_ALPHA, auth
from tests.e2e.test_errors import expect_error

MODEL = "smollm2-135m"
WAIT_S = 120  # a generous bound on a condition (the catalog refresh is 2 s); never a measured duration


async def until(condition: Callable[[], Any], what: str) -> None:
    """Waits until `condition()` (a coroutine function) is true, polling; fails after WAIT_S."""
    for _ in range(int(WAIT_S / 0.2)):
        if await condition():
            return
        await asyncio.sleep(0.2)
    pytest.fail(f"never happened: {what}")


class Ctl:
    """llmctl against the session frontend, as an operator named "ann"."""

    def __init__(
        self, port: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.target = ["--target", f"127.0.0.1:{port}", "--admin-key", KEY_ADMIN]
        self.capsys = capsys
        monkeypatch.setenv("USER", "ann")
        monkeypatch.setenv("LOGNAME", "ann")

    async def run(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = await asyncio.to_thread(llmctl, [*self.target, *args])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    async def json(self, *args: str) -> Any:
        code, out, err = await self.run(*args, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def ctl(frontend_port: int, capsys, monkeypatch) -> Ctl:
    return Ctl(frontend_port, capsys, monkeypatch)


def tenant_id() -> str:
    return f"t-{secrets.token_hex(4)}"


async def generate(
    channel: grpc.aio.Channel, key: str, max_output_tokens: int = 2, **kw: Any
) -> list[pb.GenerationEvent]:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    request = pb.GenerateRequest(model=MODEL, prompt="Hello", max_output_tokens=max_output_tokens, **kw)
    return [e async for e in stub.Generate(request, metadata=auth(key))]


def refused_generation(channel: grpc.aio.Channel, key: str) -> Callable[[], Any]:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    return lambda: stub.Generate(
        pb.GenerateRequest(model=MODEL, prompt="Hello", max_output_tokens=2), metadata=auth(key)
    )


async def onboard(ctl: Ctl, *tenant_flags: str, key_flags: tuple[str, ...] = ()) -> tuple[str, str, str]:
    """A new tenant with one key: (tenant id, key id, secret)."""
    name = tenant_id()
    await ctl.json("tenant", "create", name, *tenant_flags)
    created = await ctl.json("key", "create", "--tenant", name, *key_flags)
    return name, created["id"], created["key"]


async def test_a_tenant_and_its_key_onboarded_at_run_time_work_at_once(channel, ctl) -> None:
    [tenant] = await ctl.json(
        "tenant", "create", name := tenant_id(), "--max-concurrent", "2", "--weight", "2"
    )
    assert (tenant["id"], tenant["settings"]["maxConcurrentGenerations"], tenant["settings"]["weight"]) == (
        name,
        2,
        2.0,
    )
    created = await ctl.json("key", "create", "--tenant", name, "--name", "ci", "--expires", "30d")
    assert created["key"].startswith("sk-") and created["id"].startswith("key_") and created["tenant"] == name
    events = await generate(channel, created["key"])
    assert events[-1].finished.reason == pb.Finished.OUTPUT_LIMIT
    code, out, _ = await ctl.run("key", "list", "--tenant", name)
    assert code == 0 and created["id"] in out and created["key"] not in out  # never a secret again

    async def last_used() -> bool:  # written by the frontend's catalog refresh
        [key] = await ctl.json("key", "list", "--tenant", name)
        return "lastUsedAt" in key

    await until(last_used, "the key's last use is recorded")
    code, out, _ = await ctl.run("tenant", "history", name)
    lines = [line.split("\t") for line in out.splitlines()]
    operator = f"ann (key {hashlib.sha256(KEY_ADMIN.encode()).hexdigest()[:8]})"
    assert [(actor, action, tenant) for _, actor, action, tenant, *_ in lines] == [
        (operator, "KEY_CREATE", name),
        (operator, "TENANT_CREATE", name),
    ]
    assert created["key"] not in out


async def test_a_revoked_key_is_refused_at_once_here_and_after_the_refresh_elsewhere(
    channel, ctl, platform: Platform
) -> None:
    name, key_id, secret = await onboard(ctl)
    await generate(channel, secret)
    code, _, _ = await ctl.run("key", "revoke", key_id)
    assert code == 0
    await expect_error(
        refused_generation(channel, secret), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"
    )
    # revoked by another frontend: written to the store only, this frontend's cache not told
    created = await ctl.json("key", "create", "--tenant", name)
    await generate(channel, created["key"])
    assert platform.store is not None
    with platform.store.transaction() as session:
        revoke_key(session, created["id"], actor="another frontend", now=datetime.now(UTC))
    # new generations: at once (admission reads the key in the store)
    await expect_error(
        refused_generation(channel, created["key"]), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"
    )
    usage = usage_pb2_grpc.UsageStub(channel)

    async def refused() -> bool:  # every other call: once the catalog refresh has seen it
        try:
            await usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(created["key"]))
        except grpc.aio.AioRpcError as e:
            return e.code() == grpc.StatusCode.UNAUTHENTICATED
        return False

    await until(refused, "the revoked key is refused after the catalog refresh")


async def test_a_rotated_key_keeps_its_id_and_its_old_secret_works_for_the_overlap(channel, ctl) -> None:
    _, key_id, first = await onboard(ctl)
    second = await ctl.json("key", "rotate", key_id, "--overlap", "1h")
    assert second["id"] == key_id and second["key"] != first
    await generate(channel, first)  # within the overlap
    await generate(channel, second["key"])
    third = await ctl.json("key", "rotate", key_id, "--overlap", "0s")
    for gone in (first, second["key"]):  # superseded, and past a zero overlap
        await expect_error(
            refused_generation(channel, gone), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"
        )
    await generate(channel, third["key"])


async def test_scopes_open_what_they_name(channel, ctl) -> None:
    name, _, usage_only = await onboard(ctl, key_flags=("--scopes", "usage"))
    generate_only = (await ctl.json("key", "create", "--tenant", name, "--scopes", "generate"))["key"]
    await expect_error(
        refused_generation(channel, usage_only), grpc.StatusCode.PERMISSION_DENIED, "INSUFFICIENT_SCOPE"
    )
    usage = usage_pb2_grpc.UsageStub(channel)
    assert (await usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(usage_only))).tenant == name
    await expect_error(
        lambda: usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(generate_only)),
        grpc.StatusCode.PERMISSION_DENIED,
        "INSUFFICIENT_SCOPE",
    )
    account = account_pb2_grpc.AccountStub(channel)
    await expect_error(
        lambda: account.ListKeys(account_pb2.ListKeysRequest(), metadata=auth(generate_only)),
        grpc.StatusCode.PERMISSION_DENIED,
        "INSUFFICIENT_SCOPE",
    )
    models = models_pb2_grpc.ModelsStub(channel)
    for key in (usage_only, generate_only):  # any key of the tenant lists its models
        assert MODEL in {
            a.alias
            for a in (await models.ListModels(models_pb2.ListModelsRequest(), metadata=auth(key))).aliases
        }
    await generate(channel, generate_only)


async def test_a_disabled_tenant_starts_nothing_and_its_running_generation_finishes(channel, ctl) -> None:
    name, _, secret = await onboard(ctl)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    request = pb.GenerateRequest(model=MODEL, prompt="Once upon a time", max_output_tokens=24)
    request.sampling.ignore_eos = True
    call = stub.Generate(request, metadata=auth(secret))
    first = await call.read()
    assert first.HasField("started")
    assert (await ctl.run("tenant", "disable", name))[0] == 0
    rest = []
    while (event := await call.read()) is not grpc.aio.EOF:
        rest.append(event)
    assert (
        rest[-1].finished.reason == pb.Finished.OUTPUT_LIMIT and rest[-1].finished.usage.output_tokens == 24
    )
    await expect_error(
        refused_generation(channel, secret), grpc.StatusCode.PERMISSION_DENIED, "TENANT_DISABLED"
    )
    assert (await ctl.run("tenant", "enable", name))[0] == 0
    await generate(channel, secret)


async def test_a_tenant_uses_only_the_models_it_is_given(channel, ctl) -> None:
    name, _, secret = await onboard(ctl, "--models", "another-alias")
    await expect_error(
        refused_generation(channel, secret), grpc.StatusCode.PERMISSION_DENIED, "MODEL_NOT_ALLOWED"
    )
    models = models_pb2_grpc.ModelsStub(channel)
    listed = await models.ListModels(models_pb2.ListModelsRequest(), metadata=auth(secret))
    assert (list(listed.aliases), list(listed.versions)) == ([], [])
    await ctl.json("tenant", "update", name, "--models", "all")
    await generate(channel, secret)


@pytest.fixture
async def priced(ctl) -> AsyncIterator[int]:
    """The model priced at $1,000 per million tokens of every kind (1,000 micro-USD a token) for the
    test, free again after it (a new price row: the session's other tenants are not billed)."""
    await ctl.json(
        "price", "set", "--model", MODEL, "--input", "1000", "--cached-input", "1000", "--output", "1000"
    )
    try:
        yield 1000
    finally:
        await ctl.json(
            "price", "set", "--model", MODEL, "--input", "0", "--cached-input", "0", "--output", "0"
        )


async def test_a_budget_refuses_the_request_that_would_pass_it_and_usage_reports_spend(
    channel, ctl, priced: int
) -> None:
    name, key_id, secret = await onboard(ctl)
    events = await generate(channel, secret, max_output_tokens=4, sampling=pb.SamplingParams(ignore_eos=True))
    cost = (events[0].started.input_tokens + 4) * priced  # every token at 1,000 micro-USD
    budget = cost * 3 // 2  # one more request's maximum does not fit
    await ctl.json("tenant", "update", name, "--monthly-budget", f"{budget / 1e6:.6f}")
    stub = generations_pb2_grpc.GenerationsStub(channel)
    again = pb.GenerateRequest(model=MODEL, prompt="Hello", max_output_tokens=4)
    error = await expect_error(
        lambda: stub.Generate(again, metadata=auth(secret)),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "BUDGET_EXCEEDED",
    )
    assert f"tenant:{name}" in error.details()
    usage = await usage_pb2_grpc.UsageStub(channel).GetUsage(
        usage_pb2.GetUsageRequest(), metadata=auth(secret)
    )
    assert (usage.spend_micros, usage.output_tokens, usage.generations) == (cost, 4, 1)
    [tenant] = await ctl.json("tenant", "update", name, "--monthly-budget", "none")
    assert int(tenant["month"]["spentMicros"]) == cost
    second = (await generate(channel, secret))[-1].finished.usage  # no budget: admitted again
    code, out, _ = await ctl.run(
        "usage", "export", "--from", "2000-01-01", "--to", "2100-01-01", "--tenant", name
    )
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {(r["tenant"], r["api_key_id"], r["model_version"]) for r in rows} == {
        (name, key_id, events[0].started.model_version)
    }
    spent = cost + (second.input_tokens + second.output_tokens) * priced
    assert sum(int(r["spend_micros"]) for r in rows) == spent
    assert sum(int(r["output_tokens"]) for r in rows) == 4 + second.output_tokens
    assert sum(int(r["requests"]) for r in rows) == 2


async def test_admin_and_account_refusals_carry_their_status_and_reason(channel, ctl) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    meta = auth(KEY_ADMIN)
    name, key_id, secret = await onboard(ctl)
    cases: list[tuple[Callable[[], Any], grpc.StatusCode, str]] = [
        (
            lambda: admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant_id=name), metadata=meta),
            grpc.StatusCode.ALREADY_EXISTS,
            "TENANT_EXISTS",
        ),
        (
            lambda: admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant_id="a b"), metadata=meta),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_SETTING",
        ),
        (
            lambda: admin.UpdateTenant(
                admin_pb2.UpdateTenantRequest(tenant_id="nobody", weight=2), metadata=meta
            ),
            grpc.StatusCode.NOT_FOUND,
            "TENANT_NOT_FOUND",
        ),
        (
            lambda: admin.UpdateTenant(
                admin_pb2.UpdateTenantRequest(tenant_id=name, weight=-1), metadata=meta
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_SETTING",
        ),
        (
            lambda: admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(key_id="key_nothing"), metadata=meta),
            grpc.StatusCode.NOT_FOUND,
            "API_KEY_NOT_FOUND",
        ),
        (
            lambda: admin.CreateApiKey(
                admin_pb2.CreateApiKeyRequest(
                    tenant_id=name, settings=account_pb2.KeySettings(scopes=["admin"])
                ),
                metadata=meta,
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_SETTING",
        ),
        (
            lambda: admin.SetModelPrice(admin_pb2.SetModelPriceRequest(model="no-such-model"), metadata=meta),
            grpc.StatusCode.INVALID_ARGUMENT,
            "UNKNOWN_MODEL",
        ),
        (
            lambda: admin.SetModelPrice(
                admin_pb2.SetModelPriceRequest(model=MODEL, input_per_mtok=10**13), metadata=meta
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_PRICE",
        ),
        (
            lambda: admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=auth(secret)),
            grpc.StatusCode.PERMISSION_DENIED,
            "ADMIN_REQUIRED",
        ),
        (
            lambda: account_pb2_grpc.AccountStub(channel).RevokeKey(
                account_pb2.RevokeKeyRequest(key_id=key_id), metadata=auth(KEY_ALPHA)
            ),
            grpc.StatusCode.NOT_FOUND,
            "API_KEY_NOT_FOUND",
        ),
        (
            lambda: account_pb2_grpc.AccountStub(channel).GetAccount(
                account_pb2.GetAccountRequest(), metadata=meta
            ),
            grpc.StatusCode.PERMISSION_DENIED,
            "NOT_A_TENANT",
        ),
    ]
    for call, code, reason in cases:
        await expect_error(call, code, reason)
    await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(key_id=key_id), metadata=meta)
    await expect_error(
        lambda: admin.RotateApiKey(admin_pb2.RotateApiKeyRequest(key_id=key_id), metadata=meta),
        grpc.StatusCode.FAILED_PRECONDITION,
        "API_KEY_REVOKED",
    )
    usage = usage_pb2_grpc.UsageStub(channel)
    backwards = usage_pb2.ExportUsageRequest()
    backwards.window_start.FromSeconds(2_000_000_000)
    backwards.window_end.FromSeconds(1_000_000_000)
    for request, code, reason in [
        (usage_pb2.ExportUsageRequest(tenant="beta"), grpc.StatusCode.PERMISSION_DENIED, "TENANT_MISMATCH"),
        (backwards, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_WINDOW"),
    ]:
        await expect_error(
            lambda request=request: usage.ExportUsage(request, metadata=auth(KEY_ALPHA)), code, reason
        )
