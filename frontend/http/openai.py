"""The OpenAI-compatible endpoints' requests: a chat or completions request becomes a
GenerateRequest, then validated and admitted as gRPC's is (frontend/http/openai_answers.py renders
the generation's events as OpenAI's chunks or documents).

Request mapping
    model                                  model (an alias or name@version)
    messages / prompt                      messages (role "developer" is "system") / prompt
    max_completion_tokens, max_tokens      max_output_tokens ([http] default_max_tokens when neither)
    temperature (default 1, as OpenAI's)   sampling.temperature (0 is greedy)
    top_p, seed, stop (string or list)     sampling.top_p, .seed, .stop
    top_k, ignore_eos (vLLM's extensions)  sampling.top_k, .ignore_eos
    Idempotency-Key / X-Request-Id header  request_id: a retry re-attaches to the same generation
    n (1 only), stream, stream_options.include_usage, return_token_ids (vLLM's: each choice
    carries its token ids)
    response_format, structured_outputs,   constraint, logprobs, top_logprobs
      logprobs, top_logprobs, tools,       (frontend/http/openai_structured.py)
      tool_choice
    messages of role "tool"; an assistant  tool results; the calls as their JSON text
      message's tool_calls
Parameters that would change the output in a way this platform does not implement (n > 1,
logit_bias, penalties, best_of, echo, suffix, the legacy functions) are refused INVALID_ARGUMENT
UNSUPPORTED_PARAMETER naming the parameter; others (user, metadata, store, ...) are ignored.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from frontend.http import openai_structured
from frontend.http.openai_structured import ToolCalls
from frontend.refusals import InvalidRequest
from llm.v1 import generations_pb2 as pb

OPENAI_DEFAULT_TEMPERATURE = 1.0
UNSUPPORTED = {  # parameter -> the values that ask for nothing (accepted)
    "n": (None, 1),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "best_of": (None, 1),
    "echo": (None, False),
    "suffix": (None, ""),
    "audio": (None,),
    "prediction": (None,),
}


def unsupported(name: str, message: str) -> InvalidRequest:
    return InvalidRequest("UNSUPPORTED_PARAMETER", message, field=name)


def bad(name: str, rule: str) -> InvalidRequest:
    return InvalidRequest("INVALID_PARAMETER", f"{name} {rule}", field=name)


@dataclass(slots=True, frozen=True)
class Options:
    """How the answer is shaped (not part of the generation)."""

    chat: bool
    stream: bool
    include_usage: bool
    token_ids: bool
    logprobs: bool = False  # each token's, in the answer's `logprobs`
    tools: ToolCalls | None = None  # the answer is a tool call (openai_structured.py)
    created: int = field(default_factory=lambda: int(time.time()))


def chat_request(doc: Any, request_id: str, default_max_tokens: int) -> tuple[pb.GenerateRequest, Options]:
    doc = _object(doc)
    request = _common(doc, request_id, default_max_tokens)
    messages = doc.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages", "must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise bad(f"messages[{i}]", "must be an object")
        role = m.get("role")
        role = "system" if role == "developer" else role
        request.messages.messages.add(role=role if isinstance(role, str) else "", content=_content(i, m))
    tools = openai_structured.apply(doc, request, chat=True)
    return request, _options(doc, chat=True, logprobs=request.logprobs, tools=tools)


def completion_request(
    doc: Any, request_id: str, default_max_tokens: int
) -> tuple[pb.GenerateRequest, Options]:
    doc = _object(doc)
    request = _common(doc, request_id, default_max_tokens)
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list):
        raise unsupported("prompt", "prompt must be one string (no batches, no token ids)")
    if not isinstance(prompt, str):
        raise bad("prompt", "must be a string")
    request.prompt = prompt
    openai_structured.apply(doc, request, chat=False)
    return request, _options(doc, chat=False, logprobs=request.logprobs)


def _object(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise InvalidRequest("MALFORMED_REQUEST", "the request body must be a JSON object")
    for name, accepted in UNSUPPORTED.items():
        value = doc.get(name)
        if not any(value == a and type(value) is type(a) for a in accepted):
            raise unsupported(name, f"{name}={_short(value)} is not supported")
    return doc


def _short(value: Any) -> str:
    return repr(value)[:40]


def _common(doc: dict[str, Any], request_id: str, default_max_tokens: int) -> pb.GenerateRequest:
    model = doc.get("model")
    if not isinstance(model, str):
        raise bad("model", "must be a string")
    request = pb.GenerateRequest(request_id=request_id, model=model)
    limit = doc.get("max_completion_tokens")
    limit = doc.get("max_tokens") if limit is None else limit
    request.max_output_tokens = (
        default_max_tokens if limit is None else _int("max_tokens", limit, 0, 2**31 - 1)
    )
    s = request.sampling
    temperature = doc.get("temperature")
    s.temperature = OPENAI_DEFAULT_TEMPERATURE if temperature is None else _number("temperature", temperature)
    if doc.get("top_p") is not None:
        s.top_p = _number("top_p", doc["top_p"])
    if doc.get("top_k") is not None and doc["top_k"] != -1:  # vLLM's -1 is off
        s.top_k = _int("top_k", doc["top_k"], 0, 2**31 - 1)
    if doc.get("seed") is not None:
        s.seed = _int("seed", doc["seed"], 0, 2**64 - 1)
    stop = doc.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
            raise bad("stop", "must be a string or a list of strings")
        s.stop.extend(stop)
    ignore_eos = doc.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise bad("ignore_eos", "must be true or false")
    s.ignore_eos = ignore_eos
    return request


def _options(doc: dict[str, Any], chat: bool, logprobs: bool, tools: ToolCalls | None = None) -> Options:
    stream = doc.get("stream") or False
    if not isinstance(stream, bool):
        raise bad("stream", "must be true or false")
    options = doc.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad("stream_options", "must be an object")
    include_usage = options.get("include_usage") or False
    if not isinstance(include_usage, bool):
        raise bad("stream_options.include_usage", "must be true or false")
    if include_usage and not stream:
        raise bad("stream_options", "is only allowed with stream=true")
    token_ids = doc.get("return_token_ids") or False
    if not isinstance(token_ids, bool):
        raise bad("return_token_ids", "must be true or false")
    return Options(chat, stream, include_usage, token_ids, logprobs, tools)


def _content(index: int, message: dict[str, Any]) -> str:
    content = message.get("content")
    calls = message.get("tool_calls")
    if content is None and isinstance(calls, list):  # an assistant's tool calls: their JSON text
        return json.dumps([c.get("function") for c in calls if isinstance(c, dict)])
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise unsupported(f"messages[{index}].content", "only text content parts are supported")
            texts.append(part["text"])
        return "".join(texts)
    raise bad(f"messages[{index}].content", "must be a string or a list of text parts")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(name, "must be a number")
    return float(value)


def _int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad(name, f"must be an integer in [{low}, {high}]")
    return value
