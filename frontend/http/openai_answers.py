"""The OpenAI-compatible endpoints' answers: a generation's events become OpenAI's streamed chunks
(`Chunks`, for frontend/http/streams.py) or its non-streamed document (`document`), shaped by the
request's `Options` (frontend/http/openai.py).

finish_reason: COMPLETED and STOP_SEQUENCE are "stop", OUTPUT_LIMIT is "length"; a generation that
ended otherwise reports its reason in lower case ("canceled", "interrupted", ...).
"""

from __future__ import annotations

from typing import Any

from frontend.api_errors import ApiError
from frontend.http.errors import HttpError, dumps
from frontend.http.openai import Options
from llm.v1 import generations_pb2 as pb

Reason = pb.Finished.Reason
FINISH_REASONS = {
    Reason.COMPLETED: "stop",
    Reason.STOP_SEQUENCE: "stop",
    Reason.OUTPUT_LIMIT: "length",
}


def finish_reason(reason: pb.Finished.Reason) -> str:
    return FINISH_REASONS.get(reason) or Reason.Name(reason).lower()


def usage(u: pb.TokenUsage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
    }


class Chunks:
    """Renders a generation's events as OpenAI's streamed chunks (frontend/http/streams.py)."""

    def __init__(self, options: Options) -> None:
        self.o = options
        self.id = ""
        self.model = ""

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        doc: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.o.chat else "text_completion",
            "created": self.o.created,
            "model": self.model,
            "system_fingerprint": self.model,
            "choices": choices,
        }
        if self.o.include_usage:
            doc["usage"] = None
        doc.update(extra)
        return b"data: %s\n\n" % dumps(doc)

    def _choice(self, text: str | None, reason: str | None, ids: list[int] | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if self.o.chat:
            choice["delta"] = {} if text is None else {"content": text}
        else:
            choice["text"] = text or ""
            choice["logprobs"] = None
        choice["finish_reason"] = reason
        if self.o.token_ids and ids is not None:
            choice["token_ids"] = ids
        return choice

    def event(self, event: pb.GenerationEvent) -> bytes:
        kind = event.WhichOneof("event")
        if kind == "started":
            self.id = ("chatcmpl-" if self.o.chat else "cmpl-") + event.generation_id
            self.model = event.started.model_version
            if self.o.chat:
                first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                return self._chunk([first])
            return b""
        if kind == "delta":
            ids = list(event.delta.token_ids)
            if not event.delta.text and not (self.o.token_ids and ids):
                return b""
            return self._chunk([self._choice(event.delta.text, None, ids)])
        if kind == "finished":
            f = event.finished
            frames = self._chunk([self._choice(None, finish_reason(f.reason), [])])
            if self.o.include_usage:
                frames += self._chunk([], usage=usage(f.usage))
            return frames
        return b""

    def error(self, error: ApiError) -> bytes:
        return b"data: %s\n\ndata: [DONE]\n\n" % dumps(HttpError(error).openai_body())

    def end(self) -> bytes:
        return b"data: [DONE]\n\n"


def document(options: Options, events: list[pb.GenerationEvent]) -> dict[str, Any]:
    """The non-streamed answer: a chat.completion or a text_completion."""
    generation_id = model = ""
    text: list[str] = []
    ids: list[int] = []
    finished = pb.Finished()
    for event in events:
        generation_id = event.generation_id
        kind = event.WhichOneof("event")
        if kind == "started":
            model = event.started.model_version
        elif kind == "delta":
            text.append(event.delta.text)
            ids.extend(event.delta.token_ids)
        elif kind == "finished":
            finished = event.finished
    choice: dict[str, Any] = {"index": 0}
    if options.chat:
        choice["message"] = {"role": "assistant", "content": "".join(text)}
    else:
        choice["text"] = "".join(text)
    choice["logprobs"] = None
    choice["finish_reason"] = finish_reason(finished.reason)
    if options.token_ids:
        choice["token_ids"] = ids
    return {
        "id": ("chatcmpl-" if options.chat else "cmpl-") + generation_id,
        "object": "chat.completion" if options.chat else "text_completion",
        "created": options.created,
        "model": model,
        "system_fingerprint": model,
        "choices": [choice],
        "usage": usage(finished.usage),
    }
