"""The OpenAI endpoints' structured outputs, log-probabilities and tool calls, as GenerateRequest
fields (frontend/http/openai.py maps the rest; frontend/http/openai_calls.py renders the answers).

    response_format {"type": "json_object"}          constraint.json_object
    response_format {"type": "json_schema", ...}      constraint.json_schema (enforced, strict or not)
    structured_outputs (vLLM's): json, json_object,   constraint.json_schema / json_object / regex /
      regex, choice, grammar                          choice / gbnf_grammar ("::=") or lark_grammar
    logprobs, top_logprobs (chat); logprobs: N        logprobs, top_logprobs
      (completions)
    tools + tool_choice "none"                        nothing: a free answer
    tools + tool_choice {"type": "function", ...}     constraint.json_schema = that function's
                                                      parameters; the output is its arguments
    tools + tool_choice "required"                    constraint.json_schema = one of the functions:
                                                      {"name": <one of them>, "arguments": <its>}
    tools + tool_choice "auto" (tools' default)       400 TOOLS_NOT_SUPPORTED: whether to call a
                                                      tool is the model's free choice, which needs
                                                      a template that renders tools and a parser
                                                      of its free-form calls (neither is here)

At most one of response_format, structured_outputs and a tool_choice may constrain a request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from contracts.guides import MAX_TOP_LOGPROBS
from frontend.refusals import InvalidRequest
from llm.v1 import generations_pb2 as pb

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(slots=True, frozen=True)
class ToolCalls:
    """The answer is a tool call: `name` fixed (its output is the arguments), or one of `names`
    (its output is {"name": ..., "arguments": ...})."""

    name: str | None
    names: tuple[str, ...]


def bad(name: str, rule: str) -> InvalidRequest:
    return InvalidRequest("INVALID_PARAMETER", f"{name} {rule}", field=name)


def apply(doc: dict[str, Any], request: pb.GenerateRequest, chat: bool) -> ToolCalls | None:
    """Sets the request's constraint and log-probabilities from the OpenAI body; the tool calls
    the answer is made of, if any."""
    _logprobs(doc, request, chat)
    constraints: list[tuple[str, pb.OutputConstraint]] = []
    response_format = doc.get("response_format")
    if response_format is not None:
        found = _response_format(response_format)
        if found is not None:
            constraints.append(("response_format", found))
    structured = doc.get("structured_outputs")
    if structured is not None:
        constraints.append(("structured_outputs", _structured_outputs(structured)))
    if not chat and doc.get("tools") not in (None, []):
        raise InvalidRequest(
            "UNSUPPORTED_PARAMETER", "a completion has no tool calls: use chat", field="tools"
        )
    tools = _tools(doc.get("tools"), doc.get("tool_choice")) if chat else None
    if tools is not None:
        constraints.append(("tool_choice", _tool_constraint(tools, doc["tools"])))
    if len(constraints) > 1:
        names = " and ".join(n for n, _ in constraints)
        raise InvalidRequest("CONFLICTING_SETTINGS", f"{names} each constrain the output: send one")
    if constraints:
        request.constraint.CopyFrom(constraints[0][1])
    return tools


def _logprobs(doc: dict[str, Any], request: pb.GenerateRequest, chat: bool) -> None:
    logprobs = doc.get("logprobs")
    if chat:
        if logprobs not in (None, True, False):
            raise bad("logprobs", "must be true or false")
        top = doc.get("top_logprobs")
        request.logprobs = bool(logprobs)
        if top is not None:
            request.top_logprobs = _count("top_logprobs", top)
    elif logprobs is not None:  # completions: the number of alternatives
        request.logprobs = True
        request.top_logprobs = _count("logprobs", logprobs)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS:
        raise bad(name, f"must be an integer in [0, {MAX_TOP_LOGPROBS}]")
    return value


def _response_format(value: Any) -> pb.OutputConstraint | None:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise bad("response_format", "must be an object with a type")
    kind = value["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return pb.OutputConstraint(json_object=True)
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict | bool):
            raise bad("response_format.json_schema", "must be an object with a schema")
        return pb.OutputConstraint(json_schema=json.dumps(spec.get("schema", {})))
    raise InvalidRequest(
        "UNSUPPORTED_PARAMETER",
        f"response_format type {kind[:40]!r} is not supported",
        field="response_format",
    )


def _structured_outputs(value: Any) -> pb.OutputConstraint:
    if not isinstance(value, dict) or len([k for k in value if value[k] is not None]) != 1:
        raise bad("structured_outputs", "must be an object with exactly one of json, regex, choice, grammar")
    key, spec = next((k, v) for k, v in value.items() if v is not None)
    if key == "json" and isinstance(spec, dict | bool):
        return pb.OutputConstraint(json_schema=json.dumps(spec))
    if key == "json" and isinstance(spec, str):
        return pb.OutputConstraint(json_schema=spec)
    if key == "json_object" and spec is True:
        return pb.OutputConstraint(json_object=True)
    if key == "regex" and isinstance(spec, str):
        return pb.OutputConstraint(regex=spec)
    if key == "choice" and isinstance(spec, list) and all(isinstance(c, str) for c in spec):
        return pb.OutputConstraint(choice=pb.ChoiceConstraint(choices=spec))
    if key == "grammar" and isinstance(spec, str):
        if "::=" in spec:
            return pb.OutputConstraint(gbnf_grammar=spec)
        return pb.OutputConstraint(lark_grammar=spec)
    raise bad(f"structured_outputs.{key[:40]}", "is not a constraint this platform knows")


def _tools(tools: Any, choice: Any) -> ToolCalls | None:
    if tools is None or tools == []:
        if choice not in (None, "none", "auto"):
            raise bad("tool_choice", "needs tools")
        return None
    if not isinstance(tools, list):
        raise bad("tools", "must be a list")
    names = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad(f"tools[{i}]", "must be a function with a name")
        if not FUNCTION_NAME.match(function["name"]):
            raise bad(f"tools[{i}].function.name", "must be 1..64 of a-z, A-Z, 0-9, _ and -")
        if not isinstance(function.get("parameters", {}), dict):
            raise bad(f"tools[{i}].function.parameters", "must be a JSON schema object")
        names.append(function["name"])
    if len(set(names)) != len(names):
        raise bad("tools", "must have distinct names")
    if choice == "none":
        return None
    if choice is None or choice == "auto":
        raise InvalidRequest(
            "TOOLS_NOT_SUPPORTED",
            'tool_choice "auto" (the default with tools) is not supported: send tool_choice "required" '
            "or a named function, and the answer is constrained to a call",
            field="tool_choice",
        )
    if choice == "required":
        return ToolCalls(None, tuple(names))
    function = (
        choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    )
    if not isinstance(function, dict):
        raise bad("tool_choice", 'must be "none", "auto", "required" or a named function')
    named = function.get("name")
    if not isinstance(named, str) or named not in names:
        raise bad("tool_choice", "names no function of tools")
    return ToolCalls(named, tuple(names))


def _tool_constraint(calls: ToolCalls, tools: list[dict[str, Any]]) -> pb.OutputConstraint:
    parameters = {t["function"]["name"]: t["function"].get("parameters") or {"type": "object"} for t in tools}
    if calls.name is not None:
        return pb.OutputConstraint(json_schema=json.dumps(parameters[calls.name]))
    one_of = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": parameters[name]},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for name in calls.names
    ]
    return pb.OutputConstraint(json_schema=json.dumps({"anyOf": one_of}))
