"""The HTTP app: routes that adapt HTTP/JSON to the shared calls (frontend/calls.py), as the gRPC
servicers adapt protobuf. Tenant services need `Authorization: Bearer <api key>`, checked by the
same key store as gRPC's metadata; errors are mapped by frontend/api_errors.py's table and rendered
by frontend/http/errors.py. /openapi.json and /healthz (SERVING while every alias has a READY version on
a ready worker and the control store is reachable) need no key.

REST API (the protos' messages in protobuf's JSON mapping)
    POST /v1/generations                       GenerateRequest (+ "stream"); SSE or one document
    GET  /v1/generations?requestId=R           GetGeneration by request id
    GET  /v1/generations/{id}                  GetGeneration
    POST /v1/generations/{id}:cancel           CancelGeneration
    GET  /v1/generations/{id}/events?after=N   Resume (SSE; Last-Event-ID overrides `after`)
    GET  /v1/models                            ListModels (+ OpenAI's `data` list)
    GET  /v1/usage?windowStart=&windowEnd=     GetUsage
    /v1/account, /v1/keys, /v1/usage/export, /v1/admin/...   frontend/http/account_routes.py
OpenAI-compatible
    POST /v1/chat/completions, POST /v1/completions, GET /v1/models
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from config.settings import HttpSettings
from contracts.scopes import GENERATE, USAGE
from frontend.admin.calls import AdminCalls
from frontend.api_errors import ApiError, api_error
from frontend.auth import ApiKeyStore, Tenant
from frontend.calls import FrontendCalls
from frontend.catalog.messages import list_models
from frontend.dispatch.worker_pool import ready_workers
from frontend.health import serves_every_alias
from frontend.http import json_body, openai, openai_answers, transcode
from frontend.http.account_routes import AccountRoutes, account_routes
from frontend.http.errors import JSON, openai_error, rest_error
from frontend.http.streams import Document, EventStream
from frontend.http.transcode import to_json
from frontend.refusals import Exhausted, InvalidRequest, NotFound, Refusal, Unsupported
from llm.v1 import generations_pb2 as pb
from llm.v1 import usage_pb2

log = logging.getLogger(__name__)
Endpoint = Callable[[Request], Awaitable[Response]]


class HttpApi:
    def __init__(
        self,
        calls: FrontendCalls,
        keys: ApiKeyStore,
        settings: HttpSettings,
        max_body: int,
        admin: AdminCalls | None = None,
    ) -> None:
        """admin: Admin's calls, served at /v1/admin/{Method} (None: no Admin over HTTP)."""
        self.admin = admin
        self.calls = calls
        self.generations = calls.generations
        self.keys = keys
        self.settings = settings
        self.max_body = max_body

    # --- shared by every route ---------------------------------------------------------------

    def tenant(self, request: Request, scope: str | None = GENERATE) -> Tenant:
        """The caller's tenant, for a call that needs `scope` (None: any of the tenant's keys)."""
        header = request.headers.get("authorization")
        return self.keys.authenticate([] if header is None else [("authorization", header)], scope)

    async def body(self, request: Request, empty: Any = None) -> Any:
        """The request's JSON body (`empty`, when given, stands for no body at all)."""
        return await json_body.read(request, self.max_body, self.settings.body_timeout_s, empty)

    @staticmethod
    def mapped(refusal: Callable[[ApiError, int | None], Response]) -> Callable[[Endpoint], Endpoint]:
        """The endpoint with every exception answered by `refusal` (the error table's status)."""

        def wrap(endpoint: Endpoint) -> Endpoint:
            async def call(request: Request) -> Response:
                try:
                    return await endpoint(request)
                except json_body.TooLarge:
                    too_large = Exhausted(
                        "REQUEST_TOO_LARGE", "the request body is larger than [frontend] max_request_bytes"
                    )
                    return refusal(api_error(too_large), 413)
                except json_body.TooSlow:
                    slow = InvalidRequest("REQUEST_TIMEOUT", "the request body did not arrive in time")
                    return refusal(api_error(slow), 408)
                except ClientDisconnect:
                    return Response(status_code=499)
                except HTTPException:
                    raise
                except Exception as e:
                    return refusal(api_error(e), None)

            call.__name__ = endpoint.__name__
            call.__doc__ = endpoint.__doc__
            return call

        return wrap

    # --- REST API -----------------------------------------------------------------------------

    async def create_generation(self, request: Request) -> Response:
        tenant = self.tenant(request)
        generate, stream = transcode.generate_request(await self.body(request), request.headers)
        after = transcode.non_negative(request.headers.get("last-event-id"), "Last-Event-ID")
        reader = await self.generations.open(tenant, generate, after)
        headers = {"x-generation-id": reader.generation_id}
        if stream:
            return EventStream(reader, RestFrames(), rest_error, headers)  # type: ignore[return-value]
        return Document(reader, transcode.generation_result, rest_error, headers)  # type: ignore[return-value]

    async def get_generation(self, request: Request) -> Response:
        tenant = self.tenant(request)
        if "generation_id" in request.path_params:
            key = pb.GetGenerationRequest(generation_id=request.path_params["generation_id"])
        elif "requestId" in request.query_params or "request_id" in request.query_params:
            rid = request.query_params.get("requestId", request.query_params.get("request_id", ""))
            key = pb.GetGenerationRequest(request_id=rid)
        else:
            key = pb.GetGenerationRequest()
        return JSON(to_json(await self.generations.get(tenant, key)))

    async def cancel_generation(self, request: Request) -> Response:
        tenant = self.tenant(request)
        cancel = pb.CancelGenerationRequest(generation_id=request.path_params["generation_id"])
        return JSON(to_json(await self.generations.cancel(tenant, cancel)))

    async def generation_events(self, request: Request) -> Response:
        tenant = self.tenant(request)
        last = request.headers.get("last-event-id")
        after = transcode.non_negative(
            last if last is not None else request.query_params.get("after"), "after (or Last-Event-ID)"
        )
        generation_id = request.path_params["generation_id"]
        if self.generations.nothing_follows(tenant, generation_id, after):
            return Response(status_code=204)  # nothing follows: an EventSource stops reconnecting
        resume = pb.ResumeRequest(generation_id=generation_id, after_sequence=after)
        reader = await self.generations.resume(tenant, resume)
        headers = {"x-generation-id": generation_id}
        return EventStream(reader, RestFrames(), rest_error, headers)  # type: ignore[return-value]

    async def models(self, request: Request) -> Response:
        tenant = self.tenant(request, None)
        listed = await list_models(self.calls.registry, self.calls.pool, tenant.allowed_models)
        doc = to_json(listed)
        names = [a.alias for a in listed.aliases] + [v.id for v in listed.versions]
        doc["object"] = "list"
        doc["data"] = [{"id": n, "object": "model", "created": 0, "owned_by": "llm-platform"} for n in names]
        return JSON(doc)

    async def usage(self, request: Request) -> Response:
        tenant = self.tenant(request, USAGE)
        query = dict(request.query_params)
        get = transcode.parse(query, usage_pb2.GetUsageRequest())
        return JSON(to_json(await self.calls.usage.get(tenant, get)))

    # --- OpenAI-compatible --------------------------------------------------------------------

    async def chat_completions(self, request: Request) -> Response:
        return await self._openai(request, openai.chat_request)

    async def completions(self, request: Request) -> Response:
        return await self._openai(request, openai.completion_request)

    async def _openai(
        self,
        request: Request,
        translate: Callable[[Any, str, int], tuple[pb.GenerateRequest, openai.Options]],
    ) -> Response:
        tenant = self.tenant(request)
        request_id = transcode.header_request_id(request.headers)
        generate, options = translate(await self.body(request), request_id, self.settings.default_max_tokens)
        reader = await self.generations.open(tenant, generate)
        headers = {"x-generation-id": reader.generation_id}
        if options.stream:
            return EventStream(reader, openai_answers.Chunks(options), openai_error, headers)  # type: ignore[return-value]
        return Document(  # type: ignore[return-value]
            reader, lambda events: openai_answers.document(options, events), openai_error, headers
        )

    # --- no key -------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        """SERVING while some model version has a ready worker and every alias has a READY one
        there (frontend/health.py), and not once the frontend drains for its exit nor while the
        control store is unreachable."""
        pool = self.calls.pool
        ready = [await ready_workers(pool, v) for v in self.calls.registry.versions.values()]
        manager = self.calls.generations.manager
        serving = any(n > 0 for n in ready) and not manager.draining and manager.store_probe.available
        serving = serving and await serves_every_alias(self.calls.registry, pool)
        return JSON({"status": "SERVING" if serving else "NOT_SERVING"}, 200 if serving else 503)


class RestFrames:
    """The REST API's server-sent events: one per GenerationEvent, `id:` its sequence."""

    def event(self, event: pb.GenerationEvent) -> bytes:
        return transcode.rest_event(event)

    def error(self, error: ApiError) -> bytes:
        return transcode.rest_error_event(error)

    def end(self) -> bytes:
        return b""


def routes(api: HttpApi) -> list[Route]:
    rest, oai = HttpApi.mapped(rest_error), HttpApi.mapped(openai_error)
    return [
        Route("/v1/generations", rest(api.create_generation), methods=["POST"], name="createGeneration"),
        Route("/v1/generations", rest(api.get_generation), methods=["GET"], name="getGenerationByRequestId"),
        Route(
            "/v1/generations/{generation_id}:cancel",
            rest(api.cancel_generation),
            methods=["POST"],
            name="cancelGeneration",
        ),
        Route(
            "/v1/generations/{generation_id}/events",
            rest(api.generation_events),
            methods=["GET"],
            name="resumeGeneration",
        ),
        Route(
            "/v1/generations/{generation_id}", rest(api.get_generation), methods=["GET"], name="getGeneration"
        ),
        Route("/v1/models", rest(api.models), methods=["GET"], name="listModels"),
        Route("/v1/usage", rest(api.usage), methods=["GET"], name="getUsage"),
        *account_routes(AccountRoutes(api, getattr(api, "admin", None)), rest),
        Route(
            "/v1/chat/completions", oai(api.chat_completions), methods=["POST"], name="createChatCompletion"
        ),
        Route("/v1/completions", oai(api.completions), methods=["POST"], name="createCompletion"),
        Route("/healthz", api.healthz, methods=["GET"], name="health"),
    ]


def http_app(
    calls: FrontendCalls,
    keys: ApiKeyStore,
    settings: HttpSettings,
    max_body: int,
    admin: AdminCalls | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The app; `extra_routes` are served beside the API's (the console's files, mounted by the
    serving role: the API knows nothing of its clients)."""
    from frontend.http.openapi import openapi_document

    api = HttpApi(calls, keys, settings, max_body, admin)
    app_routes: list[BaseRoute] = list(routes(api))
    document = openapi_document(app_routes)
    app_routes.extend(extra_routes)

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    app_routes.append(Route("/openapi.json", openapi, methods=["GET"], include_in_schema=False))

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        refused: Refusal = NotFound("NOT_FOUND", "no such route")
        if status != 404:
            refused = Unsupported("METHOD_NOT_ALLOWED", "method not allowed")
        return rest_error(api_error(refused), status)

    return Starlette(routes=app_routes, exception_handlers={404: not_found, 405: not_found})
