"""The worker's interface: TensorRT-LLM's Triton backend tensor names, our extensions, and the
reasons the CPU worker gives when it refuses a request.

The CPU model declares these in triton_models/llm_cpu/config.pbtxt.template, the TensorRT-LLM model
in triton_models/tensorrt_llm/config.pbtxt.template; tests/contracts/test_worker_contract.py keeps
the templates, the frontend's requests and these names in step.
"""

from __future__ import annotations

import enum

# --- inputs: TensorRT-LLM's --------------------------------------------------------------------
INPUT_IDS = "input_ids"  # INT32 [batch, tokens]: the prompt
INPUT_LENGTHS = "input_lengths"  # INT32 [batch, 1]
REQUEST_OUTPUT_LEN = "request_output_len"  # INT32 [batch, 1]: max output tokens
END_ID = "end_id"  # INT32 [batch, 1]: the stop token; -1 never stops early; absent: the model's EOS
PAD_ID = "pad_id"
STREAMING = "streaming"  # BOOL [batch, 1]
RUNTIME_TOP_K = "runtime_top_k"  # INT32 [batch, 1]; contracts.sampling.TOP_K_OFF is off
RUNTIME_TOP_P = "runtime_top_p"  # FP32 [batch, 1]; contracts.sampling.TOP_P_OFF is off
TEMPERATURE = "temperature"  # FP32 [batch, 1]; 0 is greedy
RANDOM_SEED = "random_seed"  # UINT64 [batch, 1]
# structured outputs: a contracts.guides guide type and its text (absent: free generation)
GUIDED_DECODING_GUIDE_TYPE = "guided_decoding_guide_type"  # BYTES [batch, 1]
GUIDED_DECODING_GUIDE = "guided_decoding_guide"  # BYTES [batch, 1]
RETURN_LOG_PROBS = "return_log_probs"  # BOOL [batch, 1]: each token's log-probability in output_log_probs
TRTLLM_INPUTS = (INPUT_IDS, INPUT_LENGTHS, REQUEST_OUTPUT_LEN, END_ID, PAD_ID, STREAMING, RUNTIME_TOP_K,
                 RUNTIME_TOP_P, TEMPERATURE, RANDOM_SEED, GUIDED_DECODING_GUIDE_TYPE, GUIDED_DECODING_GUIDE,
                 RETURN_LOG_PROBS)  # fmt: skip

# --- inputs: our extensions (optional; a TensorRT-LLM worker gets none) ------------------------
GENERATION_ID = "generation_id"  # BYTES [batch, 1]
EPOCH = "epoch"  # INT64 [batch, 1]: the attempt's epoch
CACHE_SALT = "cache_salt"  # BYTES [batch, 1]: the prefix-cache scope (the tenant)
TENANT_WEIGHT = "tenant_weight"  # FP32 [batch, 1]: the tenant's fair share of prefill
TIER = "tier"  # INT32 [batch, 1]: a contracts.tier.Tier value; absent: INTERACTIVE
TOP_LOGPROBS = "top_logprobs"  # INT32 [batch, 1]: alternatives per token (with return_log_probs)
EXTENSION_INPUTS = (GENERATION_ID, EPOCH, CACHE_SALT, TENANT_WEIGHT, TIER, TOP_LOGPROBS)

# --- outputs ------------------------------------------------------------------------------------
OUTPUT_IDS = "output_ids"  # INT32 [batch, beam, tokens]
SEQUENCE_LENGTH = "sequence_length"  # INT32 [batch, beam]
OUTPUT_LOG_PROBS = "output_log_probs"  # FP32 [batch, beam, tokens]: one per token of output_ids
TRTLLM_OUTPUTS = (OUTPUT_IDS, SEQUENCE_LENGTH, OUTPUT_LOG_PROBS)
NUM_INPUT_TOKENS = "num_input_tokens"  # INT32 [batch, 1]: the prompt's tokens
NUM_CACHED_TOKENS = "num_cached_tokens"  # INT32 [batch, 1]: of those, served from the prefix cache
NUM_OUTPUT_TOKENS = "num_output_tokens"  # INT32 [batch, 1]: generated so far
OUTPUT_TOP_LOGPROB_IDS = "output_top_logprob_ids"  # INT32 [batch, tokens, top]: the alternatives...
OUTPUT_TOP_LOGPROBS = "output_top_logprobs"  # FP32 [batch, tokens, top]: ... and theirs, best first
EXTENSION_OUTPUTS = (NUM_INPUT_TOKENS, NUM_CACHED_TOKENS, NUM_OUTPUT_TOKENS, OUTPUT_TOP_LOGPROB_IDS,
                     OUTPUT_TOP_LOGPROBS)  # fmt: skip


class Refusal(enum.StrEnum):
    """Why the CPU worker ended a request with an error; its message is "<reason>: <detail>"."""

    CAPACITY = "capacity"  # the KV pool cannot take it now: the frontend answers UNAVAILABLE
    INVALID_REQUEST = "invalid request"  # it can never be served as sent
    INTERNAL_ERROR = "internal error"  # this request's own part failed, or the engine did (all end)
    UNLOADING = "model is unloading"


def refusal_message(reason: Refusal, detail: str = "") -> str:
    return f"{reason}: {detail}" if detail else str(reason)


def parse_refusal(message: str) -> tuple[Refusal | None, str]:
    """The reason and the detail of a worker's error message; (None, message) when it gives none of
    ours (a TensorRT-LLM worker's errors)."""
    for reason in Refusal:
        if message == reason:
            return reason, ""
        if message.startswith(f"{reason}: "):
            return reason, message[len(reason) + 2 :]
    return None, message
