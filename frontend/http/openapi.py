"""The OpenAPI 3.1 document of the HTTP app, served at /openapi.json and checked in as
docs/openapi.json (tests/e2e/test_http.py keeps the two equal).

Generated, not written: the paths and methods are the app's routes, and every schema of the REST
API is derived from the protobuf descriptors of protos/llm/v1 in protobuf's JSON mapping (camelCase
names, 64-bit integers as strings, enums as their names), so the document cannot drift from what
the app parses and prints. What is written here is each operation's summary, parameters and which
messages it takes and returns, and the OpenAI endpoints' schemas (their fields, as this platform
accepts them).

Regenerate the checked-in copy: `python -m frontend.http.openapi > docs/openapi.json`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Route

from frontend.http import openapi_accounts
from frontend.http.openai_schema import openai_schemas
from frontend.http.proto_schema import WELL_KNOWN, ProtoSchemas, ref
from llm.v1 import generations_pb2, models_pb2, usage_pb2

REST_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "integer", "description": "the HTTP status"},
                "status": {"type": "string", "description": "the gRPC status code's name"},
                "reason": {"type": "string", "description": "the gRPC ErrorInfo reason"},
                "message": {"type": "string"},
                "details": {"type": "array", "items": WELL_KNOWN["google.protobuf.Any"]},
            },
        }
    },
}
GENERATION_RESULT = {
    "type": "object",
    "description": "a generation's stream in one document (stream = false)",
    "properties": {
        "generationId": {"type": "string"},
        "started": ref("llm.v1.Started"),
        "text": {"type": "string"},
        "tokenIds": {"type": "array", "items": {"type": "integer"}},
        "finished": ref("llm.v1.Finished"),
    },
}
SSE = "text/event-stream"
GENERATION_ID = {"name": "generation_id", "in": "path", "required": True, "schema": {"type": "string"}}
REQUEST_ID_HEADERS = [
    {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string", "maxLength": 128},
        "description": "the request id (idempotency key): a retry re-attaches to the same generation",
    }
    for name in ("Idempotency-Key", "X-Request-Id")
]
LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "schema": {"type": "integer", "minimum": 0},
    "description": "resume after this event's sequence (what an EventSource sends on reconnecting)",
}


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def ok(description: str, schema: dict[str, Any], sse: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": schema}}
    if sse is not None:
        content[SSE] = {"schema": {"type": "string", "description": sse}}
    return {"description": description, "content": content}


CHUNKS = "OpenAI chunks, then `data: [DONE]`"
EVENTS_SSE = "one event per GenerationEvent: `id: <sequence>`, `data: <GenerationEvent JSON>`"
OPERATIONS: dict[str, dict[str, Any]] = {
    "createGeneration": {
        "summary": "Start (or re-attach to, by requestId) a generation: Generate",
        "parameters": [*REQUEST_ID_HEADERS, LAST_EVENT_ID],
        "requestBody": json_body(
            {
                "allOf": [ref("llm.v1.GenerateRequest")],
                "properties": {"stream": {"type": "boolean", "default": False}},
                "description": "a GenerateRequest, plus `stream`; `messages` may be the list itself, "
                "and `input` stands for `prompt` (a string) or `messages` (a list)",
            }
        ),
        "responses": {"200": ok("the generation", GENERATION_RESULT, EVENTS_SSE)},
    },
    "getGenerationByRequestId": {
        "summary": "A generation's recorded state, by its request id: GetGeneration",
        "parameters": [{"name": "requestId", "in": "query", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": ok("its state", ref("llm.v1.Generation"))},
    },
    "getGeneration": {
        "summary": "A generation's recorded state: GetGeneration",
        "parameters": [GENERATION_ID],
        "responses": {"200": ok("its state", ref("llm.v1.Generation"))},
    },
    "cancelGeneration": {
        "summary": "Cancel a generation (repeating it is harmless): CancelGeneration",
        "parameters": [GENERATION_ID],
        "responses": {"200": ok("its state", ref("llm.v1.Generation"))},
    },
    "resumeGeneration": {
        "summary": "Its retained events after a cursor, then live ones: Resume",
        "parameters": [
            GENERATION_ID,
            {"name": "after", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}},
            LAST_EVENT_ID,
        ],
        "responses": {
            "200": {"description": "the events", "content": {SSE: {"schema": {"type": "string"}}}},
            "204": {"description": "the generation has ended and nothing follows the cursor"},
        },
    },
    "listModels": {
        "summary": "Served versions and alias routes (ListModels), and OpenAI's model list (`data`)",
        "responses": {
            "200": ok(
                "the models",
                {
                    "allOf": [ref("llm.v1.ListModelsResponse")],
                    "properties": {"object": {"const": "list"}, "data": {"type": "array"}},
                },
            )
        },
    },
    "getUsage": {
        "summary": "The caller's billed usage in a window (all time by default): GetUsage",
        "parameters": [
            {"name": n, "in": "query", "required": False, "schema": {"type": "string", "format": "date-time"}}
            for n in ("windowStart", "windowEnd")
        ],
        "responses": {"200": ok("its usage", ref("llm.v1.GetUsageResponse"))},
    },
    "createChatCompletion": {
        "summary": "OpenAI-compatible chat completion",
        "parameters": REQUEST_ID_HEADERS,
        "requestBody": json_body(ref("openai.ChatCompletionRequest")),
        "responses": {"200": ok("the completion", ref("openai.ChatCompletion"), CHUNKS)},
    },
    "createCompletion": {
        "summary": "OpenAI-compatible (legacy) text completion",
        "parameters": REQUEST_ID_HEADERS,
        "requestBody": json_body(ref("openai.CompletionRequest")),
        "responses": {"200": ok("the completion", ref("openai.Completion"), CHUNKS)},
    },
    "health": {
        "summary": "SERVING while some model version has a ready worker (no key)",
        "security": [],
        "responses": {"200": ok("serving", {"type": "object"}), "503": {"description": "not serving"}},
    },
}
ERRORS = {
    "400": "invalid argument (reason as on gRPC: INVALID_SAMPLING, CONTEXT_LENGTH_EXCEEDED, ...)",
    "401": "missing or wrong API key",
    "403": "the key may not call this",
    "404": "not found (another tenant's generation is not found)",
    "409": "request id used with a different request (REQUEST_ID_CONFLICT)",
    "413": "request body over [frontend] max_request_bytes",
    "429": "tenant quota exhausted (Retry-After), or a monthly budget (BUDGET_EXCEEDED, no retry)",
    "503": "no capacity within the queue deadline, or a dependency is down (Retry-After)",
}


def openapi_document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    protos = ProtoSchemas()
    for message in (
        generations_pb2.GenerateRequest,
        generations_pb2.GenerationEvent,
        generations_pb2.Generation,
        models_pb2.ListModelsResponse,
        usage_pb2.GetUsageResponse,
        *openapi_accounts.MESSAGES,
    ):
        protos.message(message.DESCRIPTOR)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.include_in_schema:
            continue
        spec = OPERATIONS.get(route.name) or openapi_accounts.OPERATIONS[route.name]
        for method in sorted((route.methods or set()) - {"HEAD"}):
            error = "openai.Error" if route.path.startswith(("/v1/chat", "/v1/completions")) else "RestError"
            operation = {"operationId": route.name, **spec}
            operation["responses"] = {
                **spec["responses"],
                **{
                    code: {"description": text, "content": {"application/json": {"schema": ref(error)}}}
                    for code, text in ERRORS.items()
                },
            }
            paths.setdefault(route.path, {})[method.lower()] = operation
    schemas = {
        **dict(sorted(protos.schemas.items())),
        **openai_schemas(),
        "RestError": REST_ERROR,
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "llm-platform HTTP API",
            "version": "v1",
            "description": "The REST API mapped from the llm.v1 protos (protobuf's JSON mapping), and "
            "OpenAI-compatible endpoints. Errors carry the gRPC ErrorInfo reasons.",
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "an API key"}},
        },
    }


def main() -> int:
    from frontend.http.app import HttpApi, routes

    unserved = HttpApi.__new__(HttpApi)  # its routes, for their paths and names only
    json.dump(openapi_document(routes(unserved)), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
