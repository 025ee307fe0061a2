"""The worker's wire format for structured outputs and log-probabilities: the guide and logprobs
tensors reach the engine request, each token's log-probability and alternatives go out beside its
id, and a coalesced stream holds them back with their tokens."""

from __future__ import annotations

import numpy as np

from contracts import worker as wire
from engine.engine import StepOutput, TokenLogprob
from tests.worker.fakes import Request
from worker.live_request import COALESCE_TOKENS, LiveRequest
from worker.tensors import engine_request, full_outputs, step_outputs

LP = (TokenLogprob(7, -0.5, ((7, -0.5), (9, -1.5))), TokenLogprob(8, -0.25, ((8, -0.25), (3, -2.0))))


def test_the_guide_and_the_logprobs_asked_for_reach_the_engine_request() -> None:
    request = Request("r")
    request.inputs |= {
        wire.GUIDED_DECODING_GUIDE_TYPE: np.asarray([b"json_schema"], dtype=object),
        wire.GUIDED_DECODING_GUIDE: np.asarray([b'{"type": "integer"}'], dtype=object),
        wire.RETURN_LOG_PROBS: np.asarray([True]),
        wire.TOP_LOGPROBS: np.asarray([2], dtype=np.int32),
    }
    taken = engine_request(request, "r", frozenset({2}))
    assert taken.guide == ("json_schema", '{"type": "integer"}')
    assert (taken.logprobs, taken.top_logprobs) == (True, 2)
    unasked = Request("f")
    unasked.inputs[wire.TOP_LOGPROBS] = np.asarray([5], dtype=np.int32)
    free = engine_request(unasked, "f", frozenset({2}))
    assert (free.guide, free.logprobs, free.top_logprobs) == (None, False, 0)  # no return_log_probs


def test_each_token_goes_out_with_its_logprob_and_alternatives() -> None:
    sent = step_outputs([7, 8], LP)
    assert sent[wire.OUTPUT_IDS].tolist() == [[[7, 8]]]
    assert sent[wire.OUTPUT_LOG_PROBS].tolist() == [[[-0.5, -0.25]]]
    assert sent[wire.OUTPUT_TOP_LOGPROB_IDS].tolist() == [[[7, 9], [8, 3]]]
    assert np.allclose(sent[wire.OUTPUT_TOP_LOGPROBS], [[[-0.5, -1.5], [-0.25, -2.0]]])
    assert set(step_outputs([7])) == {wire.OUTPUT_IDS}  # not asked: nothing more on the wire
    last = StepOutput("r", (8,), 3, 0, 2, None)
    assert full_outputs([7, 8], LP, last)[wire.OUTPUT_LOG_PROBS].tolist() == [[[-0.5, -0.25]]]


def test_a_coalesced_stream_holds_logprobs_back_with_their_tokens() -> None:
    live = LiveRequest("r", Request("r"), streaming=True, batch_tier=True, check_turn=0)
    assert live.to_send([7], LP[:1], 1, done=False, coalescing=True) == ([7], LP[:1])  # the first: never held
    assert live.to_send([8], LP[1:], 2, done=False, coalescing=True) is None
    assert (live.held, live.held_logprobs) == ([8], [LP[1]])
    due = live.to_send([9], (LP[0],), 3, done=True, coalescing=True)
    assert due is not None and list(due[0]) == [8, 9] and list(due[1]) == [LP[1], LP[0]]
    assert COALESCE_TOKENS > 2
