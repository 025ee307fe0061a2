"""Admin's artifact calls: a push into the repository (frontend/admin/push.py) that ends with the version
loaded and READY, and the download of a repository file that workers fetch versions with.

A push holds the deploy lock only to load the version; the upload itself runs beside others. Each
chunk is written on a thread (file I/O), one at a time, in the order it came.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from artifacts.manifest import MANIFEST, read_manifest
from control.model_versions import check_route
from frontend.admin.push import Repository
from frontend.admin.rollout import Rollout
from frontend.auth import current_admin
from frontend.catalog.cache import manifest_spec, version_spec
from frontend.catalog.messages import route_message, version_message
from frontend.catalog.registry import ModelRegistry, ServedVersion, load_version
from frontend.dispatch.worker_pool import WorkerPool, ready_workers
from frontend.refusals import InvalidRequest, NotFound, OutOfRange
from frontend.rpc.handlers import MALFORMED
from llm.v1 import admin_pb2

FETCH_CHUNK = 256 << 10  # bytes per downloaded chunk (below every gRPC message cap)


class ArtifactCalls:
    def __init__(
        self,
        repository: Repository,
        registry: ModelRegistry,
        pool: WorkerPool,
        rollout: Rollout,
        deploy: Callable[[ServedVersion], Awaitable[None]],
    ) -> None:
        """deploy: loads a verified version on the workers and records it READY (under a lock)."""
        self.repository = repository
        self.registry = registry
        self.pool = pool
        self.rollout = rollout
        self.deploy = deploy

    async def push(
        self, requests: AsyncIterator[admin_pb2.PushModelVersionRequest]
    ) -> admin_pb2.PushModelVersionResponse:
        first = await anext(aiter(requests), None)
        if first is None or first is MALFORMED or first.WhichOneof("part") != "manifest":
            raise InvalidRequest("MANIFEST_FIRST", "a push starts with the manifest")
        if first.canary_percent > 100:
            raise InvalidRequest("INVALID_ROUTE", "canary_percent must be 0 to 100")
        if first.alias:
            check_route(first.alias, {"-": 1.0})  # a bad alias is refused before any byte is sent
        upload = self.repository.upload(first.manifest)
        try:
            folder = await asyncio.to_thread(upload.start)
            present = folder is not None
            await asyncio.to_thread(
                self.rollout.check_push,
                manifest_spec(upload.manifest, upload.repository.folder(upload.manifest)),
            )
            if folder is None:
                async for message in requests:
                    if message is MALFORMED or message.WhichOneof("part") != "chunk":
                        raise InvalidRequest("MALFORMED_CHUNK", "after the manifest a push sends file chunks")
                    c = message.chunk
                    await asyncio.to_thread(upload.write, c.file, c.offset, c.data)
                folder = await asyncio.to_thread(upload.finish)
        finally:
            upload.abort()  # not awaited: a cancelled call still removes its staging folder
        version = await asyncio.to_thread(load_version, folder)
        await asyncio.to_thread(self.rollout.record_push, version_spec(version), current_admin())
        await self.deploy(version)
        self.registry.set_status(version.version_id, "READY")
        route = None
        if first.alias:
            weights = await asyncio.to_thread(
                self.rollout.canary, first.alias, version.version_id, first.canary_percent, current_admin()
            )
            route = route_message(first.alias, weights)
        ready = await ready_workers(self.pool, version)
        return admin_pb2.PushModelVersionResponse(
            version=version_message(version, ready, "READY"), already_present=present, route=route
        )

    async def fetch(
        self, request: admin_pb2.FetchArtifactFileRequest
    ) -> AsyncIterator[admin_pb2.ArtifactChunk]:
        folder = self._folder(request.version_id)
        manifest = await asyncio.to_thread(read_manifest, folder)
        if request.file != MANIFEST and request.file not in manifest.files:
            raise InvalidRequest("UNKNOWN_FILE", f"{request.file[:128]!r} is not a file of the artifact")
        path = folder / request.file
        size = (await asyncio.to_thread(path.stat)).st_size
        if request.offset > size:
            raise OutOfRange("OFFSET_PAST_END", f"{request.file} has {size} bytes")
        with path.open("rb") as f:
            f.seek(request.offset)
            offset = request.offset
            while data := await asyncio.to_thread(f.read, FETCH_CHUNK):
                yield admin_pb2.ArtifactChunk(file=request.file, offset=offset, data=data)
                offset += len(data)

    def _folder(self, version_id: str) -> Path:
        version = self.registry.versions.get(version_id)
        if version is not None:
            return version.artifact_dir
        name, _, ver = version_id.partition("@")
        folder = self.repository.root / name / ver
        if not ver or "/" in version_id or ".." in version_id or not (folder / MANIFEST).is_file():
            raise NotFound("VERSION_NOT_FOUND", f"no artifact {version_id[:128]!r}")
        return folder
