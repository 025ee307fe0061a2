"""The OpenAI-compatible endpoints' answers: a generation's events become OpenAI's streamed chunks
(`Chunks`, for frontend/http/streams.py) or its non-streamed document (`document`), shaped by the
request's `Options` (frontend/http/openai.py).

finish_reason: COMPLETED and STOP_SEQUENCE are "stop", OUTPUT_LIMIT is "length"; a generation that
ended otherwise reports its reason in lower case ("canceled", "interrupted", ...). A tool call that
completed is "tool_calls" (frontend/http/openai_calls.py renders the calls and the logprobs).
"""

from __future__ import annotations

from typing import Any

from frontend.api_errors import ApiError
from frontend.http.errors import HttpError, dumps
from frontend.http.openai import Options
from frontend.http.openai_calls import ToolCallStream, chat_logprobs, completion_logprobs, tool_call
from llm.v1 import generations_pb2 as pb

Reason = pb.Finished.Reason
FINISH_REASONS = {
    Reason.COMPLETED: "stop",
    Reason.STOP_SEQUENCE: "stop",
    Reason.OUTPUT_LIMIT: "length",
}


def finish_reason(reason: pb.Finished.Reason, tools: bool = False) -> str:
    if tools and reason == Reason.COMPLETED:
        return "tool_calls"
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
        self.calls: ToolCallStream | None = None
        self._offset = 0  # completions' logprobs: where the next token's text starts

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

    def _choice(
        self,
        text: str | None,
        reason: str | None,
        ids: list[int] | None = None,
        logprobs: list[pb.TokenLogprob] | None = None,
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if self.o.chat:
            choice["delta"] = {} if text is None else {"content": text}
            if self.o.logprobs and logprobs:
                choice["logprobs"] = chat_logprobs(logprobs)
        else:
            choice["text"] = text or ""
            choice["logprobs"] = (
                completion_logprobs(logprobs, self._offset) if self.o.logprobs and logprobs else None
            )
            self._offset += len(text or "")
        choice["finish_reason"] = reason
        if self.o.token_ids and ids is not None:
            choice["token_ids"] = ids
        return choice

    def event(self, event: pb.GenerationEvent) -> bytes:
        kind = event.WhichOneof("event")
        if kind == "started":
            self.id = ("chatcmpl-" if self.o.chat else "cmpl-") + event.generation_id
            self.model = event.started.model_version
            if self.o.tools is not None:
                self.calls = ToolCallStream(self.o.tools, "call_" + event.generation_id)
            if self.o.chat:
                content = None if self.calls else ""
                first = {
                    "index": 0,
                    "delta": {"role": "assistant", "content": content},
                    "finish_reason": None,
                }
                return self._chunk([first])
            return b""
        if kind == "delta":
            ids, logprobs = list(event.delta.token_ids), list(event.delta.logprobs)
            if self.calls is not None:
                return self._calls(self.calls.feed(event.delta.text), logprobs)
            if not event.delta.text and not (self.o.token_ids and ids) and not (self.o.logprobs and logprobs):
                return b""
            return self._chunk([self._choice(event.delta.text, None, ids, logprobs)])
        if kind == "finished":
            f = event.finished
            frames = b""
            if self.calls is not None:
                frames = self._calls(self.calls.finish(f.reason == Reason.COMPLETED), [])
            reason = finish_reason(f.reason, self.calls is not None)
            frames += self._chunk([self._choice(None, reason, [])])
            if self.o.include_usage:
                frames += self._chunk([], usage=usage(f.usage))
            return frames
        return b""

    def _calls(self, deltas: list[dict[str, Any]], logprobs: list[pb.TokenLogprob]) -> bytes:
        if not deltas and not (self.o.logprobs and logprobs):
            return b""
        choice: dict[str, Any] = {"index": 0, "delta": {"tool_calls": deltas} if deltas else {}}
        if self.o.logprobs and logprobs:
            choice["logprobs"] = chat_logprobs(logprobs)
        return self._chunk([{**choice, "finish_reason": None}])

    def error(self, error: ApiError) -> bytes:
        return b"data: %s\n\ndata: [DONE]\n\n" % dumps(HttpError(error).openai_body())

    def end(self) -> bytes:
        return b"data: [DONE]\n\n"


def document(options: Options, events: list[pb.GenerationEvent]) -> dict[str, Any]:
    """The non-streamed answer: a chat.completion or a text_completion."""
    generation_id = model = ""
    text: list[str] = []
    ids: list[int] = []
    logprobs: list[pb.TokenLogprob] = []
    finished = pb.Finished()
    for event in events:
        generation_id = event.generation_id
        kind = event.WhichOneof("event")
        if kind == "started":
            model = event.started.model_version
        elif kind == "delta":
            text.append(event.delta.text)
            ids.extend(event.delta.token_ids)
            logprobs.extend(event.delta.logprobs)
        elif kind == "finished":
            finished = event.finished
    choice: dict[str, Any] = {"index": 0}
    if options.chat and options.tools is not None:
        call = tool_call(options.tools, "call_" + generation_id, "".join(text))
        choice["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
    elif options.chat:
        choice["message"] = {"role": "assistant", "content": "".join(text)}
    else:
        choice["text"] = "".join(text)
    choice["logprobs"] = None
    if options.logprobs:
        choice["logprobs"] = chat_logprobs(logprobs) if options.chat else completion_logprobs(logprobs, 0)
    choice["finish_reason"] = finish_reason(finished.reason, options.tools is not None)
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
