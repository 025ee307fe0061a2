"""Benchmark prompts are cut to exact token counts, reproducibly, and never share a first block."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.load.prompts import cut_to_tokens, exact_prompt, pieces, prefixed_prompt, workload_prompt
from frontend.catalog.registry import load_version
from frontend.catalog.tokenization import ModelTokenizer


@pytest.fixture(scope="module")
def tok(artifact_dir: Path) -> ModelTokenizer:
    return load_version(artifact_dir).tokenizer


def by_words(text: str) -> list[int]:
    """A stand-in tokenizer: words of up to 3 letters are one token, longer ones two."""
    return [t for w in text.split() for t in ([1] if len(w) <= 3 else [2, 2])]


@pytest.mark.parametrize("n", [1, 64, 97, 128, 1700])
def test_prompt_has_exactly_n_tokens_of_the_models_tokenizer(tok: ModelTokenizer, n: int) -> None:
    assert len(tok.encode(exact_prompt(f"doc-{n}", n, tok.encode))) == n


def test_same_seed_same_text_other_seed_other_first_block(tok: ModelTokenizer) -> None:
    a, again, b = (exact_prompt(seed, 128, tok.encode) for seed in ("0/a/1", "0/a/1", "0/a/2"))
    assert a == again
    assert tok.encode(a)[:16] != tok.encode(b)[:16]


def test_cut_takes_the_longest_prefix_that_fits_then_tops_up_with_one_token_words() -> None:
    assert cut_to_tokens(["Ledger", " balance", " of"], 3, by_words) == "Ledger the"
    assert cut_to_tokens(["Ledger", " of", " balance"], 3, by_words) == "Ledger of"


def test_cut_refuses_pieces_that_make_too_few_tokens() -> None:
    with pytest.raises(ValueError, match="fewer than 10 tokens"):
        cut_to_tokens(pieces("s", 2), 10, by_words)


def test_a_prefixed_prompt_keeps_the_prefix_tokens_first_and_has_exactly_n(tok: ModelTokenizer) -> None:
    prefix = exact_prompt("0/prefix/1", 256, tok.encode)
    for seed, n in (("0/serve/0", 256 + 112), ("0/serve/7", 256 + 1800)):
        ids = tok.encode(prefixed_prompt(prefix, seed, n, tok.encode))
        assert len(ids) == n
        assert ids[:256] == tok.encode(prefix)


def test_workload_prompts_share_the_prefix_and_nothing_else(tok: ModelTokenizer) -> None:
    prefix = exact_prompt("0/prefix/0", 256, tok.encode)
    a, b = (tok.encode(workload_prompt(0, i, 100, prefix, tok.encode)) for i in (1, 2))
    plain = tok.encode(workload_prompt(0, 1, 100, None, tok.encode))
    assert (len(a), len(b), len(plain)) == (356, 356, 100)
    assert a[:256] == b[:256] and a[256:272] != b[256:272]
    assert plain[:16] != a[:16]
