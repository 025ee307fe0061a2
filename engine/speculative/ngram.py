"""Prompt-lookup drafts: the tokens that followed the latest earlier occurrence of the sequence's
last n tokens, for the longest n that occurs (no second model). Pure Python, no torch.

    tokens: ... a b c X Y Z ... a b c        last n = 3 tokens "a b c" seen before
                      ^^^^^ proposed: X Y Z (up to k)
"""

from __future__ import annotations

from collections.abc import Sequence

NGRAM_MAX = 4  # longest suffix looked up
NGRAM_MIN = 1  # shortest
LOOKBACK = 4096  # tokens searched back from the end (bounds the cost on long contexts)


def propose(tokens: Sequence[int], k: int, max_n: int = NGRAM_MAX, min_n: int = NGRAM_MIN) -> tuple[int, ...]:
    """Up to k tokens continuing the longest earlier match of the last n tokens (max_n down to
    min_n); the most recent match wins; () when none occurs or k is 0."""
    if k <= 0:
        return ()
    end = len(tokens)
    window = list(tokens[max(0, end - LOOKBACK) : end])
    size = len(window)
    for n in range(min(max_n, size - 1), min_n - 1, -1):
        suffix = window[size - n :]
        # latest start i < size - n with window[i:i+n] == suffix and a token after it
        for i in range(size - n - 1, -1, -1):
            if window[i : i + n] == suffix:
                follow = window[i + n : i + n + k]
                if follow:
                    return tuple(follow)
    return ()
