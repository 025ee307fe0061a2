"""One named asyncio task that a component runs between its start() and close()."""

from __future__ import annotations

import asyncio
import contextlib
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
