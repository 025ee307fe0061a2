"""ONNX Runtime GenAI in-process: a small worker that the ORT GenAI target runs with the scratch
environment's Python (var/bench-envs/ortgenai; the project's own environment has no
onnxruntime_genai). It loads the model builder's int4 CPU model into `onnxruntime_genai.Engine`, its
request-level scheduler, and while any request is unfinished calls `Engine.run`, which returns the
step's token events; requests read from stdin join between runs. Each event's token is stamped with
time.perf_counter() (CLOCK_MONOTONIC on Linux, shared by every process).

On the CPU the engine batches up to its configured batch (4 requests, `get_capabilities()`): its
continuous-batching mode with a paged KV cache (`use_paged_attention`) is built for CUDA only in
0.18, so a longer queue waits for a slot, as it would on its own server.

Protocol: as bench/peers/openvino_worker.py (one JSON object a line; {"ready": true, "settings"}
first, then one reply per request with its id when it ends). Greedy, and every request runs to
max_tokens (min and max generated tokens both set). Runs only under the scratch Python: it imports
nothing from this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from typing import IO, Any

try:
    from bench.peers.worker_protocol import checked, read_requests, serve
except ImportError:  # run by path under the scratch Python: this folder is on sys.path
    from worker_protocol import checked, read_requests, serve  # type: ignore[no-redef]


TOKEN, FAILED = 1, 8  # EngineEventFlags bits
EVENTS = 1024


class Batch:
    """The engine and the requests in it: added between runs, answered when their turn ends."""

    def __init__(self, engine: Any, replies: IO[str]) -> None:
        import onnxruntime_genai as og

        self.engine, self.replies, self.og = engine, replies, og
        self.buffer = engine.create_event_buffer(EVENTS)
        self.live: dict[int, tuple[Any, list[list[float]], int]] = {}  # id(request) -> rid, deliveries, n
        self.requests: dict[int, Any] = {}  # id(request) -> request, kept alive while it runs

    def add(self, request: dict[str, Any]) -> None:
        import numpy as np

        try:
            rid, ids, n = checked(request)
            r = self.engine.create_request()
            turn = self.og.TurnOptions(r)
            turn.set_max_generated_tokens(n)
            turn.set_min_generated_tokens(n)
            turn.set_do_sample(False)
            r.begin_turn(np.array(ids, dtype=np.int32), turn)
        except Exception as e:  # the request fails; the others go on
            self.reply({"id": request.get("id"), "error": type(e).__name__})
            return
        self.live[id(r)] = (rid, [], n)
        self.requests[id(r)] = r

    def step(self) -> None:
        events = self.engine.run(self.buffer)
        now = time.perf_counter()
        for i in range(len(events)):
            event = events[i]
            key = id(event.request)
            if key not in self.live:
                continue
            rid, deliveries, n = self.live[key]
            flags = int(event.flags.value) if hasattr(event.flags, "value") else int(event.flags)
            if flags & FAILED:
                self.end(key, {"id": rid, "error": str(event.error_code).rsplit(".", 1)[-1]})
                continue
            if flags & TOKEN:
                deliveries.append([now, 1])
            if event.finish_reason != self.og.FinishReason.NONE:
                got = len(deliveries)
                reason = "length" if got == n else f"stopped after {got} of {n}"
                self.end(key, {"id": rid, "deliveries": deliveries, "finish_reason": reason})

    def end(self, key: int, message: dict[str, Any]) -> None:
        del self.live[key]
        self.requests.pop(key).close()
        self.reply(message)

    def reply(self, message: dict[str, Any]) -> None:
        self.replies.write(json.dumps(message) + "\n")
        self.replies.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the model builder's output folder")
    args = p.parse_args()
    replies = os.fdopen(os.dup(1), "w")  # the protocol keeps the real stdout; the rest goes to stderr
    os.dup2(2, 1)
    import onnxruntime_genai as og

    engine = og.Engine(og.Model(args.model))  # the CPU provider; ORT's default: a thread per core
    caps = engine.get_capabilities()
    settings = {**vars(args), "max_batch_size": caps.configured_max_batch_size, "threads": os.cpu_count()}
    replies.write(json.dumps({"ready": True, "settings": settings}) + "\n")
    replies.flush()
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=read_requests, args=(sys.stdin, inbox), daemon=True).start()
    serve(Batch(engine, replies), inbox)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
