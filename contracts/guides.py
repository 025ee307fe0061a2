"""Structured outputs: the guide a request's output must follow, in one encoding for the frontend
(which checks it) and the worker (which enforces it), and how a guide becomes a grammar.

A guide is a (type, text) pair, in the encoding of TensorRT-LLM's `guided_decoding_guide_type` and
`guided_decoding_guide` tensors, so one frontend path drives the CPU worker and a TensorRT-LLM one:

    json           any JSON object (the text is ignored)
    json_schema    a JSON Schema, as JSON text
    regex          a regular expression the whole output matches (Rust `regex` syntax)
    ebnf_grammar   a grammar in GBNF, llama.cpp's EBNF dialect
    lark_grammar   ours: a grammar in Lark syntax (llguidance's dialect); TensorRT-LLM has none

JSON is generated compact, with one space after `,` and `:` and no other whitespace between tokens:
a small model left free to emit whitespace can loop on it until the output limit.

The grammar engine is llguidance (imported only when a grammar is built): its masks take
microseconds per token on this vocabulary, a schema compiles in about a millisecond, and it needs
no torch, transformers or GPU compiler where it runs (docs/api.md, "Structured outputs").
"""

from __future__ import annotations

import json
from typing import Any

GUIDE_JSON = "json"
GUIDE_JSON_SCHEMA = "json_schema"
GUIDE_REGEX = "regex"
GUIDE_EBNF = "ebnf_grammar"
GUIDE_LARK = "lark_grammar"
GUIDE_TYPES = (GUIDE_JSON, GUIDE_JSON_SCHEMA, GUIDE_REGEX, GUIDE_EBNF, GUIDE_LARK)

MAX_GUIDE_BYTES = 64 << 10  # a longer schema, regex or grammar is refused (SCHEMA_TOO_COMPLEX)
MAX_TOP_LOGPROBS = 20  # alternatives per token a request may ask for (OpenAI's bound)

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
# The grammar engine's resource limits, the same where a guide is checked and where it runs: a guide
# past them is refused, never compiled for long (the defaults allow ~20x more of each).
MAX_GRAMMAR_SIZE = 50_000  # symbols
INITIAL_LEXER_FUEL = 200_000  # about 4 ms of the lexer's work when a grammar is built
MAX_LEXER_STATES = 50_000


class GuideError(ValueError):
    """The guide cannot be a grammar: `kind` is one of the API's reasons (INVALID_SCHEMA, ...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def grammar_of(guide_type: str, guide: str) -> str:
    """The llguidance grammar of a guide (not yet checked against the engine's limits)."""
    from llguidance import LLMatcher
    from llguidance.gbnf_to_lark import GbnfToLarkError, gbnf_to_lark

    if len(guide.encode()) > MAX_GUIDE_BYTES:
        raise GuideError("SCHEMA_TOO_COMPLEX", f"the {guide_type} is over {MAX_GUIDE_BYTES} bytes")
    if guide_type == GUIDE_JSON:
        return LLMatcher.grammar_from_json_schema('{"type": "object"}', defaults=_options())
    if guide_type == GUIDE_JSON_SCHEMA:
        try:
            schema = json.loads(guide)
        except ValueError as e:
            raise GuideError("INVALID_SCHEMA", f"the schema is not JSON: {e}") from None
        if not isinstance(schema, dict | bool):
            raise GuideError("INVALID_SCHEMA", "a schema is a JSON object (or true/false)")
        return LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=_options())
    if guide_type == GUIDE_REGEX:
        return LLMatcher.grammar_from_regex(guide)
    if guide_type == GUIDE_LARK:
        return LLMatcher.grammar_from_lark(guide)
    if guide_type == GUIDE_EBNF:
        try:
            return LLMatcher.grammar_from_lark(gbnf_to_lark(guide))
        except GbnfToLarkError as e:
            raise GuideError("INVALID_GRAMMAR", f"the grammar is not GBNF: {e}") from None
    raise GuideError("INVALID_CONSTRAINT", f"unknown guide type {guide_type[:64]!r}")


def checked_grammar(guide_type: str, guide: str) -> str:
    """grammar_of(), checked for validity and against the limits; GuideError names what is wrong."""
    from llguidance import LLMatcher

    grammar = grammar_of(guide_type, guide)
    failed, messages = LLMatcher.validate_grammar_with_warnings(grammar, None, limits=limits())
    if failed:
        raise GuideError(reason_of(guide_type, messages[0]), messages[0][:1000])
    return grammar


def reason_of(guide_type: str, message: str) -> str:
    """The API's reason for the grammar engine's error message about a guide."""
    if "Unimplemented" in message or "not supported" in message.lower():
        return "UNSUPPORTED_SCHEMA"
    if "too big" in message or "limit" in message or "fuel" in message:
        return "SCHEMA_TOO_COMPLEX"
    if guide_type in (GUIDE_JSON, GUIDE_JSON_SCHEMA):
        return "INVALID_SCHEMA"
    if guide_type == GUIDE_REGEX:
        return "INVALID_REGEX"
    return "INVALID_GRAMMAR"


def limits() -> Any:
    from llguidance import LLParserLimits

    return LLParserLimits(
        max_grammar_size=MAX_GRAMMAR_SIZE,
        initial_lexer_fuel=INITIAL_LEXER_FUEL,
        max_lexer_states=MAX_LEXER_STATES,
        verbose_errors=False,
    )


def _options() -> Any:
    return dict(JSON_OPTIONS)
