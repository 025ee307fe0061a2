"""Benchmark prompts: seeded pseudo-English cut to an exact token count with the model's tokenizer.

The same seed gives the same text in every process; different seeds give different first tokens, so
two prompts never share a prefix-cache block by accident.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

Encode = Callable[[str], list[int]]  # text -> token ids, as the frontend tokenizes a raw prompt

VOCABULARY = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will more can "
    "ledger account quarter revenue contract supplier invoice payment balance report audit committee "
    "board member policy review schedule delivery warehouse shipment customer order region market "
    "price cost margin forecast budget department manager team project risk control process system "
    "record period year month week note section clause party agreement term notice claim loss value"
)
WORDS = tuple(VOCABULARY.split())


def pieces(seed: str, n: int) -> list[str]:
    """n pieces of seeded pseudo-English sentences: ' word', '.', and paragraph breaks."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        words = rng.choices(WORDS, k=rng.randint(6, 18))
        out += [(" " if out else "") + words[0].capitalize(), *(" " + w for w in words[1:]), "."]
        if rng.random() < 0.15:
            out.append("\n\n")
    return out[:n]


def cut_to_tokens(parts: list[str], n: int, encode: Encode) -> str:
    """The longest prefix of `parts` within n tokens, topped up with one-token words to exactly n.

    Raises ValueError when `parts` make fewer than n tokens or no exact cut exists."""
    if len(encode("".join(parts))) < n:
        raise ValueError(f"{len(parts)} pieces make fewer than {n} tokens")
    lo, hi = 0, len(parts)  # invariant: parts[:lo] is within n tokens, parts[:hi + 1] is not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encode("".join(parts[:mid]))) <= n:
            lo = mid
        else:
            hi = mid - 1
    text = "".join(parts[:lo])
    fillers = [w for w in WORDS if len(encode(" " + w)) == 1]
    short = n - len(encode(text))
    if short and not fillers:
        raise ValueError("the tokenizer has no one-token word to top up with")
    for i in range(short):
        text += " " + fillers[i % len(fillers)]
    if len(encode(text)) != n:
        raise ValueError(f"no exact cut at {n} tokens")
    return text


def exact_prompt(seed: str, n: int, encode: Encode) -> str:
    """A prompt of exactly n tokens (every piece is at least one token, so 2n pieces are plenty)."""
    return cut_to_tokens(pieces(seed, 2 * n), n, encode)


def prefixed_prompt(prefix: str, seed: str, n: int, encode: Encode) -> str:
    """`prefix` then seeded text, exactly n tokens in all, the prefix's own tokens first and unchanged
    (so requests that share a prefix share its KV-cache blocks).

    Raises ValueError when the prefix's tokens would not survive the join."""
    body = pieces(seed, 2 * n)
    text = cut_to_tokens([prefix, " " + body[0], *body[1:]], n, encode)  # the space keeps words apart
    head = encode(prefix)
    if encode(text)[: len(head)] != head:
        raise ValueError("the prefix tokenizes differently inside the prompt")
    return text


def workload_prompt(seed: int, index: int, body_tokens: int, prefix: str | None, encode: Encode) -> str:
    """The prompt of request `index` of a seeded workload: `body_tokens` of its own text after the
    shared `prefix` text when it has one."""
    own = f"{seed}/serve/{index}"
    if prefix is None:
        return exact_prompt(own, body_tokens, encode)
    return prefixed_prompt(prefix, own, len(encode(prefix)) + body_tokens, encode)


def artifact_encoder(artifact_dir: Path) -> Encode:
    """The model artifact's tokenizer, encoding a raw prompt as the frontend does (no special tokens)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(artifact_dir / "tokenizer.json"))
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False).ids)
