"""llama.cpp in-process, one request at a time: a small worker that the llama.cpp target runs with
the scratch environment's Python (var/bench-envs/llamacpp; the project's own environment has no
llama_cpp). It loads the GGUF with `llama_cpp.Llama` and, for each request read from stdin, streams
`create_completion` greedily over the request's prompt token ids, stamping each streamed chunk's
tokens with time.perf_counter() as it is yielded (on Linux that clock is CLOCK_MONOTONIC, shared by every
process, so the stamps are comparable with the driver's own clock).

Protocol, one JSON object a line:
    stdin   {"prompt_ids": [int, ...], "max_tokens": int}
    stdout  {"ready": true} once loaded; per request {"deliveries": [[t, tokens], ...],
            "finish_reason": "length"} or {"error": "<exception class>"}
Nothing else reaches stdout (the C library's output goes to stderr); prompts and outputs are never
written anywhere. Runs only under the scratch Python: it imports nothing from this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import IO, Any


def completion_args(request: dict[str, Any]) -> dict[str, Any]:
    """create_completion's arguments: the prompt as token ids (no BOS added, no re-tokenizing),
    greedy (top_k 1, temperature 0, no repeat penalty), streamed, at most max_tokens."""
    ids = request["prompt_ids"]
    n = request["max_tokens"]
    if not (isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids)):
        raise ValueError("prompt_ids must be a non-empty list of token ids")
    if not (isinstance(n, int) and n > 0):
        raise ValueError("max_tokens must be a positive integer")
    return {
        "prompt": ids,
        "max_tokens": n,
        "temperature": 0.0,
        "top_k": 1,
        "top_p": 1.0,
        "min_p": 0.0,
        "repeat_penalty": 1.0,
        "stream": True,
    }


def new_tokens(evaluated: int, prompt_tokens: int, delivered: int, max_tokens: int) -> int:
    """Tokens generated but not yet delivered when a chunk is yielded. `create_completion` streams
    a token as soon as its text is complete UTF-8, so a chunk carries one token, several (a
    character split over tokens), or none (the closing chunk). When a token is yielded it has been
    sampled but not evaluated: `evaluated` (Llama.n_tokens) is the prompt plus every earlier one."""
    generated = min(max_tokens, evaluated - prompt_tokens + 1)
    return max(0, generated - delivered)


class NoEnd:
    """A logits processor that keeps every end-of-generation token from being chosen, so that each
    request runs to max_tokens (the forced output length, as ignore_eos elsewhere)."""

    def __init__(self, end_ids: list[int]) -> None:
        self.end_ids = end_ids

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        scores[self.end_ids] = -float("inf")
        return scores


def end_ids(llm: Any) -> list[int]:
    import llama_cpp

    vocab = llm._model.vocab  # as Llama itself checks; llama_model_get_vocab(llm.model) crashes in 0.3.36
    return [t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)]


def serve(llm: Any, requests: IO[str], replies: IO[str], logits_processor: Any) -> None:
    """Answers each request line on `requests` with one reply line, until `requests` ends."""
    for line in requests:
        try:
            args = completion_args(json.loads(line))
            deliveries: list[list[float]] = []
            delivered, reason = 0, None
            for chunk in llm.create_completion(**args, logits_processor=logits_processor):
                now = time.perf_counter()
                if k := new_tokens(llm.n_tokens, len(args["prompt"]), delivered, args["max_tokens"]):
                    deliveries.append([now, k])
                    delivered += k
                reason = chunk["choices"][0]["finish_reason"] or reason
            reply: dict[str, Any] = {"deliveries": deliveries, "finish_reason": reason}
        except Exception as e:  # the request fails; the worker serves the next one
            reply = {"error": type(e).__name__}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the GGUF file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--n-ctx", type=int, default=4096)
    args = p.parse_args()
    # The protocol keeps the real stdout; anything the C library prints goes to stderr.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    from llama_cpp import Llama, LogitsProcessorList

    llm = Llama(
        model_path=args.model,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        n_ctx=args.n_ctx,
        verbose=False,
    )
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    serve(llm, sys.stdin, replies, LogitsProcessorList([NoEnd(end_ids(llm))]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
