"""JSON schemas of protobuf messages by protobuf's JSON mapping (camelCase names, 64-bit integers
as strings, enums as their names, the well-known types as their JSON forms), for the HTTP app's
OpenAPI document (frontend/http/openapi.py)."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

F = FieldDescriptor
INT32 = {F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32}
UINT32 = {F.TYPE_UINT32, F.TYPE_FIXED32}
INT64 = {F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64}
UINT64 = {F.TYPE_UINT64, F.TYPE_FIXED64}
WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?s$"},
    "google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "additionalProperties": True,
    },
}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


class ProtoSchemas:
    """JSON schemas of protobuf messages (and the messages they use), by protobuf's JSON mapping."""

    def __init__(self) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}

    def message(self, descriptor: Descriptor) -> dict[str, Any]:
        name = descriptor.full_name
        if name in WELL_KNOWN:
            return WELL_KNOWN[name]
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder: recursive messages
            properties = {f.json_name: self.field(f) for f in descriptor.fields}
            schema: dict[str, Any] = {
                "type": "object",
                "properties": properties,
                "additionalProperties": False,
            }
            oneofs = [o for o in descriptor.oneofs if not o.name.startswith("_")]  # not proto3 optional
            if oneofs:
                schema["description"] = "; ".join(
                    f"oneof {o.name}: at most one of {', '.join(f.json_name for f in o.fields)}"
                    for o in oneofs
                )
            self.schemas[name] = schema
        return ref(name)

    def field(self, f: FieldDescriptor) -> dict[str, Any]:
        one = self.scalar(f)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value = f.message_type.fields_by_name["value"]
            return {"type": "object", "additionalProperties": self.scalar(value)}
        if f.is_repeated:
            return {"type": "array", "items": one}
        return one

    def scalar(self, f: FieldDescriptor) -> dict[str, Any]:
        t = f.type
        if t == F.TYPE_MESSAGE:
            return self.message(f.message_type)
        if t == F.TYPE_ENUM:
            return {"type": "string", "enum": [v.name for v in f.enum_type.values]}
        if t == F.TYPE_STRING:
            return {"type": "string"}
        if t == F.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        if t == F.TYPE_BOOL:
            return {"type": "boolean"}
        if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
            return {"type": "number"}
        if t in INT32:
            return {"type": "integer", "format": "int32"}
        if t in UINT32:
            return {"type": "integer", "format": "int32", "minimum": 0}
        if t in INT64:
            return {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"}
        if t in UINT64:
            return {"type": "string", "format": "uint64", "pattern": "^[0-9]+$"}
        raise ValueError(f"no schema for field type {t} of {f.full_name}")
