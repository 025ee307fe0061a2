"""Triton Python-backend adapter over engine/ (decoupled: many responses per request).

`execute()` only enqueues requests; one background thread runs the engine loop and streams through
each request's own response sender. Every request receives exactly one FINAL flag, on every path:
finished, cancelled, rejected or failed. Prompts and outputs are never logged.
"""

import json
import queue
import sys
import threading
import uuid
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
IDLE_WAIT_S = 0.05


def _optional(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().reshape(-1)


def _scalar(request, name, default):
    values = _optional(request, name)
    return default if values is None or values.size == 0 else values[0].item()


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
        import torch

        from engine.artifact import verify
        from engine.config import DTYPES
        from engine.engine import Engine, EngineError, EngineRequest, FinishReason
        from engine.model import load_model
        from engine.sampler import SamplingParams

        self._torch = torch
        self._types = (EngineError, EngineRequest, FinishReason, SamplingParams)
        self.logger = pb_utils.Logger
        artifact = Path(params["artifact_dir"])
        manifest = verify(artifact)  # raises: Triton marks the model unavailable, never ready
        if manifest.version != params["model_version"]:
            raise ValueError(f"artifact version {manifest.version} != configured {params['model_version']}")
        dtype = DTYPES[params.get("dtype", "float32")]
        model = load_model(artifact, dtype)
        self.eos_ids = frozenset(model.config.eos_token_ids)
        self.vocab_size = model.config.vocab_size
        self._new_engine = lambda: Engine(model, dtype)
        self.engine = self._new_engine()
        self.incoming: queue.Queue = queue.Queue()
        self.live = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="engine-loop", daemon=True)
        self.thread.start()
        self.logger.log_info(
            f"model {manifest.version_id} loaded ({params.get('dtype')}), checksums verified"
        )

    def execute(self, requests):
        for request in requests:
            self.incoming.put(request)
        return None

    def finalize(self):
        self.stopping.set()
        self.thread.join(timeout=10)
        while not self.incoming.empty():
            self._fail(_Live(self.incoming.get_nowait(), False), "model is unloading")
        for live in list(self.live.values()):
            self._fail(live, "model is unloading")
        self.live.clear()

    # --- the engine loop -------------------------------------------------------------------

    def _loop(self):
        while not self.stopping.is_set():
            try:
                self._admit_incoming(block=not self.engine.has_unfinished())
                if not self.engine.has_unfinished():
                    continue
                for rid, live in self.live.items():
                    if live.request.is_cancelled():
                        self.engine.abort(rid)
                for out in self.engine.step():
                    self._respond(out)
            except Exception as e:  # a bug must not kill the loop silently: fail every live request
                self.logger.log_error(f"engine step failed: {type(e).__name__}: {e}")
                for live in list(self.live.values()):
                    self._fail(live, f"internal error: {type(e).__name__}")
                self.live.clear()
                self.engine = self._new_engine()

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
        EngineError, EngineRequest, _, SamplingParams = self._types
        live = _Live(request, bool(_scalar(request, "streaming", False)))
        try:
            ids = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy().reshape(-1)
            length = int(_scalar(request, "input_lengths", ids.size))
            if not 0 < length <= ids.size:
                raise EngineError(f"input_lengths {length} does not fit input_ids of {ids.size}")
            prompt = tuple(int(t) for t in ids[:length])
            if min(prompt) < 0 or max(prompt) >= self.vocab_size:
                raise EngineError("input_ids outside the vocabulary")
            end_id = _scalar(request, "end_id", None)
            stop = self.eos_ids if end_id is None else (frozenset() if end_id < 0 else frozenset([end_id]))
            top_k = int(_scalar(request, "runtime_top_k", 0))
            seed = _scalar(request, "random_seed", None)
            sampling = SamplingParams(
                temperature=float(_scalar(request, "temperature", 0.0)),
                top_k=top_k if top_k > 0 else None,
                top_p=float(_scalar(request, "runtime_top_p", 1.0)),
                seed=None if seed is None else int(seed),
            )
            rid = request.request_id() or uuid.uuid4().hex
            while rid in self.live:
                rid = f"{rid}+{uuid.uuid4().hex[:8]}"
            self.engine.add_request(
                EngineRequest(
                    request_id=rid,
                    prompt_ids=prompt,
                    max_output_tokens=int(_scalar(request, "request_output_len", 0)),
                    sampling=sampling,
                    stop_token_ids=stop,
                )
            )
        except (EngineError, ValueError, TypeError, AttributeError) as e:
            self._fail(live, f"invalid request: {e}")
            return
        self.live[rid] = live

    def _respond(self, out):
        live = self.live.get(out.request_id)
        if live is None:
            return
        _, _, FinishReason, _ = self._types
        done = out.finish_reason is not None
        if done:
            del self.live[out.request_id]
        if out.finish_reason is FinishReason.ABORTED:
            live.sender.send(flags=FINAL)  # the client cancelled: nothing more to say
            return
        if not live.streaming:
            live.held.extend(out.new_token_ids)
            if done:
                live.sender.send(self._tokens(live.held), flags=FINAL)
            return
        live.sender.send(self._tokens(out.new_token_ids), flags=FINAL if done else 0)

    @staticmethod
    def _tokens(ids):
        arr = np.asarray(ids, dtype=np.int32).reshape(1, 1, -1)  # [batch, beam, tokens]
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor("output_ids", arr),
                pb_utils.Tensor("sequence_length", np.asarray([[arr.shape[-1]]], dtype=np.int32)),
            ]
        )

    @staticmethod
    def _fail(live, message):
        error = pb_utils.InferenceResponse(error=pb_utils.TritonError(message))
        live.sender.send(error, flags=FINAL)
