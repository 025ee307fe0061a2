"""The OpenAI answers' tool calls and log-probabilities, from a generation's text and deltas.

A tool call's output is JSON the constraint made (frontend/http/openai_structured.py): a named
function's arguments, or {"name": ..., "arguments": ...} for "required", compact and with its keys
in that order. Streamed, the call's header (id, name) goes first, then its arguments as they come,
each fragment a piece of valid JSON's text; for "required" the wrapper's own `}` is held back and
dropped at the end.
"""

from __future__ import annotations

import json
import re
from typing import Any

from frontend.http.openai_structured import ToolCalls
from llm.v1 import generations_pb2 as pb

REQUIRED_PREFIX = re.compile(r'^\{"name": "([A-Za-z0-9_-]{1,64})", "arguments": ')


class ToolCallStream:
    """Feeds a tool call's output text; yields the chunks' `tool_calls` deltas."""

    def __init__(self, calls: ToolCalls, call_id: str) -> None:
        self.calls = calls
        self.call_id = call_id
        self.name = calls.name
        self._buffer = ""  # "required": the wrapper, until its name is read; then the held `}`
        self._started = False

    def feed(self, text: str) -> list[dict[str, Any]]:
        if self.calls.name is not None:  # the output is the arguments
            return self._header() + self._arguments(text) if text or not self._started else []
        self._buffer += text
        if not self._started:
            m = REQUIRED_PREFIX.match(self._buffer)
            if m is None:
                return []
            self.name = m.group(1)
            self._buffer = self._buffer[m.end() :]
            head = self._header()
        else:
            head = []
        out, self._buffer = self._buffer[:-1], self._buffer[-1:]  # the last character may be the `}`
        return head + self._arguments(out)

    def finish(self, completed: bool) -> list[dict[str, Any]]:
        """What is left once the output ended: for "required", all but the wrapper's `}` when it
        completed (a cut output sends what it has)."""
        if self.calls.name is not None or not self._started:
            return []
        rest = self._buffer[:-1] if completed and self._buffer.endswith("}") else self._buffer
        self._buffer = ""
        return self._arguments(rest)

    def _header(self) -> list[dict[str, Any]]:
        if self._started:
            return []
        self._started = True
        call = {"name": self.name, "arguments": ""}
        return [{"index": 0, "id": self.call_id, "type": "function", "function": call}]

    @staticmethod
    def _arguments(text: str) -> list[dict[str, Any]]:
        return [{"index": 0, "function": {"arguments": text}}] if text else []


def tool_call(calls: ToolCalls, call_id: str, text: str) -> dict[str, Any]:
    """The whole call, from the whole output (the non-streamed answer)."""
    name, arguments = calls.name, text
    if name is None:
        try:
            parsed = json.loads(text)
            name, arguments = parsed["name"], json.dumps(parsed["arguments"], separators=(", ", ": "))
        except (ValueError, KeyError, TypeError):  # cut by the output limit: what there is
            m = REQUIRED_PREFIX.match(text)
            name, arguments = (m.group(1), text[m.end() :]) if m else ("", text)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_logprobs(logprobs: list[pb.TokenLogprob]) -> dict[str, Any]:
    """A chat choice's `logprobs`: one entry per token, with its alternatives."""
    return {
        "content": [
            {
                **_token(lp.token, lp.logprob, lp.bytes),
                "top_logprobs": [_token(t.token, t.logprob, t.bytes) for t in lp.top_logprobs],
            }
            for lp in logprobs
        ],
        "refusal": None,
    }


def completion_logprobs(logprobs: list[pb.TokenLogprob], text_offset: int) -> dict[str, Any]:
    """A completion choice's (legacy) `logprobs`; text_offset: where the first token's text starts."""
    offsets = []
    for lp in logprobs:
        offsets.append(text_offset)
        text_offset += len(lp.token)
    return {
        "tokens": [lp.token for lp in logprobs],
        "token_logprobs": [lp.logprob for lp in logprobs],
        "top_logprobs": [{t.token: t.logprob for t in lp.top_logprobs} for lp in logprobs],
        "text_offset": offsets,
    }


def _token(token: str, logprob: float, raw: bytes) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(raw)}
