"""A streaming client for a peer's OpenAI-compatible /v1/completions endpoint (llama.cpp's server,
vLLM): posts one request body per job, reads the server-sent events, and records each chunk's
tokens as one delivery timed when the client receives it. How a chunk's tokens are counted differs
by server, so it is passed in. Blocking HTTP, one client thread per request in flight."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome

DONE = "[DONE]"

Chunk = dict[str, Any]
Body = Callable[[Job], dict[str, Any]]  # the request body for a job
Headers = Callable[[Job], dict[str, str]]  # extra request headers for a job (credentials, ids)
Tokens = Callable[[Chunk], int]  # output tokens one streamed chunk carries


def sse_data(line: bytes) -> Chunk | str | None:
    """The payload of one server-sent-events line: a JSON object, DONE, or None for other lines."""
    text = line.decode().strip()
    if not text.startswith("data:"):
        return None
    payload = text.removeprefix("data:").strip()
    if payload == DONE:
        return DONE
    value = json.loads(payload)
    return value if isinstance(value, dict) else None


def first_choice(chunk: Chunk) -> dict[str, Any]:
    choices = chunk.get("choices") or [{}]
    choice: dict[str, Any] = choices[0]
    return choice


def finish_reason(chunk: Chunk) -> str | None:
    reason = first_choice(chunk).get("finish_reason")
    return None if reason is None else str(reason)


class CompletionsTarget:
    """Streams `body(job)` to `url`/v1/completions. A stream that ends for another reason than
    "length" (the forced output length) fails as FINISHED_<REASON>; an error event as SERVER_ERROR."""

    def __init__(
        self,
        name: str,
        url: str,
        body: Body,
        tokens: Tokens,
        timeout_s: float = 900.0,
        headers: Headers = lambda job: {},
    ) -> None:
        self.name, self.url, self.body, self.tokens, self.timeout_s = name, url, body, tokens, timeout_s
        self.headers = headers
        self.clients = ThreadPoolExecutor(max_workers=256, thread_name_prefix=f"{name}-client")

    async def generate(self, job: Job, out: Outcome) -> None:
        await asyncio.get_running_loop().run_in_executor(self.clients, self._stream, job, out)

    def _stream(self, job: Job, out: Outcome) -> None:
        req = urllib.request.Request(
            f"{self.url}/v1/completions",
            data=json.dumps(self.body(job)).encode(),
            headers={"Content-Type": "application/json", **self.headers(job)},
        )
        reason = None
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                for line in resp:
                    now = time.perf_counter()
                    data = sse_data(line)
                    if data == DONE:
                        break
                    if not isinstance(data, dict):
                        continue
                    if "error" in data:
                        raise TargetError("SERVER_ERROR")
                    if n := self.tokens(data):
                        out.deliveries.append((now, n))
                    reason = finish_reason(data) or reason
        except urllib.error.HTTPError as e:
            raise TargetError(f"HTTP_{e.code}") from e
        except OSError as e:
            raise TargetError("CONNECTION_FAILED") from e
        if reason != "length":
            raise TargetError(f"FINISHED_{str(reason).upper()}")

    def close(self) -> None:
        self.clients.shutdown(wait=True, cancel_futures=True)
