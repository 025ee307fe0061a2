"""The synchronous client: `Client(target, api_key)`."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

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

DEFAULT_MODEL = "smollm2-135m"
# Reconnect promptly after a broken connection (gRPC's default first backoff is 1 s).
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100))


def open_channel(target: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    if credentials is None:
        return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
    return grpc.secure_channel(target, credentials, options=CHANNEL_OPTIONS)


def usage_request(start: datetime | None, end: datetime | None) -> usage_pb2.GetUsageRequest:
    req = usage_pb2.GetUsageRequest()
    for field, when in (("window_start", start), ("window_end", end)):
        if when is not None:
            stamp = timestamp_pb2.Timestamp()
            stamp.FromDatetime(when)
            getattr(req, field).CopyFrom(stamp)
    return req


class GenerationStream:
    """One logical generation call: iterate it for typed events. A broken connection is resumed from
    the last event delivered, with no gap and no duplicate; `request_id` is the same on every attempt."""

    def __init__(self, client: Client, cursor: Cursor, timeout: float | None) -> None:
        self._client, self._cursor, self._timeout = client, cursor, timeout
        self._call: Any = None
        self._closed = False
        self._events = self._run()

    @property
    def request_id(self) -> str:
        return self._cursor.request_id

    @property
    def generation_id(self) -> str:
        """Known once the first event arrived."""
        return self._cursor.generation_id

    @property
    def reconnects(self) -> int:
        """How many times the stream was re-established (Resume, or Generate again) after a break."""
        return self._cursor.reconnects

    def __iter__(self) -> Iterator[Event]:
        return self._events

    def __next__(self) -> Event:
        return next(self._events)

    def text(self) -> str:
        """Consumes the stream and returns the generated text."""
        return "".join(getattr(e, "text", "") for e in self)

    def cancel(self) -> generations_pb2.Generation:
        """Cancels the generation on the server (its stream then ends with `finished` CANCELED)."""
        generation_id = self.generation_id or self._client.get(request_id=self.request_id).generation_id
        return self._client.cancel(generation_id)

    def close(self) -> None:
        """Stops reading locally; the server cancels a generation nobody follows after its grace."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def _run(self) -> Iterator[Event]:
        cursor, stub, meta = self._cursor, self._client._generations, self._client._metadata
        while not cursor.finished:
            resume = cursor.resume_request()
            if resume is None:
                self._call = stub.Generate(cursor.request, metadata=meta, timeout=self._timeout)
            else:
                self._call = stub.Resume(resume, metadata=meta, timeout=self._timeout)
            try:
                for raw in self._call:
                    event = cursor.accept(raw)
                    if event is not None:
                        yield event
                return
            except grpc.RpcError as e:
                if self._closed:
                    return
                error = ApiError.from_rpc_error(e)
                delay = cursor.retry_delay(error)
                if delay is None:
                    raise error from None
                time.sleep(delay)


class Client:
    """A client of one platform endpoint, authenticated by a tenant API key. Thread-safe."""

    def __init__(
        self,
        target: str,
        api_key: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.Channel | None = None,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
    ) -> None:
        self.channel = channel if channel is not None else open_channel(target, credentials)
        self._metadata = (("authorization", f"Bearer {api_key}"),)
        self._retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._generations = generations_pb2_grpc.GenerationsStub(self.channel)
        self._models = models_pb2_grpc.ModelsStub(self.channel)
        self._usage = usage_pb2_grpc.UsageStub(self.channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

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
    ) -> GenerationStream:
        """Starts a generation from `prompt` text or chat `messages`. Without `request_id` one is drawn
        here, once, and reused by every retry of this call."""
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
        return GenerationStream(self, Cursor(request, self._retry, rng), timeout)

    def get(
        self, generation_id: str | None = None, *, request_id: str | None = None
    ) -> generations_pb2.Generation:
        """A generation's recorded state, by generation id or by request id."""
        req = (
            generations_pb2.GetGenerationRequest(generation_id=generation_id)
            if generation_id
            else (generations_pb2.GetGenerationRequest(request_id=request_id))
        )
        return self._unary(self._generations.GetGeneration, req)

    def cancel(self, generation_id: str) -> generations_pb2.Generation:
        return self._unary(
            self._generations.CancelGeneration,
            generations_pb2.CancelGenerationRequest(generation_id=generation_id),
        )

    def usage(self, start: datetime | None = None, end: datetime | None = None) -> usage_pb2.GetUsageResponse:
        """The tenant's billed usage in [start, end) (all time by default)."""
        return self._unary(self._usage.GetUsage, usage_request(start, end))

    def models(self) -> models_pb2.ListModelsResponse:
        return self._unary(self._models.ListModels, models_pb2.ListModelsRequest())

    def _unary(self, method: Any, request: Any) -> Any:
        try:
            return method(request, metadata=self._metadata)
        except grpc.RpcError as e:
            raise ApiError.from_rpc_error(e) from None
