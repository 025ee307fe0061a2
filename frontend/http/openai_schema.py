"""JSON schemas of the OpenAI-compatible endpoints' bodies, as this platform accepts them, for the
HTTP app's OpenAPI document (frontend/http/openapi.py). The REST API's schemas need no writing: they
come from the protobuf descriptors (frontend/http/proto_schema.py)."""

from __future__ import annotations

from typing import Any


def openai_schemas() -> dict[str, dict[str, Any]]:
    """The OpenAI endpoints' bodies, as this platform accepts them (frontend/http/openai.py)."""
    message = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"type": "string", "enum": ["system", "developer", "user", "assistant"]},
            "content": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
                        },
                    },
                ]
            },
        },
    }
    common = {
        "model": {"type": "string", "description": "an alias or name@version"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 1},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "top_k": {"type": "integer", "description": "vLLM's extension; -1 or 0 is off"},
        "seed": {"type": "integer", "minimum": 0},
        "stop": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "maxItems": 8}]
        },
        "n": {"const": 1},
        "stream": {"type": "boolean", "default": False},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "ignore_eos": {"type": "boolean", "description": "vLLM's extension: generate exactly max_tokens"},
        "return_token_ids": {"type": "boolean", "description": "vLLM's extension: token ids per choice"},
    }
    loose = {"type": "object", "additionalProperties": True}
    return {
        "openai.ChatCompletionRequest": {
            "type": "object",
            "required": ["model", "messages"],
            "properties": {"messages": {"type": "array", "items": message, "minItems": 1}, **common},
        },
        "openai.CompletionRequest": {
            "type": "object",
            "required": ["model", "prompt"],
            "properties": {"prompt": {"type": "string"}, **common},
        },
        "openai.ChatCompletion": {**loose, "description": "OpenAI's chat.completion object"},
        "openai.Completion": {**loose, "description": "OpenAI's text_completion object"},
        "openai.Error": {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                        "param": {"type": ["string", "null"]},
                        "code": {"type": "string", "description": "the gRPC ErrorInfo reason"},
                    },
                }
            },
        },
    }
