"""The llama.cpp baseline's pure parts: when it runs, and reading its token stream."""

from __future__ import annotations

import importlib.util
from importlib.machinery import ModuleSpec

import pytest

from bench import llamacpp
from bench.llamacpp import DONE, counts_as_token, sse_data


def test_it_is_skipped_with_a_reason_when_llama_cpp_does_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "llama_cpp" else real(name))
    assert llamacpp.available() == "llama_cpp is not importable (pip install llama-cpp-python[server])"


def test_it_runs_when_llama_cpp_and_the_gguf_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: ModuleSpec(name, loader=None))
    assert llamacpp.available() is None


def test_server_sent_events_lines() -> None:
    assert sse_data(b'data: {"choices": [{"text": " the", "finish_reason": null}]}\n') == {
        "choices": [{"text": " the", "finish_reason": None}]
    }
    assert sse_data(b"data: [DONE]\n") == DONE
    assert sse_data(b"\n") is None and sse_data(b": ping\n") is None


def test_a_closing_chunk_without_text_is_not_a_token() -> None:
    assert counts_as_token({"choices": [{"text": " the", "finish_reason": None}]})
    assert counts_as_token({"choices": [{"text": "", "finish_reason": None}]})  # a split character
    assert counts_as_token({"choices": [{"text": ".", "finish_reason": "length"}]})
    assert not counts_as_token({"choices": [{"text": "", "finish_reason": "length"}]})
