"""The OpenAPI operations of the account and Admin routes (frontend/http/account_routes.py), and the
proto messages their schemas come from; merged into the document by frontend/http/openapi.py."""

from __future__ import annotations

from typing import Any

from frontend.http.proto_schema import ref
from llm.v1 import account_pb2, admin_pb2, usage_pb2

MESSAGES = (
    account_pb2.AccountInfo,
    account_pb2.ListKeysResponse,
    account_pb2.CreateKeyRequest,
    account_pb2.CreatedKey,
    account_pb2.ApiKey,
    usage_pb2.ExportUsageRequest,
    admin_pb2.ListTenantsResponse,
)


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


EXPORT = {
    "200": {
        "description": "one row per tenant, key, model version, adapter and period (UsageRow's fields, "
        "plus spend_usd), streamed",
        "content": {
            "text/csv": {"schema": {"type": "string"}},
            "application/x-ndjson": {"schema": {"type": "string"}},
        },
    }
}
EXPORT_PARAMETERS = [
    *(
        {"name": n, "in": "query", "required": False, "schema": {"type": "string", "format": "date-time"}}
        for n in ("windowStart", "windowEnd")
    ),
    {
        "name": "bucket",
        "in": "query",
        "required": False,
        "schema": {"enum": ["USAGE_BUCKET_DAY", "USAGE_BUCKET_HOUR"]},
    },
    {
        "name": "format",
        "in": "query",
        "required": False,
        "schema": {"enum": ["csv", "jsonl"], "default": "csv"},
    },
]
OPERATIONS: dict[str, dict[str, Any]] = {
    "getAccount": {
        "summary": "The caller's tenant, its spend this month and the calling key: GetAccount (`usage`)",
        "responses": {"200": _json("the account", ref("llm.v1.AccountInfo"))},
    },
    "listKeys": {
        "summary": "The tenant's keys, revoked ones too, never a secret: ListKeys (`usage` scope)",
        "responses": {"200": _json("its keys", ref("llm.v1.ListKeysResponse"))},
    },
    "createKey": {
        "summary": "A new key of the caller's tenant, its secret shown in this answer only: CreateKey",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref("llm.v1.CreateKeyRequest")}},
        },
        "responses": {"200": _json("the key and its secret", ref("llm.v1.CreatedKey"))},
    },
    "revokeKey": {
        "summary": "Revoke one of the tenant's keys: RevokeKey",
        "parameters": [{"name": "key_id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": _json("the revoked key", ref("llm.v1.ApiKey"))},
    },
    "exportUsage": {
        "summary": "The caller's sealed usage by key, model version and day (or hour): ExportUsage",
        "parameters": EXPORT_PARAMETERS,
        "responses": EXPORT,
    },
    "adminExportUsage": {
        "summary": "Every tenant's (or one's) sealed usage: Admin.ExportUsage (admin key)",
        "parameters": [
            {"name": "tenant", "in": "query", "required": False, "schema": {"type": "string"}},
            *EXPORT_PARAMETERS,
        ],
        "responses": EXPORT,
    },
    "adminCall": {
        "summary": "Admin's unary rpc named by the path (admin.proto; ListModels too), admin key only: its "
        "request message in protobuf's JSON mapping in, its response message out",
        "parameters": [
            {"name": "method", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "X-Operator", "in": "header", "required": False, "schema": {"type": "string"}},
        ],
        "requestBody": {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {"200": _json("the rpc's response message", {"type": "object"})},
    },
}
