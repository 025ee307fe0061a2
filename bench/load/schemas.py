"""JSON schemas of the kinds applications send (JSONSchemaBench-style), for the structured-output
tests and `python -m bench structured`: flat records, nesting, enums, numbers with bounds, arrays
with limits, optional keys, closed objects, unions, references, nulls, string lengths and patterns.
Each is named for what it exercises."""

from __future__ import annotations

from typing import Any

CLOSED = {"additionalProperties": False}


def obj(props: dict[str, Any], required: list[str] | None = None, closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    schema["required"] = list(props) if required is None else required
    return schema | (CLOSED if closed else {})


S = {"type": "string", "maxLength": 24}
I = {"type": "integer"}  # noqa: E741 - a schema's name, as JSON Schema spells the type
N = {"type": "number"}
B = {"type": "boolean"}

SCHEMAS: dict[str, dict[str, Any]] = {
    "person": obj({"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150}}),
    "point": obj({"x": N, "y": N}),
    "flag": obj({"enabled": B}),
    "weather": obj({"city": S, "temp": N, "unit": {"enum": ["C", "F"]}}),
    "color_enum": obj({"color": {"enum": ["red", "green", "blue"]}}),
    "mixed_enum": obj({"v": {"enum": [1, "two", True, None]}}),
    "const": obj({"kind": {"const": "event"}, "id": I}),
    "bounded_int": obj({"n": {"type": "integer", "minimum": 10, "maximum": 20}}),
    "exclusive_bounds": obj({"p": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}),
    "negative_int": obj({"n": {"type": "integer", "maximum": -1}}),
    "array_of_ints": obj({"values": {"type": "array", "items": I, "minItems": 1, "maxItems": 4}}),
    "array_of_strings": obj({"tags": {"type": "array", "items": S, "maxItems": 3}}),
    "fixed_array": obj({"pair": {"type": "array", "items": I, "minItems": 2, "maxItems": 2}}),
    "empty_ok_array": obj({"xs": {"type": "array", "items": B, "maxItems": 2}}),
    "nested": obj({"user": obj({"name": S, "address": obj({"street": S, "zip": S})})}),
    "deep": obj({"a": obj({"b": obj({"c": obj({"d": I})})})}),
    "array_of_objects": obj(
        {"items": {"type": "array", "items": obj({"id": I, "ok": B}), "minItems": 1, "maxItems": 3}}
    ),
    "optional_keys": obj({"name": S, "nickname": S, "age": I}, required=["name"]),
    "all_optional": obj({"a": I, "b": S}, required=[]),
    "open_object": obj({"name": S}, closed=False),
    "string_lengths": obj({"code": {"type": "string", "minLength": 3, "maxLength": 3}}),
    "pattern": obj({"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}),
    "pattern_word": obj({"slug": {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 20}}),
    "nullable": obj({"note": {"type": ["string", "null"], "maxLength": 10}}),
    "null_only": obj({"nothing": {"type": "null"}}),
    "any_of": obj({"value": {"anyOf": [I, {"type": "string", "maxLength": 8}]}}),
    "one_of_objects": obj(
        {"shape": {"anyOf": [obj({"circle": N}), obj({"square": N})]}},
    ),
    "refs": {
        "$defs": {"item": obj({"sku": S, "qty": {"type": "integer", "minimum": 1, "maximum": 9}})},
        **obj({"first": {"$ref": "#/$defs/item"}, "second": {"$ref": "#/$defs/item"}}),
    },
    "array_of_refs": {
        "$defs": {"tag": {"enum": ["a", "b", "c"]}},
        **obj({"tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3}}),
    },
    "number_array_bounds": obj(
        {"scores": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 10}, "maxItems": 3}}
    ),
    "integer_enum": obj({"level": {"enum": [1, 2, 3]}}),
    "boolean_pair": obj({"a": B, "b": B}),
    "three_strings": obj({"first": S, "middle": S, "last": S}),
    "date_pattern": obj({"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}}),
    "product": obj(
        {
            "name": S,
            "price": {"type": "number", "minimum": 0},
            "in_stock": B,
            "tags": {"type": "array", "items": S, "maxItems": 2},
        }
    ),
    "event": obj(
        {
            "title": S,
            "when": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"},
            "attendees": {"type": "integer"},
        }
    ),
    "matrix": obj(
        {"rows": {"type": "array", "items": {"type": "array", "items": I, "maxItems": 2}, "maxItems": 2}}
    ),
    "recipe": obj(
        {
            "title": S,
            "steps": {"type": "array", "items": obj({"n": I, "text": S}), "maxItems": 2},
            "vegan": B,
        },
        required=["title", "steps"],
    ),
    "api_response": obj(
        {"status": {"enum": ["ok", "error"]}, "data": {"anyOf": [obj({"count": I}), {"type": "null"}]}}
    ),
    "coordinates": obj(
        {
            "lat": {"type": "number", "minimum": -90, "maximum": 90},
            "lon": {"type": "number", "minimum": -180, "maximum": 180},
        }
    ),
    "key_value_list": obj({"pairs": {"type": "array", "items": obj({"k": S, "v": S}), "maxItems": 2}}),
    "version": obj({"major": I, "minor": I, "patch": I}),
    "rgb": obj({"r": {"type": "integer", "minimum": 0, "maximum": 255}, "g": I, "b": I}, required=["r"]),
    "sentiment": obj({"label": {"enum": ["positive", "negative", "neutral"]}, "score": N}),
    "classification": obj({"labels": {"type": "array", "items": {"enum": ["spam", "ham"]}, "maxItems": 2}}),
    "tree": {
        "$defs": {
            "node": obj(
                {"value": I, "children": {"type": "array", "items": obj({"value": I}), "maxItems": 2}}
            )
        },
        "$ref": "#/$defs/node",
    },
    "user_settings": obj(
        {"theme": {"enum": ["light", "dark"]}, "font_size": {"type": "integer", "minimum": 8, "maximum": 32}},
        required=["theme"],
    ),
    "search_query": obj({"q": S, "limit": {"type": "integer", "minimum": 1, "maximum": 50}, "exact": B}),
    "money": obj({"amount": {"type": "number", "minimum": 0}, "currency": {"enum": ["USD", "EUR", "JPY"]}}),
    "top_level_array": {"type": "array", "items": I, "minItems": 1, "maxItems": 3},
    "top_level_enum": {"enum": ["yes", "no", "maybe"]},
    "top_level_string": {"type": "string", "maxLength": 12},
    "top_level_integer": {"type": "integer", "minimum": 0, "maximum": 999},
    "address_book": obj(
        {
            "entries": {
                "type": "array",
                "items": obj({"name": S, "phone": {"type": "string", "pattern": "^[0-9]{3}$"}}),
                "maxItems": 2,
            }
        }
    ),
}
