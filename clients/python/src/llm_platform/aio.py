"""The asyncio client: `AsyncClient(target, api_key)`, the same calls as `Client`, awaited."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import grpc

from llm_platform.client import CHANNEL_OPTIONS, DEFAULT_MODEL, usage_request
from llm_platform.errors import ApiError
from llm_platform.events import Event
from llm_platform.retry import Cursor, Messages, RetryPolicy, build_request
from llm_platform.v1 import (
    generations_pb2,
    generations_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)


class AsyncGenerationStream:
    """`async for event in stream`: as `GenerationStream`, resumed after a broken connection."""

    def __init__(self, client: AsyncClient, cursor: Cursor, timeout: float | None) -> None:
        self._client, self._cursor, self._timeout = client, cursor, timeout
        self._call: Any = None
        self._closed = False
        self._events = self._run()

    @property
    def request_id(self) -> str:
        return self._cursor.request_id

    @property
    def generation_id(self) -> str:
        return self._cursor.generation_id

    @property
    def reconnects(self) -> int:
        return self._cursor.reconnects

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def text(self) -> str:
        return "".join([getattr(e, "text", "") async for e in self])

    async def cancel(self) -> generations_pb2.Generation:
        generation_id = (
            self.generation_id or (await self._client.get(request_id=self.request_id)).generation_id
        )
        return await self._client.cancel(generation_id)

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    async def _run(self) -> AsyncIterator[Event]:
        cursor, stub, meta = self._cursor, self._client._generations, self._client._metadata
        while not cursor.finished:
            resume = cursor.resume_request()
            if resume is None:
                self._call = stub.Generate(cursor.request, metadata=meta, timeout=self._timeout)
            else:
                self._call = stub.Resume(resume, metadata=meta, timeout=self._timeout)
            try:
                async for raw in self._call:
                    event = cursor.accept(raw)
                    if event is not None:
                        yield event
                return
            except (grpc.RpcError, asyncio.CancelledError) as e:
                if self._closed:
                    return
                if not isinstance(e, grpc.RpcError):
                    raise
                error = ApiError.from_rpc_error(e)
                delay = cursor.retry_delay(error)
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)


class AsyncClient:
    """An asyncio client of one platform endpoint; create it inside the event loop that uses it."""

    def __init__(
        self,
        target: str,
        api_key: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.aio.Channel | None = None,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
    ) -> None:
        if channel is None:
            channel = (
                grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
                if credentials is None
                else grpc.aio.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
            )
        self.channel = channel
        self._metadata = (("authorization", f"Bearer {api_key}"),)
        self._retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._generations = generations_pb2_grpc.GenerationsStub(channel)
        self._models = models_pb2_grpc.ModelsStub(channel)
        self._usage = usage_pb2_grpc.UsageStub(channel)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    def generate(
        self,
        prompt: str | None = None,
        *,
        messages: Messages | None = None,
        model: str = DEFAULT_MODEL,
        max_output_tokens: int = 256,
        request_id: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        seed: int | None = None,
        stop: tuple[str, ...] | list[str] = (),
        ignore_eos: bool = False,
        batch: bool = False,
        constraint: generations_pb2.OutputConstraint | None = None,
        logprobs: bool = False,
        top_logprobs: int = 0,
        timeout: float | None = None,
    ) -> AsyncGenerationStream:
        request = build_request(
            prompt,
            messages,
            model=model,
            max_output_tokens=max_output_tokens,
            request_id=request_id,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            stop=stop,
            ignore_eos=ignore_eos,
            batch=batch,
            constraint=constraint,
            logprobs=logprobs,
            top_logprobs=top_logprobs,
        )
        rng = random.Random(self._rng.random())
        return AsyncGenerationStream(self, Cursor(request, self._retry, rng), timeout)

    async def get(
        self, generation_id: str | None = None, *, request_id: str | None = None
    ) -> generations_pb2.Generation:
        key = {"generation_id": generation_id} if generation_id else {"request_id": request_id}
        return await self._unary(self._generations.GetGeneration, generations_pb2.GetGenerationRequest(**key))

    async def cancel(self, generation_id: str) -> generations_pb2.Generation:
        request = generations_pb2.CancelGenerationRequest(generation_id=generation_id)
        return await self._unary(self._generations.CancelGeneration, request)

    async def usage(
        self, start: datetime | None = None, end: datetime | None = None
    ) -> usage_pb2.GetUsageResponse:
        return await self._unary(self._usage.GetUsage, usage_request(start, end))

    async def models(self) -> models_pb2.ListModelsResponse:
        return await self._unary(self._models.ListModels, models_pb2.ListModelsRequest())

    async def _unary(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, metadata=self._metadata)
        except grpc.RpcError as e:
            raise ApiError.from_rpc_error(e) from None
