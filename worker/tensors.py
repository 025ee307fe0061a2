"""The worker's wire format (contracts/worker.py): a request's tensors as an EngineRequest, and the
engine's outputs as response tensors.

Responses of a streaming request: first an admission response with the prompt's counts
(`num_input_tokens`, `num_cached_tokens`) and no tokens, then one response per step with only that
step's `output_ids`, and their `output_log_probs` and alternatives when the request asked for them
(the frontend counts output tokens itself: every tensor is another shared-memory copy in the stub,
another conversion in tritonserver and another field to parse in the frontend).
A non-streaming request gets one response with every token and every count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contracts import worker as wire
from contracts.sampling import TOP_K_OFF, TOP_P_OFF
from contracts.tier import Tier
from engine.engine import EngineRequest, SamplingParams, StepOutput, TokenLogprob
from worker.protocol import Array, Outputs, Request

Scalar = int | float | str | bytes


def _scalar(request: Request, name: str) -> Scalar | None:
    """The first value of a [1]-shaped input; None when absent or empty."""
    values = request.input(name)
    if values is None or values.size == 0:
        return None
    first = values[0]
    value: Scalar = first.item() if isinstance(first, np.generic) else first  # BYTES: plain bytes
    return value


def _int(request: Request, name: str, default: int) -> int:
    value = _scalar(request, name)
    return default if value is None else int(value)


def _float(request: Request, name: str, default: float) -> float:
    value = _scalar(request, name)
    return default if value is None else float(value)


def _text(request: Request, name: str) -> str:
    value = _scalar(request, name)
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def is_streaming(request: Request) -> bool:
    return bool(_scalar(request, wire.STREAMING))


def engine_request(request: Request, request_id: str, eos_ids: frozenset[int]) -> EngineRequest:
    """The request as the engine takes it; ValueError (or TypeError) when its tensors are malformed."""
    ids = request.input(wire.INPUT_IDS)
    if ids is None:
        raise ValueError(f"{wire.INPUT_IDS} is required")
    length = _int(request, wire.INPUT_LENGTHS, ids.size)
    if not 0 < length <= ids.size:
        raise ValueError(f"{wire.INPUT_LENGTHS} {length} does not fit {wire.INPUT_IDS} of {ids.size}")
    end_id = _scalar(request, wire.END_ID)
    if end_id is None:
        stop = eos_ids  # the model's end of sequence
    elif int(end_id) < 0:
        stop = frozenset()  # never stop early (TensorRT-LLM's -1)
    else:
        stop = frozenset([int(end_id)])
    seed = _scalar(request, wire.RANDOM_SEED)
    guide_type = _text(request, wire.GUIDED_DECODING_GUIDE_TYPE)
    logprobs = bool(_scalar(request, wire.RETURN_LOG_PROBS))
    return EngineRequest(
        request_id=request_id,
        prompt_ids=tuple(int(t) for t in ids[:length]),
        max_output_tokens=_int(request, wire.REQUEST_OUTPUT_LEN, 0),
        sampling=SamplingParams(
            temperature=_float(request, wire.TEMPERATURE, 0.0),
            top_k=_int(request, wire.RUNTIME_TOP_K, TOP_K_OFF),
            top_p=_float(request, wire.RUNTIME_TOP_P, TOP_P_OFF),
            seed=None if seed is None else int(seed),
        ),
        stop_token_ids=stop,
        cache_salt=_text(request, wire.CACHE_SALT),
        tier=Tier(_int(request, wire.TIER, Tier.INTERACTIVE)),
        weight=_float(request, wire.TENANT_WEIGHT, 1.0) or 1.0,
        guide=(guide_type, _text(request, wire.GUIDED_DECODING_GUIDE)) if guide_type else None,
        logprobs=logprobs,
        top_logprobs=_int(request, wire.TOP_LOGPROBS, 0) if logprobs else 0,
    )


def _ids(ids: Sequence[int]) -> Array:
    return np.asarray(ids, dtype=np.int32).reshape(1, 1, -1)  # [batch, beam, tokens]


def _count(value: int) -> Array:
    return np.asarray([[value]], dtype=np.int32)  # [batch, 1]


def admission_outputs(admitted: StepOutput) -> Outputs:
    """A streaming request's first response: no tokens, the prompt's counts (the prefix-cache hit)."""
    return {
        wire.OUTPUT_IDS: _ids(()),
        wire.NUM_INPUT_TOKENS: _count(admitted.num_prompt_tokens),
        wire.NUM_CACHED_TOKENS: _count(admitted.num_cached_tokens),
    }


def step_outputs(ids: Sequence[int], logprobs: Sequence[TokenLogprob] = ()) -> Outputs:
    """A streamed step: its new tokens (and their log-probabilities, when asked for) and nothing else."""
    return {wire.OUTPUT_IDS: _ids(ids), **_logprobs(logprobs)}


def full_outputs(ids: Sequence[int], logprobs: Sequence[TokenLogprob], last: StepOutput) -> Outputs:
    """The one response of a non-streaming request: every token and every count."""
    return {
        wire.OUTPUT_IDS: _ids(ids),
        wire.SEQUENCE_LENGTH: _count(len(ids)),
        wire.NUM_INPUT_TOKENS: _count(last.num_prompt_tokens),
        wire.NUM_CACHED_TOKENS: _count(last.num_cached_tokens),
        wire.NUM_OUTPUT_TOKENS: _count(last.num_output_tokens),
        **_logprobs(logprobs),
    }


def _logprobs(logprobs: Sequence[TokenLogprob]) -> Outputs:
    """Each token's log-probability [1, 1, n] and its alternatives [1, n, top], best first."""
    if not logprobs:
        return {}
    top = len(logprobs[0].top)
    return {
        wire.OUTPUT_LOG_PROBS: np.asarray([lp.logprob for lp in logprobs], dtype=np.float32).reshape(
            1, 1, -1
        ),
        wire.OUTPUT_TOP_LOGPROB_IDS: np.asarray(
            [[t for t, _ in lp.top] for lp in logprobs], dtype=np.int32
        ).reshape(1, len(logprobs), top),
        wire.OUTPUT_TOP_LOGPROBS: np.asarray(
            [[v for _, v in lp.top] for lp in logprobs], dtype=np.float32
        ).reshape(1, len(logprobs), top),
    }
