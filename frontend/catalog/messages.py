"""The served models as the API's messages (protos/llm/v1/models.proto): a version with its
readiness, an alias route, the ListModels answer. The Models servicer, the HTTP app's /v1/models
and the Admin calls share them."""

from __future__ import annotations

from frontend.catalog.registry import ModelRegistry, ServedVersion
from frontend.dispatch.worker_pool import WorkerPool, ready_workers
from llm.v1 import models_pb2


def version_message(
    version: ServedVersion, ready_workers: int, status: str = "READY"
) -> models_pb2.ModelVersion:
    m = version.manifest
    return models_pb2.ModelVersion(
        name=m.name,
        version=m.version,
        id=m.version_id,
        context_length=m.context_length,
        compatibility_key=m.compatibility_key,
        ready=ready_workers > 0,
        ready_workers=ready_workers,
        weights_sha256=m.files["model.safetensors"],
        tokenizer_sha256=m.files["tokenizer.json"],
        template_sha256=m.files["chat_template.jinja"],
        quantization=m.quantization,
        status=status,
        size_bytes=version.size_bytes,
    )


def route_message(alias: str, route: dict[str, float]) -> models_pb2.AliasRoute:
    targets = [models_pb2.WeightedVersion(version_id=v, weight=round(w)) for v, w in sorted(route.items())]
    return models_pb2.AliasRoute(alias=alias, targets=targets)


async def list_models(
    registry: ModelRegistry, pool: WorkerPool, allowed: tuple[str, ...] = ()
) -> models_pb2.ListModelsResponse:
    """Every served version and alias; for a tenant limited to the aliases `allowed`, those aliases
    and the versions they route to."""
    routes = {a: r for a, r in sorted(registry.routes.items()) if not allowed or a in allowed}
    routed = {v for r in routes.values() for v in r}
    versions = [
        version_message(version, await ready_workers(pool, version), registry.status(version.version_id))
        for version in registry.versions.values()
        if not allowed or version.version_id in routed
    ]
    aliases = [route_message(a, r) for a, r in routes.items()]
    return models_pb2.ListModelsResponse(versions=versions, aliases=aliases)
