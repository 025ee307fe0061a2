"""The HTTP app's account and Admin routes, adapting JSON to the same calls as gRPC (the Account
service, the Usage service's export, and Admin's calls), with the same key store and error table.

Tenant (a key with the `usage` scope)
    GET  /v1/account                       GetAccount: the tenant, its month of spend, this key
    GET  /v1/keys                          ListKeys (never a secret)
    POST /v1/keys                          CreateKey: a CreateKeyRequest; the answer holds the secret, once
    POST /v1/keys/{key_id}:revoke          RevokeKey
    GET  /v1/usage/export?windowStart=&windowEnd=&bucket=USAGE_BUCKET_DAY&format=csv|jsonl
                                           ExportUsage, streamed (CSV with a header row, or JSON lines)
Operator (an admin key; `X-Operator` names who is at the keyboard, as on gRPC)
    POST /v1/admin/{Method}                Admin's unary rpc of that name (admin.proto, and ListModels):
                                           its request message as JSON in, its response message out
    GET  /v1/admin/usage/export?tenant=&...   Admin.ExportUsage: every tenant's (or one's), streamed
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from contracts import usage_format
from contracts.scopes import USAGE
from frontend.admin.calls import AdminCalls
from frontend.auth import OPERATOR_HEADER
from frontend.http.errors import JSON
from frontend.http.transcode import parse, to_json
from frontend.refusals import InvalidRequest, NotFound
from llm.v1 import account_pb2, usage_pb2

if TYPE_CHECKING:
    from frontend.http.app import HttpApi

Endpoint = Callable[[Request], Awaitable[Response]]


class AccountRoutes:
    def __init__(self, api: HttpApi, admin: AdminCalls | None) -> None:
        """api: the HttpApi (its key store, body reader and calls); admin: Admin's calls (None: this
        frontend serves no Admin over HTTP)."""
        self.api = api
        self.admin = admin

    @property
    def accounts(self) -> Any:
        return self.api.calls.accounts

    # --- the tenant's own account --------------------------------------------------------------

    async def account(self, request: Request) -> Response:
        tenant = self.api.tenant(request, USAGE)
        return JSON(to_json(await self.accounts.get(tenant)))

    async def list_keys(self, request: Request) -> Response:
        tenant = self.api.tenant(request, USAGE)
        return JSON(to_json(await self.accounts.list_keys(tenant)))

    async def create_key(self, request: Request) -> Response:
        tenant = self.api.tenant(request, USAGE)
        create = parse(await self.api.body(request), account_pb2.CreateKeyRequest())
        created = await self.accounts.create_key(tenant, create)
        return JSON(to_json(created), headers={"cache-control": "no-store"})

    async def revoke_key(self, request: Request) -> Response:
        tenant = self.api.tenant(request, USAGE)
        revoke = account_pb2.RevokeKeyRequest(key_id=request.path_params["key_id"])
        return JSON(to_json(await self.accounts.revoke_key(tenant, revoke)))

    async def export(self, request: Request) -> Response:
        tenant = self.api.tenant(request, USAGE)
        query, fmt = export_query(request)
        return streamed(await self.accounts.export_records(tenant, query), fmt)

    # --- the operator's ----------------------------------------------------------------------

    def _admin(self, request: Request) -> tuple[AdminCalls, str]:
        headers = [(k, v) for k, v in request.headers.items() if k in ("authorization", OPERATOR_HEADER)]
        actor = self.api.keys.authenticate_admin(headers)
        if self.admin is None:
            raise NotFound("NOT_FOUND", "this frontend serves no Admin over HTTP")
        return self.admin, actor

    async def admin_call(self, request: Request) -> Response:
        admin, actor = self._admin(request)
        method = request.path_params["method"]
        if method not in admin.unary:
            raise NotFound("UNKNOWN_METHOD", f"Admin has no unary method {method[:64]!r}")
        message_type, _ = admin.unary[method]
        body = await self.api.body(request, empty={})
        answer = await admin.call(method, parse(body, message_type()), actor)
        return JSON(to_json(answer), headers={"cache-control": "no-store"})

    async def admin_export(self, request: Request) -> Response:
        admin, _ = self._admin(request)
        query, fmt = export_query(request)
        return streamed(await admin.tenancy.export_records(query), fmt)


def export_query(request: Request) -> tuple[usage_pb2.ExportUsageRequest, str]:
    """The ExportUsageRequest of the query string, and the file format (csv by default)."""
    params = dict(request.query_params)
    fmt = params.pop("format", "csv")
    if fmt not in usage_format.FORMATS:
        raise InvalidRequest("INVALID_FORMAT", "format must be csv or jsonl")
    return parse(params, usage_pb2.ExportUsageRequest()), fmt


def streamed(records: list[dict[str, Any]], fmt: str) -> Response:
    async def lines() -> AsyncIterator[bytes]:
        yield usage_format.header(fmt).encode()
        for record in records:
            yield usage_format.line(fmt, record).encode()

    headers = {"content-disposition": f'attachment; filename="usage.{fmt}"', "cache-control": "no-store"}
    return StreamingResponse(lines(), media_type=usage_format.MEDIA_TYPES[fmt], headers=headers)


def account_routes(routes: AccountRoutes, rest: Callable[[Endpoint], Endpoint]) -> list[Route]:
    """The routes, each with its errors answered by `rest` (the REST API's error body)."""
    return [
        Route("/v1/account", rest(routes.account), methods=["GET"], name="getAccount"),
        Route("/v1/keys", rest(routes.list_keys), methods=["GET"], name="listKeys"),
        Route("/v1/keys", rest(routes.create_key), methods=["POST"], name="createKey"),
        Route("/v1/keys/{key_id}:revoke", rest(routes.revoke_key), methods=["POST"], name="revokeKey"),
        Route("/v1/usage/export", rest(routes.export), methods=["GET"], name="exportUsage"),
        Route("/v1/admin/usage/export", rest(routes.admin_export), methods=["GET"], name="adminExportUsage"),
        Route("/v1/admin/{method}", rest(routes.admin_call), methods=["POST"], name="adminCall"),
    ]
