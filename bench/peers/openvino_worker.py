"""OpenVINO GenAI in-process, continuous batching: a small worker that the OpenVINO target runs with
the scratch environment's Python (var/bench-envs/openvino; the project's own environment has no
openvino). It loads an exported model folder into `openvino_genai.ContinuousBatchingPipeline` and,
while any request is unfinished, runs the pipeline's `step()`; requests read from stdin join the
batch between steps, as a server's do. After each step it reads every request's handle and stamps
its new tokens with time.perf_counter() (CLOCK_MONOTONIC on Linux, shared by every process, so the
stamps compare with the driver's clock).

Protocol, one JSON object a line:
    stdin   {"id": int, "prompt_ids": [int, ...], "max_tokens": int}
    stdout  {"ready": true, "settings": {...}} once loaded; per request, when it ends,
            {"id": int, "deliveries": [[t, tokens], ...], "finish_reason": "length"} or
            {"id": int, "error": "<reason>"}
Greedy, and every request runs to max_tokens (ignore_eos, min_new_tokens = max_new_tokens), as the
other peers do. Nothing else reaches stdout; prompts and outputs are never written anywhere. Runs
only under the scratch Python: it imports nothing from this repository.
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


class Batch:
    """The pipeline and the requests in it: added between steps, answered when they end."""

    def __init__(self, pipe: Any, replies: IO[str]) -> None:
        import openvino_genai as ov_genai

        self.pipe, self.replies, self.genai = pipe, replies, ov_genai
        self.live: dict[int, tuple[Any, list[list[float]], int]] = {}  # id -> handle, deliveries, n

    def add(self, request: dict[str, Any]) -> None:
        import numpy as np
        import openvino as ov

        try:
            rid, ids, n = checked(request)
            config = self.genai.GenerationConfig()
            config.max_new_tokens = n
            config.min_new_tokens = n
            config.ignore_eos = True
            config.do_sample = False
            handle = self.pipe.add_request(rid, ov.Tensor(np.array([ids], dtype=np.int64)), config)
        except Exception as e:  # the request fails; the others go on
            self.reply({"id": request.get("id"), "error": type(e).__name__})
            return
        self.live[rid] = (handle, [], n)

    def step(self) -> None:
        self.pipe.step()
        now = time.perf_counter()
        finished = self.genai.GenerationStatus.FINISHED
        for rid, (handle, deliveries, n) in list(self.live.items()):
            if handle.can_read():
                outputs = handle.read()  # the tokens made since the last read
                k = sum(len(o.generated_ids) for o in outputs.values())
                if k:
                    deliveries.append([now, k])
            status = handle.get_status()
            if status == finished and not handle.can_read():
                got = sum(int(k) for _, k in deliveries)
                reason = "length" if got == n else f"stopped after {got} of {n}"
                self.reply({"id": rid, "deliveries": deliveries, "finish_reason": reason})
                del self.live[rid]
            elif status not in (finished, self.genai.GenerationStatus.RUNNING):
                self.reply({"id": rid, "error": str(status).rsplit(".", 1)[-1]})
                del self.live[rid]

    def reply(self, message: dict[str, Any]) -> None:
        self.replies.write(json.dumps(message) + "\n")
        self.replies.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the exported OpenVINO model folder")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-num-batched-tokens", type=int, default=1024)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--cache-size-gb", type=float, default=1.0)
    p.add_argument("--kv-precision", default="", help="KV_CACHE_PRECISION (default: the plugin's own)")
    args = p.parse_args()
    replies = os.fdopen(os.dup(1), "w")  # the protocol keeps the real stdout; the rest goes to stderr
    os.dup2(2, 1)
    import openvino_genai as ov_genai

    scheduler = ov_genai.SchedulerConfig()
    scheduler.max_num_batched_tokens = args.max_num_batched_tokens
    scheduler.max_num_seqs = args.max_num_seqs
    scheduler.cache_size = max(1, round(args.cache_size_gb))  # GB of KV cache
    scheduler.enable_prefix_caching = True
    scheduler.dynamic_split_fuse = True
    properties: dict[str, Any] = {"INFERENCE_NUM_THREADS": args.threads}
    if args.kv_precision:
        properties["KV_CACHE_PRECISION"] = args.kv_precision
    pipe = ov_genai.ContinuousBatchingPipeline(args.model, scheduler, "CPU", properties)
    settings = {**vars(args), "scheduler": scheduler.to_string()}
    replies.write(json.dumps({"ready": True, "settings": settings}) + "\n")
    replies.flush()
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=read_requests, args=(sys.stdin, inbox), daemon=True).start()
    serve(Batch(pipe, replies), inbox)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
