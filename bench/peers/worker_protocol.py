"""What the in-process peers' workers share (bench/peers/openvino_worker.py, ortgenai_worker.py):
reading request lines into a queue, checking a request, and the loop that steps a batch while
anything runs and waits for a request when nothing does. Standard library only: the workers run
under a scratch environment's Python, which has none of this repository's dependencies."""

from __future__ import annotations

import json
import queue
from typing import IO, Any, Protocol


class Batch(Protocol):
    live: dict[int, Any]

    def add(self, request: dict[str, Any]) -> None: ...

    def step(self) -> None: ...


def read_requests(lines: IO[str], inbox: queue.Queue[dict[str, Any] | None]) -> None:
    """Puts each request line on the inbox, then None when the lines end."""
    for line in lines:
        if line.strip():
            inbox.put(json.loads(line))
    inbox.put(None)


def checked(request: dict[str, Any]) -> tuple[int, list[int], int]:
    """(id, prompt ids, max tokens) of a request; ValueError for a malformed one."""
    ids, n, rid = request.get("prompt_ids"), request.get("max_tokens"), request.get("id")
    if not isinstance(rid, int):
        raise ValueError("id must be an integer")
    if not (isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids)):
        raise ValueError("prompt_ids must be a non-empty list of token ids")
    if not (isinstance(n, int) and n > 0):
        raise ValueError("max_tokens must be a positive integer")
    return rid, ids, n


def serve(batch: Batch, inbox: queue.Queue[dict[str, Any] | None]) -> None:
    """Steps while anything runs; waits for a request when nothing does; ends with the input."""
    open_ = True
    while open_ or batch.live:
        try:
            while True:
                request = inbox.get(block=open_ and not batch.live)
                if request is None:
                    open_ = False
                    break
                batch.add(request)
        except queue.Empty:
            pass
        if batch.live:
            batch.step()
