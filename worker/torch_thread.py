"""The one thread of a worker process that runs torch.

Triton calls `initialize()` on the stub's main thread, and the engine loop must run on another
thread. If both ran torch operations, each would start its own OpenMP team; libgomp throttles the
spin-wait between parallel regions to almost nothing once a process has more OpenMP threads than
CPUs, so every parallel operation of the loop would then wait for futex wake-ups. Loading the
weights, building the engine and running the loop all on this thread keeps one team of
`intra_op_threads` (docs/architecture.md, "Threads on a worker").
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from worker.os_thread import name_os_thread

T = TypeVar("T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], "concurrent.futures.Future[Any] | None"]


class TorchThread:
    """`call()` runs a function on the thread and returns its result (or raises its exception);
    `run()` hands the thread over to a function for good (the engine loop: the thread ends when it
    returns)."""

    def __init__(self, intra_op_threads: int) -> None:
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self.thread = threading.Thread(
            target=self._serve, args=(intra_op_threads,), name="engine", daemon=True
        )
        self.thread.start()

    def _serve(self, intra_op_threads: int) -> None:
        import torch

        name_os_thread("llm-engine")
        torch.set_num_threads(intra_op_threads)
        while True:
            fn, args, done = self._jobs.get()
            if done is None:
                fn(*args)
                return
            try:
                done.set_result(fn(*args))
            except BaseException as e:  # raised again in the caller
                done.set_exception(e)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((fn, args, done))
        return done.result()

    def run(self, fn: Callable[[], None]) -> None:
        self._jobs.put((fn, (), None))
