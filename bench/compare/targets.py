"""What the serving benchmark measures: this platform over its public gRPC API and over its
OpenAI-compatible HTTP API, and Hugging Face `transformers` serving one request at a time in this
process (the baseline), all on the same weights and the same prompt token ids. (llama.cpp, when
installed: bench/peers/llamacpp.py.)"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from bench.engine import hf_generate
from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome
from bench.peers.completions import Chunk, CompletionsTarget, first_choice
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc


class PlatformTarget:
    """Generate over gRPC with ignore_eos; each delta event carrying token ids is one delivery,
    timed when the client receives it. Tenants are chosen by API key: tenant i uses keys[i]."""

    name = "platform"

    def __init__(self, channel: grpc.aio.Channel, model: str, keys: list[str], run_id: str) -> None:
        self.stub = generations_pb2_grpc.GenerationsStub(channel)
        self.model, self.keys, self.run_id = model, keys, run_id

    async def generate(self, job: Job, out: Outcome) -> None:
        spec = job.spec
        req = pb.GenerateRequest(
            request_id=f"{self.run_id}-{spec.index}",  # unique: never an idempotent replay
            model=self.model,
            prompt=job.prompt,
            max_output_tokens=spec.output_tokens,
            sampling=pb.SamplingParams(ignore_eos=True),
            tier=pb.BATCH if spec.batch_tier else pb.INTERACTIVE,
        )
        metadata = (("authorization", f"Bearer {self.keys[spec.tenant]}"),)
        try:
            async for ev in self.stub.Generate(req, metadata=metadata):
                now = time.perf_counter()
                if ev.HasField("started"):
                    out.cached_tokens = ev.started.cached_input_tokens
                elif ev.HasField("delta") and ev.delta.token_ids:
                    out.deliveries.append((now, len(ev.delta.token_ids)))
                elif ev.HasField("finished") and ev.finished.reason != pb.Finished.Reason.OUTPUT_LIMIT:
                    raise TargetError(f"FINISHED_{pb.Finished.Reason.Name(ev.finished.reason)}")
        except grpc.aio.AioRpcError as e:
            raise TargetError(e.code().name) from e


def platform_http_target(url: str, model: str, keys: list[str], run_id: str) -> CompletionsTarget:
    """The same requests as PlatformTarget's, over the platform's OpenAI-compatible HTTP API, driven
    exactly as vLLM and llama.cpp's servers are (bench/peers/completions.py): streamed /v1/completions with
    the prompt text, greedy, ignore_eos, and return_token_ids so each chunk's tokens are counted."""

    def body(job: Job) -> dict[str, Any]:
        n = job.spec.output_tokens
        return {
            "model": model,
            "prompt": job.prompt,
            "max_tokens": n,
            "temperature": 0,  # greedy, as the gRPC request (OpenAI's default is 1)
            "ignore_eos": True,
            "stream": True,
            "return_token_ids": True,
        }

    def headers(job: Job) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {keys[job.spec.tenant]}",
            "X-Request-Id": f"{run_id}-{job.spec.index}",  # unique: never an idempotent replay
        }

    def tokens(chunk: Chunk) -> int:
        return len(first_choice(chunk).get("token_ids") or [])

    return CompletionsTarget("platform-http", url, body, tokens, headers=headers)


class SplitTarget:
    """One platform over both transports at once: even-indexed requests over gRPC, odd ones over
    HTTP, so both halves see the same load, the same machine and the same moment (a comparison of
    two runs on a shared machine compares the machine's load as much as the transports)."""

    name = "platform-split"

    def __init__(self, over_grpc: PlatformTarget, over_http: CompletionsTarget) -> None:
        self.over_grpc, self.over_http = over_grpc, over_http

    async def generate(self, job: Job, out: Outcome) -> None:
        target = self.over_http if job.spec.index % 2 else self.over_grpc
        await target.generate(job, out)


class _Deliveries:
    """A transformers streamer: skips the prompt, then records each generated token's time."""

    def __init__(self, out: Outcome) -> None:
        self.out, self.prompt_seen = out, False

    def put(self, value: Any) -> None:
        if self.prompt_seen:
            self.out.deliveries.append((time.perf_counter(), int(value.numel())))
        self.prompt_seen = True

    def end(self) -> None:
        pass


class SequentialTransformers:
    """A minimal server around transformers: one worker thread takes requests first come, first
    served and generates each alone (no batching), as a simple single-request server would. A
    request's TTFT therefore includes its wait for the requests ahead of it."""

    name = "transformers"

    def __init__(self, model: Any) -> None:
        self.model = model
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-server")

    async def generate(self, job: Job, out: Outcome) -> None:
        loop = asyncio.get_running_loop()
        n = job.spec.output_tokens
        await loop.run_in_executor(self.worker, hf_generate, self.model, job.prompt_ids, n, _Deliveries(out))

    def close(self) -> None:
        self.worker.shutdown(wait=True, cancel_futures=True)
