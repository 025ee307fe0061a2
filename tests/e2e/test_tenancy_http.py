"""Tenancy over HTTP/JSON with httpx: Admin's calls at /v1/admin/{Method} (what the console's
operator pages call), a tenant's own /v1/account and /v1/keys, the usage export as CSV and JSON
lines, and each refusal's HTTP status and reason (401 for a revoked key, 403 for a missing scope or
an operator's key, 429 BUDGET_EXCEEDED without Retry-After, ...)."""

from __future__ import annotations

import csv
import io
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import KEY_ADMIN, KEY_ALPHA

MODEL = "smollm2-135m"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture
async def http(http_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=http_url, timeout=120) as c:
        yield c


async def admin(http: httpx.AsyncClient, method: str, body: dict[str, Any] | None = None) -> Any:
    answer = await http.post(
        f"/v1/admin/{method}", json=body or {}, headers=bearer(KEY_ADMIN) | {"x-operator": "ann"}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def refused(answer: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["reason"]) == (status, reason)
    return error


async def onboard(http: httpx.AsyncClient, **settings: Any) -> tuple[str, dict[str, Any]]:
    name = f"h-{secrets.token_hex(4)}"
    tenant = await admin(http, "CreateTenant", {"tenantId": name, "settings": settings})
    assert tenant["id"] == name and tenant["disabled"] is False
    created = await admin(http, "CreateApiKey", {"tenantId": name, "settings": {"name": "console"}})
    return name, created


async def generate(http: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    doc = {"model": MODEL, "prompt": "Hello", "maxOutputTokens": 2} | body
    return await http.post("/v1/generations", json=doc, headers=bearer(key))


async def test_a_tenant_manages_its_own_keys_and_a_revoked_key_is_401(http) -> None:
    name, created = await onboard(http)
    secret = created["secret"]
    account = (await http.get("/v1/account", headers=bearer(secret))).json()
    assert (account["tenant"]["id"], account["key"]["id"]) == (name, created["key"]["id"])
    made = await http.post(
        "/v1/keys", json={"settings": {"name": "ci", "scopes": ["generate"]}}, headers=bearer(secret)
    )
    assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
    new = made.json()
    assert (await generate(http, new["secret"])).status_code == 200  # works here at once
    listed = await http.get("/v1/keys", headers=bearer(secret))
    assert {k["id"] for k in listed.json()["keys"]} == {created["key"]["id"], new["key"]["id"]}
    assert new["secret"] not in listed.text and secret not in listed.text
    revoked = await http.post(f"/v1/keys/{new['key']['id']}:revoke", headers=bearer(secret))
    assert "revokedAt" in revoked.json()
    refused(await generate(http, new["secret"]), 401, "UNAUTHENTICATED")
    refused(await http.get("/v1/models", headers=bearer(new["secret"])), 401, "UNAUTHENTICATED")
    other = await http.post(f"/v1/keys/{created['key']['id']}:revoke", headers=bearer(KEY_ALPHA))
    refused(other, 404, "API_KEY_NOT_FOUND")  # another tenant's key is not found, as an unknown one


async def test_scopes_and_credentials_are_refused_with_their_statuses(http) -> None:
    name, created = await onboard(http)
    generate_only = await admin(
        http, "CreateApiKey", {"tenantId": name, "settings": {"scopes": ["generate"]}}
    )
    refused(await http.get("/v1/keys", headers=bearer(generate_only["secret"])), 403, "INSUFFICIENT_SCOPE")
    refused(await http.get("/v1/usage", headers=bearer(generate_only["secret"])), 403, "INSUFFICIENT_SCOPE")
    refused(await http.get("/v1/account", headers=bearer(KEY_ADMIN)), 403, "NOT_A_TENANT")
    refused(
        await http.post("/v1/admin/ListTenants", headers=bearer(created["secret"])), 403, "ADMIN_REQUIRED"
    )
    refused(await http.post("/v1/admin/ListTenants"), 401, "UNAUTHENTICATED")
    refused(await http.post("/v1/admin/NoSuchMethod", headers=bearer(KEY_ADMIN)), 404, "UNKNOWN_METHOD")
    again = await http.post("/v1/admin/CreateTenant", json={"tenantId": name}, headers=bearer(KEY_ADMIN))
    refused(again, 409, "TENANT_EXISTS")
    bad = await http.post(
        "/v1/admin/UpdateTenant",
        json={"tenantId": name, "weight": 0.0, "maxQueuedTokens": -1},
        headers=bearer(KEY_ADMIN),
    )
    refused(bad, 400, "MALFORMED_REQUEST")  # a uint32 of -1 does not parse
    missing = await http.post(
        "/v1/admin/UpdateTenant", json={"tenantId": "nobody", "weight": 2}, headers=bearer(KEY_ADMIN)
    )
    refused(missing, 404, "TENANT_NOT_FOUND")
    export = await http.get("/v1/usage/export?format=xml", headers=bearer(created["secret"]))
    refused(export, 400, "INVALID_FORMAT")
    await admin(http, "UpdateTenant", {"tenantId": name, "disabled": True})
    refused(await generate(http, created["secret"]), 403, "TENANT_DISABLED")


async def test_a_budget_refusal_is_429_without_retry_and_the_export_streams_csv_and_jsonl(http) -> None:
    await admin(
        http,
        "SetModelPrice",
        {
            "model": MODEL,
            "inputPerMtok": "1000000000",
            "cachedInputPerMtok": "1000000000",
            "outputPerMtok": "1000000000",
        },
    )
    try:
        name, created = await onboard(http)
        secret = created["secret"]
        first = await generate(http, secret, maxOutputTokens=3, sampling={"ignoreEos": True})
        done = first.json()
        cost = (int(done["started"]["inputTokens"]) + 3) * 1000  # 1,000 micro-USD a token
        await admin(http, "UpdateTenant", {"tenantId": name, "monthlyBudgetMicros": str(cost + cost // 2)})
        over = await generate(http, secret, maxOutputTokens=3)
        error = refused(over, 429, "BUDGET_EXCEEDED")
        assert over.headers["x-should-retry"] == "false" and "retry-after" not in over.headers
        assert error["status"] == "RESOURCE_EXHAUSTED"
        openai = await http.post(
            "/v1/chat/completions",
            headers=bearer(secret),
            json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
        )
        assert (openai.status_code, openai.json()["error"]["code"]) == (429, "BUDGET_EXCEEDED")
        usage = (await http.get("/v1/usage", headers=bearer(secret))).json()
        assert (int(usage["spendMicros"]), int(usage["outputTokens"])) == (cost, 3)
    finally:
        await admin(http, "SetModelPrice", {"model": MODEL})  # free again for the session's other tests
    as_csv = await http.get("/v1/usage/export?windowStart=2000-01-01T00:00:00Z", headers=bearer(secret))
    assert as_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [
        (r["tenant"], r["api_key_id"], r["output_tokens"], r["requests"], r["spend_micros"]) for r in rows
    ] == [(name, created["key"]["id"], "3", "1", str(cost))]
    assert rows[0]["spend_usd"] == f"{cost // 10**6}.{cost % 10**6:06d}"
    as_jsonl = await http.get(
        f"/v1/admin/usage/export?tenant={name}&format=jsonl&bucket=USAGE_BUCKET_HOUR",
        headers=bearer(KEY_ADMIN),
    )
    [line] = [json.loads(x) for x in as_jsonl.text.splitlines()]
    assert (line["tenant"], line["output_tokens"], line["spend_micros"]) == (name, 3, cost)
    live = await admin(http, "ListGenerations", {"tenantId": name, "states": ["COMPLETED", "QUEUED"]})
    assert live["counts"] == {"COMPLETED": "1", "QUEUED": "0"} and live["generations"][0]["tenant"] == name
