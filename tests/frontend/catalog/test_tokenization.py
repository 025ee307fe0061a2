"""Templates and tokenization equal transformers' own; detokenization never splits UTF-8."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontend.catalog.registry import load_version
from frontend.catalog.tokenization import Message, ModelTokenizer


@pytest.fixture(scope="module")
def tok(artifact_dir: Path) -> ModelTokenizer:
    return load_version(artifact_dir).tokenizer


CHATS = [
    [Message("user", "What is the capital of France?")],
    [Message("system", "You answer in one word."), Message("user", "Colour of the sky?")],
    [
        Message("user", "Hi"),
        Message("assistant", "Hello! How can I help?"),
        Message("user", "Tell me a joke about émigré cafés ☕"),
    ],
]


@pytest.mark.parametrize("chat", CHATS)
def test_chat_template_equals_transformers(tok: ModelTokenizer, hf_tokenizer, chat) -> None:
    messages = [{"role": m.role, "content": m.content} for m in chat]
    expected_text = hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tok.render_chat(chat) == expected_text
    expected_ids = hf_tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if not isinstance(expected_ids, list):  # transformers 5 returns a BatchEncoding
        expected_ids = expected_ids["input_ids"]
    assert tok.encode_chat(chat) == list(expected_ids)


def test_default_system_prompt_is_the_templates(tok: ModelTokenizer) -> None:
    text = tok.render_chat([Message("user", "Hi")])
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_prompt_is_tokenized_without_special_tokens(tok: ModelTokenizer, hf_tokenizer) -> None:
    text = "The capital of France is"
    assert (
        tok.encode(text) == hf_tokenizer.encode(text, add_special_tokens=False) == [504, 3575, 282, 4649, 314]
    )


@pytest.mark.parametrize("text", ["héllo wörld", "日本語のテキスト", "emoji 🌍🚀 end", "mixed ∑ x² — ok"])
def test_incremental_detokenization_never_splits_a_character(tok: ModelTokenizer, text: str) -> None:
    ids = tok.encode(text)
    detok = tok.detokenizer()
    pieces = [detok.step(t) for t in ids]
    assert "".join(pieces) == text == tok.decode(ids)
    assert all("\ufffd" not in p for p in pieces)
    # some token of a multi-byte character carried no text on its own: it was held back
    assert len(ids) > len([p for p in pieces if p]) or all(ord(c) < 0x800 for c in text)


def test_special_tokens_produce_no_text(tok: ModelTokenizer) -> None:
    detok = tok.detokenizer()
    assert detok.step(2) == ""  # <|im_end|>
