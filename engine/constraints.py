"""Structured outputs in the engine: each constrained sequence carries a grammar matcher, and the
batched sampler masks its row to the tokens the matcher allows. Constrained and free sequences share
every step; a free row is never touched.

    Grammars      guide -> a compiled matcher, per model tokenizer; compiled once per guide and kept
                  in a bounded LRU, each request gets a copy (contracts/guides.py: guide -> grammar)
    Masks         the allowed-token bitmasks of a step's constrained rows, computed on a thread of
                  their own while the model runs the step (the matchers' states are final once the
                  last step's tokens were consumed), then applied to those rows of the logits

A matcher allows the end-of-sequence token only where the grammar may end, so a constrained
generation that finishes COMPLETED is whole, and one cut by the output limit is a valid prefix.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contracts.guides import GuideError, grammar_of, limits, reason_of

DEFAULT_GRAMMARS = 64  # compiled guides kept per tokenizer


class Grammars:
    """Compiled guides for one tokenizer. The tokenizer's grammar form (~0.5 s, tens of MB) is built
    at the first constrained request, so a worker that serves none pays nothing for it."""

    def __init__(
        self, tokenizer_json: Path, eos_token_ids: Sequence[int], capacity: int = DEFAULT_GRAMMARS
    ) -> None:
        self._path = tokenizer_json
        self._eos = list(eos_token_ids)
        self._capacity = capacity
        self._tokenizer: Any = None
        self._compiled: OrderedDict[str, Any] = OrderedDict()  # guide hash -> a fresh matcher

    def matcher(self, guide_type: str, guide: str) -> Any:
        """A fresh matcher of the guide (llguidance.LLMatcher); GuideError when it cannot be one."""
        from llguidance import LLMatcher, LLTokenizer

        key = hashlib.sha256(f"{guide_type}\0{guide}".encode()).hexdigest()
        template = self._compiled.get(key)
        if template is None:
            if self._tokenizer is None:
                self._tokenizer = LLTokenizer(self._path.read_text(encoding="utf-8"), eos_token=self._eos)
            template = LLMatcher(self._tokenizer, grammar_of(guide_type, guide), log_level=0, limits=limits())
            if template.is_error():
                error = template.get_error()
                raise GuideError(reason_of(guide_type, error), error[:1000])
            self._compiled[key] = template
            while len(self._compiled) > self._capacity:
                self._compiled.popitem(last=False)
        self._compiled.move_to_end(key)
        return template.deep_copy()

    @property
    def vocab_size(self) -> int:
        return int(self._tokenizer.vocab_size) if self._tokenizer is not None else 0


class Masks:
    """Bitmasks of a step's constrained rows: `start()` before the model step, `apply()` after it."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="llm-masks")
        self._executor: Any = None

    def start(self, matchers: Sequence[tuple[int, Any]], vocab: int) -> Future[torch.Tensor] | None:
        """matchers: (row of the logits, matcher) of the constrained rows; None when there are none."""
        if not matchers:
            return None
        return self._pool.submit(self._compute, list(matchers), vocab)

    def _compute(self, matchers: list[tuple[int, Any]], vocab: int) -> torch.Tensor:
        from llguidance import LLExecutor

        if self._executor is None:
            self._executor = LLExecutor()
        words = (vocab + 31) // 32
        bits = np.full((len(matchers), words), -1, dtype=np.int32)  # [C, vocab / 32]
        self._executor.unsafe_compute_mask_ptr(
            [(m, i) for i, (_, m) in enumerate(matchers)], bits.ctypes.data, words * 4, len(matchers)
        )
        # [C, vocab / 32, 32] -> [C, vocab]: bit b of word w allows token 32 w + b
        shifts = torch.arange(32, dtype=torch.int32)
        allowed = (torch.from_numpy(bits)[:, :, None] >> shifts) & 1
        return allowed.reshape(len(matchers), words * 32)[:, :vocab].bool()

    @staticmethod
    @torch.inference_mode()
    def apply(logits: torch.Tensor, rows: Sequence[int], allowed: torch.Tensor) -> None:
        """logits: [S, vocab]; sets every token a constrained row may not sample to -inf, in place."""
        index = torch.tensor(list(rows), dtype=torch.int64)
        vocab = min(logits.shape[1], allowed.shape[1])
        masked = logits[index, :vocab].masked_fill(~allowed[:, :vocab], float("-inf"))
        logits[index, :vocab] = masked
        if logits.shape[1] > vocab:  # tokens the grammar's tokenizer does not know: never allowed
            logits[index, vocab:] = float("-inf")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


MatcherFactory = Callable[[str, str], Any]
