"""Triton Python-backend adapter over engine/ (decoupled: many responses per request).

`execute()` only enqueues requests; one background thread runs the engine loop and streams through
each request's own response sender. Every request receives exactly one FINAL flag, on every path:
finished, cancelled, refused or failed. Prompts and outputs are never logged.

Responses (streaming): first an admission response with the prompt's counts (`num_input_tokens`,
`num_cached_tokens`) and no tokens, then one response per step with only that step's `output_ids`
(the frontend counts output tokens itself: every tensor is another shared-memory copy in the stub,
another conversion in tritonserver and another field to parse in the frontend), the last with the
FINAL flag. A non-streaming request gets one response with every token and every count. A request
the pool cannot take now is refused at once with an error starting "capacity:", which the frontend
maps to UNAVAILABLE.

Threads: one thread (torch_thread.py) runs every torch operation of this process: it loads the
weights, builds the engine and runs the loop, with `intra_op_threads` OpenMP threads (see
docs/architecture.md, "Threads on a worker").
"""

import json
import os
import queue
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils
from torch_thread import TorchThread
from worker_metrics import WorkerMetrics

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
IDLE_WAIT_S = 0.05
DEFAULT_KV_BLOCKS = 1024
CAPACITY_PREFIX = "capacity: "


def _optional(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().reshape(-1)


def _scalar(request, name, default):
    values = _optional(request, name)
    if values is None or values.size == 0:
        return default
    value = values[0]
    return value.item() if hasattr(value, "item") else value  # BYTES tensors hold plain bytes


class _Live:
    """A request in the engine, with what is needed to answer it."""

    __slots__ = ("held", "request", "sender", "streaming")

    def __init__(self, request, streaming):
        self.request = request
        self.sender = request.get_response_sender()
        self.streaming = streaming
        self.held = []  # non-streaming: every token, sent once at the end


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        if params["repo_root"] not in sys.path:
            sys.path.insert(0, params["repo_root"])
        from contracts.tier import Tier
        from engine import cost_model
        from engine.artifact import verify
        from engine.config import DTYPES, resolve_dtype
        from engine.engine import (
            CapacityError,
            Engine,
            EngineConfig,
            EngineError,
            EngineRequest,
            FinishReason,
            SamplingParams,
        )
        from engine.weights import load_model

        self._types = (CapacityError, EngineError, EngineRequest, FinishReason, SamplingParams)
        self._tier = Tier
        self.logger = pb_utils.Logger
        artifact = Path(params["artifact_dir"])
        manifest = verify(artifact)  # raises: Triton marks the model unavailable, never ready
        if manifest.version != params["model_version"]:
            raise ValueError(f"artifact version {manifest.version} != configured {params['model_version']}")
        dtype_name = resolve_dtype(params.get("dtype", "float32"))
        threads = int(params.get("intra_op_threads", "0")) or len(os.sched_getaffinity(0))
        self.torch = TorchThread(threads)
        model = self.torch.call(load_model, artifact, DTYPES[dtype_name])
        budget = int(params.get("max_num_batched_tokens", "0"))
        if budget == 0:  # auto: from this machine's measured step cost (also warms the kernels up)
            cost = self.torch.call(cost_model.measure, model, DTYPES[dtype_name])
            budget = cost_model.chunk_budget(cost)
            self.logger.log_info(
                f"step cost {cost.fixed_s * 1e3:.1f} ms + {cost.per_token_s * 1e3:.3f} ms/token: "
                f"{budget} tokens per step keep steps within the "
                f"{cost_model.ITL_OBJECTIVE_S * 1e3:.0f} ms objective"
            )
        engine_config = EngineConfig(
            num_blocks=int(params.get("kv_cache_blocks", "0")) or DEFAULT_KV_BLOCKS,
            block_size=int(params.get("block_size", "16")),
            max_num_seqs=int(params.get("max_num_seqs", "64")),
            max_num_batched_tokens=budget,
            policy=params.get("scheduler_policy", "guaranteed_no_evict"),
            fair_share=params.get("fair_share", "true") == "true",
            dtype=DTYPES[dtype_name],
            compatibility_key=f"{manifest.compatibility_key}:{dtype_name}",
        )
        self.eos_ids = frozenset(model.config.eos_token_ids)
        self._new_engine = lambda: Engine(model, engine_config)
        self.engine = self.torch.call(self._new_engine)
        self.metrics = WorkerMetrics(args["model_name"])
        self.incoming: queue.Queue = queue.Queue()
        self.live = {}
        self.stopping = threading.Event()
        self.torch.run(self._loop)
        self.logger.log_info(
            f"model {manifest.version_id} loaded ({dtype_name}, weights {manifest.quantization}, "
            f"{engine_config.num_blocks} KV blocks "
            f"of {engine_config.block_size}, {engine_config.policy}, {threads} intra-op threads), "
            "checksums verified"
        )

    def execute(self, requests):
        for request in requests:
            self.incoming.put(request)
        return None

    def finalize(self):
        self.stopping.set()
        self.torch.thread.join(timeout=10)
        while not self.incoming.empty():
            self._fail(_Live(self.incoming.get_nowait(), False), "model is unloading")
        for live in list(self.live.values()):
            self._fail(live, "model is unloading")
        self.live.clear()
        self.metrics.close()

    # --- the engine loop -------------------------------------------------------------------

    def _loop(self):
        was_busy = False
        while not self.stopping.is_set():
            try:
                self._admit_incoming(block=not self.engine.has_unfinished())
                busy = self.engine.has_unfinished()
                if busy:
                    self._step()
                    busy = self.engine.has_unfinished()
                # periodically while busy, and at once when the engine goes idle
                self.metrics.publish(self.engine.stats, force=was_busy and not busy)
                was_busy = busy
            except Exception as e:  # a bug must not kill the loop silently: fail every live request
                self.logger.log_error(f"engine step failed: {type(e).__name__}: {e}")
                for live in list(self.live.values()):
                    self._fail(live, f"internal error: {type(e).__name__}")
                self.live.clear()
                self.engine = self._new_engine()

    def _step(self):
        """Cancellations, one engine step, its responses (one per request that got tokens)."""
        started = time.perf_counter()
        for rid, live in self.live.items():  # each check is a round trip to tritonserver
            if live.request.is_cancelled():
                self.engine.abort(rid)
        checked = time.perf_counter()
        outputs = self.engine.step()
        stepped = time.perf_counter()
        for out in outputs:
            self._respond(out)
        responded = time.perf_counter()
        self.metrics.on_step(
            self.engine.last_batch_tokens, checked - started, stepped - checked, responded - stepped
        )

    def _admit_incoming(self, block):
        try:
            request = self.incoming.get(timeout=IDLE_WAIT_S) if block else self.incoming.get_nowait()
        except queue.Empty:
            return
        while True:
            self._admit(request)
            try:
                request = self.incoming.get_nowait()
            except queue.Empty:
                return

    def _admit(self, request):
        CapacityError, EngineError, EngineRequest, _, SamplingParams = self._types
        live = _Live(request, bool(_scalar(request, "streaming", False)))
        try:
            ids = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy().reshape(-1)
            length = int(_scalar(request, "input_lengths", ids.size))
            if not 0 < length <= ids.size:
                raise EngineError(f"input_lengths {length} does not fit input_ids of {ids.size}")
            end_id = _scalar(request, "end_id", None)
            stop = self.eos_ids if end_id is None else (frozenset() if end_id < 0 else frozenset([end_id]))
            seed = _scalar(request, "random_seed", None)
            salt = _scalar(request, "cache_salt", b"")
            rid = request.request_id() or uuid.uuid4().hex
            while rid in self.live:
                rid = f"{rid}+{uuid.uuid4().hex[:8]}"
            admitted = self.engine.add_request(
                EngineRequest(
                    request_id=rid,
                    prompt_ids=tuple(int(t) for t in ids[:length]),
                    max_output_tokens=int(_scalar(request, "request_output_len", 0)),
                    sampling=SamplingParams(
                        temperature=float(_scalar(request, "temperature", 0.0)),
                        top_k=int(_scalar(request, "runtime_top_k", 0)),  # 0 is off; the engine refuses < 0
                        top_p=float(_scalar(request, "runtime_top_p", 1.0)),
                        seed=None if seed is None else int(seed),
                    ),
                    stop_token_ids=stop,
                    cache_salt=salt.decode() if isinstance(salt, bytes) else str(salt),
                    tier=self._tier(int(_scalar(request, "tier", self._tier.INTERACTIVE))),
                    weight=float(_scalar(request, "tenant_weight", 1.0)) or 1.0,
                )
            )
        except CapacityError as e:
            self._fail(live, f"{CAPACITY_PREFIX}{e}")
            return
        except (EngineError, ValueError, TypeError, AttributeError) as e:
            self._fail(live, f"invalid request: {e}")
            return
        self.live[rid] = live
        if live.streaming:
            live.sender.send(_admission_response(admitted))

    def _respond(self, out):
        live = self.live.get(out.request_id)
        if live is None:
            return
        _, _, _, FinishReason, _ = self._types
        done = out.finish_reason is not None
        if done:
            del self.live[out.request_id]
        if out.finish_reason is FinishReason.ABORTED:
            live.sender.send(flags=FINAL)  # the client cancelled: nothing more to say
            return
        if not live.streaming:
            live.held.extend(out.new_token_ids)
            if done:
                live.sender.send(_full_response(live.held, out), flags=FINAL)
            return
        live.sender.send(_tokens_response(out.new_token_ids), flags=FINAL if done else 0)

    @staticmethod
    def _fail(live, message):
        error = pb_utils.InferenceResponse(error=pb_utils.TritonError(message))
        live.sender.send(error, flags=FINAL)


def _ids(ids):
    tokens = np.asarray(ids, dtype=np.int32).reshape(1, 1, -1)  # [batch, beam, tokens]
    return pb_utils.Tensor("output_ids", tokens)


def _count(name, value):
    return pb_utils.Tensor(name, np.asarray([[value]], dtype=np.int32))


def _tokens_response(ids):
    """A streamed step: its new tokens and nothing else."""
    return pb_utils.InferenceResponse(output_tensors=[_ids(ids)])


def _admission_response(admitted):
    """The first streamed response: no tokens, the prompt's counts (the prefix-cache hit)."""
    return pb_utils.InferenceResponse(
        output_tensors=[
            _ids(()),
            _count("num_input_tokens", admitted.num_prompt_tokens),
            _count("num_cached_tokens", admitted.num_cached_tokens),
        ]
    )


def _full_response(ids, out):
    """The one response of a non-streaming request: every token and every count."""
    return pb_utils.InferenceResponse(
        output_tensors=[
            _ids(ids),
            _count("sequence_length", len(ids)),
            _count("num_input_tokens", out.num_prompt_tokens),
            _count("num_cached_tokens", out.num_cached_tokens),
            _count("num_output_tokens", out.num_output_tokens),
        ]
    )
