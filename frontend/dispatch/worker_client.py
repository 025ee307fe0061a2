"""The client side of a Triton worker: one streamed inference per generation.

Requests use the TensorRT-LLM backend's tensor names (contracts/worker.py), so the same code drives
the CPU (PyTorch engine) model and a TensorRT-LLM model. Closing the token iterator early cancels the
Triton request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from dataclasses import dataclass

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput, InferRequestedOutput, InferResult
from tritonclient.utils import InferenceServerException

from contracts import worker as wire
from contracts.sampling import TOP_K_OFF, TOP_P_OFF
from contracts.tier import Tier
from frontend.dispatch.worker_liveness import Liveness, answer_within


class WorkerError(Exception):
    """The worker rejected or failed the request (its message says why)."""


class WorkerCapacityError(WorkerError):
    """The worker cannot take the request now (its KV reservation does not fit)."""


class WorkerLost(Exception):
    """The stream to the worker broke before the request's final response."""


class WorkerDown(WorkerLost):
    """Triton answered for the worker: its model cannot run requests now (the Python-backend stub
    died or is stopped, the model is not loaded or unloading): UNAVAILABLE, never INTERNAL."""


TRITON_DOWN = ("is not healthy", "unknown model", "is not found", "not ready", "no available version")


def is_worker_down(message: str, extensions: bool) -> bool:
    """Our CPU worker's UNLOADING refusal, and any error Triton itself sent (our worker's own carry a
    reason, contracts/worker.py); from a TensorRT-LLM worker, Triton's phrases (TRITON_DOWN)."""
    reason, _ = wire.parse_refusal(message)
    if reason is not None:
        return reason is wire.Refusal.UNLOADING
    return extensions or any(phrase in message for phrase in TRITON_DOWN)


@dataclass(slots=True, frozen=True)
class WorkerChunk:
    """One streamed response: new tokens (none in the admission response), and the prompt's counts
    where the response carries them (our CPU worker's admission response; None otherwise)."""

    token_ids: list[int]
    num_input_tokens: int | None = None
    num_cached_tokens: int | None = None
    logprobs: tuple[ChunkLogprob, ...] = ()  # one per token id, when the request asked for them


@dataclass(slots=True, frozen=True)
class ChunkLogprob:
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob) of the most likely tokens, best first


@dataclass(slots=True, frozen=True)
class WorkerRequest:
    model: str  # Triton model name of the pinned version
    prompt_ids: tuple[int, ...]
    max_output_tokens: int
    end_id: int | None  # None: ignore end-of-sequence (sent as -1, as TensorRT-LLM expects)
    temperature: float = 0.0
    top_k: int = TOP_K_OFF
    top_p: float = TOP_P_OFF
    seed: int | None = None
    generation_id: str = ""
    epoch: int = 1
    cache_salt: str = ""
    tenant_weight: float = 1.0
    tier: Tier = Tier.INTERACTIVE
    trace_headers: tuple[tuple[str, str], ...] = ()  # W3C trace context (traceparent) for Triton
    guide: tuple[str, str] | None = None  # structured output: (guide type, guide), contracts/guides.py
    logprobs: bool = False
    top_logprobs: int = 0  # alternatives per token (our worker only; TensorRT-LLM reports none)


def _tensor(name: str, value: np.ndarray, dtype: str) -> InferInput:
    tensor = InferInput(name, list(value.shape), dtype)
    tensor.set_data_from_numpy(value)
    return tensor


# What the frontend asks for: the new tokens, and from our worker the prompt's counts (sent only in
# its admission response). Output token counts are the frontend's own: it sees every token.
REQUESTED = (wire.OUTPUT_IDS,)
REQUESTED_EXTENSIONS = (wire.NUM_INPUT_TOKENS, wire.NUM_CACHED_TOKENS)
REQUESTED_LOGPROBS = (wire.OUTPUT_LOG_PROBS,)  # ... when the request asked for log-probabilities
REQUESTED_TOP_LOGPROBS = (wire.OUTPUT_TOP_LOGPROB_IDS, wire.OUTPUT_TOP_LOGPROBS)


def parse_response(result: InferResult) -> WorkerChunk:
    """One streamed response's tokens and counts, read straight from the raw output contents
    Triton's gRPC frontend sends (little-endian INT32, in the order of `outputs`). WorkerError when
    a response has no raw contents for its outputs."""
    response = result.get_response()
    raw = response.raw_output_contents
    if len(raw) != len(response.outputs):
        raise WorkerError(f"malformed worker response: {len(response.outputs)} outputs, {len(raw)} raw")
    ids: list[int] = []
    counts: dict[str, int] = {}
    floats: dict[str, np.ndarray] = {}
    for output, data in zip(response.outputs, raw, strict=True):
        if output.name == wire.OUTPUT_IDS:
            ids = np.frombuffer(data, dtype="<i4").tolist()
        elif output.name in REQUESTED_EXTENSIONS and len(data) >= 4:
            counts[output.name] = int.from_bytes(data[:4], "little", signed=True)
        elif output.name in (*REQUESTED_LOGPROBS, *REQUESTED_TOP_LOGPROBS):
            dtype = "<i4" if output.name == wire.OUTPUT_TOP_LOGPROB_IDS else "<f4"
            floats[output.name] = np.frombuffer(data, dtype=dtype).reshape(list(output.shape))
    chunk = WorkerChunk(ids, counts.get(wire.NUM_INPUT_TOKENS), counts.get(wire.NUM_CACHED_TOKENS))
    return _with_logprobs(chunk, floats) if wire.OUTPUT_LOG_PROBS in floats and ids else chunk


def _with_logprobs(chunk: WorkerChunk, outputs: dict[str, np.ndarray]) -> WorkerChunk:
    values = outputs[wire.OUTPUT_LOG_PROBS].reshape(-1).tolist()  # [1, 1, n]
    if len(values) != len(chunk.token_ids):
        raise WorkerError(
            f"malformed worker response: {len(values)} logprobs for {len(chunk.token_ids)} tokens"
        )
    top_ids = outputs.get(wire.OUTPUT_TOP_LOGPROB_IDS)  # [1, n, k]
    top_values = outputs.get(wire.OUTPUT_TOP_LOGPROBS)
    tops: list[tuple[tuple[int, float], ...]] = [()] * len(values)
    if top_ids is not None and top_values is not None and top_ids.size:
        tops = [
            tuple(zip(i.tolist(), v.tolist(), strict=True))
            for i, v in zip(
                top_ids.reshape(len(values), -1), top_values.reshape(len(values), -1), strict=True
            )
        ]
    logprobs = tuple(ChunkLogprob(value, top) for value, top in zip(values, tops, strict=True))
    return WorkerChunk(chunk.token_ids, chunk.num_input_tokens, chunk.num_cached_tokens, logprobs)


def build_inputs(req: WorkerRequest, extensions: bool = True) -> list[InferInput]:
    """The request's tensors; without `extensions`, only those the TensorRT-LLM backend declares."""
    ids = np.asarray([req.prompt_ids], dtype=np.int32)  # [1, T]
    inputs = [
        _tensor(wire.INPUT_IDS, ids, "INT32"),
        _tensor(wire.INPUT_LENGTHS, np.asarray([[ids.shape[1]]], dtype=np.int32), "INT32"),
        _tensor(wire.REQUEST_OUTPUT_LEN, np.asarray([[req.max_output_tokens]], dtype=np.int32), "INT32"),
        _tensor(
            wire.END_ID, np.asarray([[-1 if req.end_id is None else req.end_id]], dtype=np.int32), "INT32"
        ),
        _tensor(wire.STREAMING, np.asarray([[True]], dtype=bool), "BOOL"),
        _tensor(wire.TEMPERATURE, np.asarray([[req.temperature]], dtype=np.float32), "FP32"),
        _tensor(wire.RUNTIME_TOP_K, np.asarray([[req.top_k]], dtype=np.int32), "INT32"),
        _tensor(wire.RUNTIME_TOP_P, np.asarray([[req.top_p]], dtype=np.float32), "FP32"),
    ]
    if req.seed is not None:
        inputs.append(_tensor(wire.RANDOM_SEED, np.asarray([[req.seed]], dtype=np.uint64), "UINT64"))
    if req.guide is not None:
        guide_type, guide = req.guide
        inputs.append(
            _tensor(
                wire.GUIDED_DECODING_GUIDE_TYPE, np.asarray([[guide_type.encode()]], dtype=object), "BYTES"
            )
        )
        inputs.append(
            _tensor(wire.GUIDED_DECODING_GUIDE, np.asarray([[guide.encode()]], dtype=object), "BYTES")
        )
    if req.logprobs:
        inputs.append(_tensor(wire.RETURN_LOG_PROBS, np.asarray([[True]], dtype=bool), "BOOL"))
    if not extensions:
        return inputs
    if req.logprobs and req.top_logprobs:
        inputs.append(_tensor(wire.TOP_LOGPROBS, np.asarray([[req.top_logprobs]], dtype=np.int32), "INT32"))
    return [
        *inputs,
        _tensor(wire.GENERATION_ID, np.asarray([[req.generation_id.encode()]], dtype=object), "BYTES"),
        _tensor(wire.EPOCH, np.asarray([[req.epoch]], dtype=np.int64), "INT64"),
        _tensor(wire.CACHE_SALT, np.asarray([[req.cache_salt.encode()]], dtype=object), "BYTES"),
        _tensor(wire.TENANT_WEIGHT, np.asarray([[req.tenant_weight]], dtype=np.float32), "FP32"),
        _tensor(wire.TIER, np.asarray([[req.tier]], dtype=np.int32), "INT32"),
    ]


READY_TIMEOUT_S = 5.0  # a readiness probe that gets no answer in this long reports not ready


class TritonWorker:
    def __init__(
        self,
        url: str,
        extensions: bool = True,
        inactivity_timeout_s: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """extensions=False for a TensorRT-LLM worker: no extension tensors are sent or read.
        inactivity_timeout_s: a stream whose model sent nothing on any stream for this long is
        lost (frontend/dispatch/worker_liveness.py); None waits for ever.
        headers: gRPC metadata on every call (the worker's access key, serving/triton.py)."""
        self.url = url
        self.extensions = extensions
        self.inactivity_timeout_s = inactivity_timeout_s
        self.liveness: dict[str, Liveness] = {}  # Triton model name -> its last sign of life
        self._headers = dict(headers or {})
        self._outputs = REQUESTED + (REQUESTED_EXTENSIONS if extensions else ())
        self._client = triton_aio.InferenceServerClient(url)

    def liveness_of(self, model: str) -> Liveness:
        return self.liveness.setdefault(model, Liveness())

    async def close(self) -> None:
        await self._client.close()

    async def is_model_ready(self, model: str) -> bool:
        try:
            ready = await self._client.is_model_ready(
                model, headers=self._headers or None, client_timeout=READY_TIMEOUT_S
            )
            return bool(ready)
        except InferenceServerException:
            return False

    def _outputs_of(self, req: WorkerRequest) -> tuple[str, ...]:
        if not req.logprobs:
            return self._outputs
        top = REQUESTED_TOP_LOGPROBS if self.extensions and req.top_logprobs else ()
        return (*self._outputs, *REQUESTED_LOGPROBS, *top)

    def _trace_parameters(self, req: WorkerRequest) -> dict[str, str] | None:
        if not self.extensions:
            return None
        return {k: v for k, v in req.trace_headers if k == "traceparent"} or None

    async def generate(self, req: WorkerRequest) -> AsyncGenerator[WorkerChunk, None]:
        """Yields each streamed response until the final one.

        Raises WorkerCapacityError (refused now), WorkerError (rejected/failed) or WorkerLost
        (WorkerDown: the model cannot run requests now).
        """
        done = asyncio.Event()

        async def requests() -> AsyncIterator[dict[str, object]]:
            yield {
                "model_name": req.model,
                "inputs": build_inputs(req, self.extensions),
                "outputs": [InferRequestedOutput(name) for name in self._outputs_of(req)],
                "request_id": req.generation_id,
                # also in the request itself, for our CPU worker (an extension): Triton sometimes
                # leaves the header unread, the worker parents its engine span on this copy
                # (worker/request_spans.py)
                "parameters": self._trace_parameters(req),
            }
            await done.wait()  # keep the stream open until the final response arrives

        headers = {**self._headers, **dict(req.trace_headers)}
        stream = self._client.stream_infer(requests(), headers=headers or None)
        liveness = self.liveness_of(req.model)
        completed = False
        try:
            while True:
                try:
                    response: Awaitable[tuple[InferResult, InferenceServerException]] = stream.__anext__()
                    if self.inactivity_timeout_s is not None:
                        response = answer_within(response, liveness, self.inactivity_timeout_s)
                    result, error = await response
                except StopAsyncIteration:
                    raise WorkerLost("worker stream ended before the final response") from None
                except (TimeoutError, InferenceServerException) as e:
                    raise WorkerLost(f"worker stream broke: {e}") from e
                except Exception as e:  # grpc.aio.AioRpcError and friends
                    raise WorkerLost(f"worker stream broke: {type(e).__name__}") from e
                if error is not None:
                    message = error.message()
                    reason, detail = wire.parse_refusal(message)
                    if reason is not None:  # the model's own answer; Triton's errors are not
                        liveness.seen()
                    if reason is wire.Refusal.CAPACITY:
                        raise WorkerCapacityError(detail)
                    if is_worker_down(message, self.extensions):
                        raise WorkerDown(message)
                    raise WorkerError(message)
                liveness.seen()
                final = result.get_response().parameters.get("triton_final_response")
                chunk = parse_response(result)
                if chunk.token_ids or chunk.num_input_tokens is not None:
                    yield chunk
                if final is not None and final.bool_param:
                    completed = True
                    return
        finally:
            done.set()
            if not completed:
                stream.cancel()  # the Triton request is cancelled; the engine drops it next step
