"""Request-sized CPU work off the event loop: tokenization and chat-template rendering run on a few
threads, with a bound on how many requests may wait for them (beyond it: UNAVAILABLE with a retry),
so a huge prompt never freezes other tenants' streams or the health service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from frontend.refusals import Unavailable

T = TypeVar("T")


class Offload:
    def __init__(self, threads: int = 2, max_pending: int = 64) -> None:
        self.max_pending = max_pending
        self._executor = ThreadPoolExecutor(max(1, threads), thread_name_prefix="tokenize")
        self._pending = 0

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """fn(*args) on a worker thread; UNAVAILABLE (TOKENIZER_BUSY) when too many wait already."""
        if self._pending >= self.max_pending:
            raise Unavailable("TOKENIZER_BUSY", "too many requests are being tokenized; retry shortly")
        self._pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        finally:
            self._pending -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
