"""One named asyncio task that a component runs between its start() and close()."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any


class Background:
    def __init__(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self.run = run
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name=self.name)

    async def close(self) -> None:
        """Cancels the task and waits for it to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def every(
    name: str, interval_s: float, step: Callable[[], Coroutine[Any, Any, object]], log: logging.Logger
) -> Background:
    """A task that awaits `step` every `interval_s`; a step that raises is logged and the next one
    follows as usual (the store, say, may be briefly unreachable)."""

    async def run() -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await step()
            except Exception:
                log.exception("%s failed", name)

    return Background(name, run)
