"""The one thread of a worker process that runs torch: every call, then the loop."""

from __future__ import annotations

import threading

import pytest
import torch

from worker.torch_thread import TorchThread


def test_the_torch_thread_runs_every_call_and_then_the_loop() -> None:
    threads = torch.get_num_threads()  # unchanged: torch's thread count is process-wide
    t = TorchThread(threads)
    seen = [t.call(threading.current_thread), t.call(threading.current_thread)]
    assert seen[0] is seen[1] is t.thread and seen[0] is not threading.current_thread()
    assert t.call(torch.get_num_threads) == threads
    with pytest.raises(ValueError, match="no weights"):
        t.call(lambda: (_ for _ in ()).throw(ValueError("no weights")))
    ran = threading.Event()
    t.run(lambda: ran.set())
    t.thread.join(timeout=5)
    assert ran.is_set() and not t.thread.is_alive()
