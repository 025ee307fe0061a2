"""The llama.cpp worker's pure parts, and its request loop over a fake Llama (the project's
environment has no llama_cpp: the worker runs under the scratch environment's Python)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from bench.peers.llamacpp_worker import NoEnd, completion_args, new_tokens, serve


def test_completion_arguments_are_greedy_streamed_over_the_token_ids() -> None:
    assert completion_args({"prompt_ids": [5, 6, 7], "max_tokens": 4}) == {
        "prompt": [5, 6, 7],
        "max_tokens": 4,
        "temperature": 0.0,
        "top_k": 1,
        "top_p": 1.0,
        "min_p": 0.0,
        "repeat_penalty": 1.0,
        "stream": True,
    }


@pytest.mark.parametrize(
    ("request_", "match"),
    [
        ({"prompt_ids": [], "max_tokens": 4}, "prompt_ids"),
        ({"prompt_ids": "hello", "max_tokens": 4}, "prompt_ids"),
        ({"prompt_ids": [1, 2.5], "max_tokens": 4}, "prompt_ids"),
        ({"prompt_ids": [1], "max_tokens": 0}, "max_tokens"),
    ],
)
def test_a_malformed_request_is_refused(request_: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        completion_args(request_)


def test_new_tokens_counts_what_was_sampled_since_the_last_delivery() -> None:
    prompt = 10
    assert new_tokens(evaluated=10, prompt_tokens=prompt, delivered=0, max_tokens=4) == 1  # first
    assert new_tokens(evaluated=12, prompt_tokens=prompt, delivered=1, max_tokens=4) == 2  # a split char
    assert new_tokens(evaluated=12, prompt_tokens=prompt, delivered=3, max_tokens=4) == 0  # closing chunk
    assert new_tokens(evaluated=13, prompt_tokens=prompt, delivered=3, max_tokens=4) == 1
    assert new_tokens(evaluated=14, prompt_tokens=prompt, delivered=4, max_tokens=4) == 0  # never past max


def test_no_end_masks_exactly_the_end_of_generation_tokens() -> None:
    scores = np.array([5.0, 1.0, 9.0, 2.0, 8.0], dtype=np.float32)
    out = NoEnd([0, 2, 4])(None, scores)
    assert out.tolist() == [-np.inf, 1.0, -np.inf, 2.0, -np.inf]
    assert int(np.argmax(out)) == 3


class FakeLlama:
    """Streams like Llama.create_completion: `plan` holds each chunk's new tokens (0 for the closing
    chunk); n_tokens advances as Llama's does (the prompt, then each token but the newest)."""

    def __init__(self, plan: list[int], reason: str = "length", fail: bool = False) -> None:
        self.plan, self.reason, self.fail = plan, reason, fail
        self.n_tokens = 0
        self.calls: list[dict[str, Any]] = []

    def create_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        if self.fail:
            raise RuntimeError("decode failed")
        generated = 0
        for i, k in enumerate(self.plan):
            generated += k
            self.n_tokens = len(kwargs["prompt"]) + generated - 1
            last = i == len(self.plan) - 1
            yield {"choices": [{"text": "x" * k, "finish_reason": self.reason if last else None}]}


def replies(llm: FakeLlama, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    out = io.StringIO()
    serve(llm, io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out, "processor")
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_each_request_gets_one_reply_with_its_deliveries_and_finish_reason() -> None:
    llm = FakeLlama([1, 2, 1, 0])
    [reply] = replies(llm, {"prompt_ids": [1, 2, 3], "max_tokens": 4})
    assert [k for _, k in reply["deliveries"]] == [1, 2, 1]
    assert reply["finish_reason"] == "length"
    times = [t for t, _ in reply["deliveries"]]
    assert times == sorted(times)
    assert llm.calls[0]["logits_processor"] == "processor" and llm.calls[0]["prompt"] == [1, 2, 3]


def test_a_failed_request_is_named_and_the_next_one_is_still_served() -> None:
    llm = FakeLlama([1, 0], fail=True)
    assert replies(llm, {"prompt_ids": [], "max_tokens": 1}, {"prompt_ids": [1], "max_tokens": 1}) == [
        {"error": "ValueError"},
        {"error": "RuntimeError"},
    ]
