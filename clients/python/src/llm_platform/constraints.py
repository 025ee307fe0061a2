"""Structured outputs: the constraint a generation's text must follow (`generate(constraint=...)`).

client.generate(messages=..., constraint=json_schema({"type": "object", ...}))
client.generate("Pick one:", constraint=choice(["red", "green"]))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from llm_platform.v1 import generations_pb2 as pb


def json_schema(schema: Mapping[str, Any] | str) -> pb.OutputConstraint:
    """Output that validates against the JSON Schema (a mapping, or its JSON text)."""
    return pb.OutputConstraint(json_schema=schema if isinstance(schema, str) else json.dumps(schema))


def json_object() -> pb.OutputConstraint:
    """Any JSON object."""
    return pb.OutputConstraint(json_object=True)


def regex(pattern: str) -> pb.OutputConstraint:
    """Output the regular expression matches whole."""
    return pb.OutputConstraint(regex=pattern)


def choice(options: Iterable[str]) -> pb.OutputConstraint:
    """Exactly one of the strings."""
    return pb.OutputConstraint(choice=pb.ChoiceConstraint(choices=list(options)))


def lark_grammar(grammar: str) -> pb.OutputConstraint:
    """Output the Lark grammar accepts."""
    return pb.OutputConstraint(lark_grammar=grammar)
