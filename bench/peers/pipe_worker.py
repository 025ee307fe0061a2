"""A peer that runs in-process in its own scratch Python, driven over its stdin and stdout, many
requests in flight at once (bench/peers/openvino_worker.py, bench/peers/ortgenai_worker.py).

Protocol, one JSON object a line: the worker says {"ready": true, "settings": {...}} once loaded;
each request {"id", "prompt_ids", "max_tokens"} is answered, whenever it ends, by one line with its
id and either {"deliveries": [[t, tokens], ...], "finish_reason": "length"} or {"error": reason}. A
thread reads the replies and completes each request's future on the driver's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome
from bench.processes.server_process import log_tail


def read_reply(reply: dict[str, Any], out: Outcome) -> None:
    """Records a worker's reply to one request; raises TargetError for a failed one."""
    if "error" in reply:
        raise TargetError(f"WORKER_{reply['error']}")
    for t, k in reply["deliveries"]:
        out.deliveries.append((float(t), int(k)))
    if reply["finish_reason"] != "length":
        raise TargetError(f"FINISHED_{str(reply['finish_reason']).upper()}")


class PipeWorker:
    """The worker process for a `with` block, as a target. `settings` holds what the worker says
    it runs with (for the report)."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.argv, self.log = name, argv, log
        self.proc: subprocess.Popen[str] | None = None
        self.settings: dict[str, Any] = {}
        self.ids = itertools.count()
        self.waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]] = {}
        self.lock = threading.Lock()
        self.reader: threading.Thread | None = None

    def __enter__(self) -> PipeWorker:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
            )
        try:
            assert self.proc.stdout is not None
            first = json.loads(self.proc.stdout.readline() or "{}")
            if not first.get("ready"):
                tail = log_tail(self.log)
                raise RuntimeError(f"the {self.name} worker did not start; its log ends:\n{tail}")
            self.settings = first.get("settings", {})
        except BaseException:
            self.__exit__()
            raise
        self.reader = threading.Thread(target=self._read, name=f"{self.name}-replies", daemon=True)
        self.reader.start()
        return self

    def settings_note(self) -> str:
        """What the worker runs with, as it said, one line (scheduler settings folded)."""
        return ", ".join(f"{k} {' '.join(str(v).split())}" for k, v in self.settings.items() if k != "model")

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self.lock:
                waiter = self.waiting.pop(reply.get("id"), None)
            if waiter is not None:
                loop, future = waiter
                loop.call_soon_threadsafe(_settle, future, reply)
        with self.lock:  # the worker exited: every request still waiting fails
            waiters, self.waiting = list(self.waiting.values()), {}
        for loop, future in waiters:
            loop.call_soon_threadsafe(_settle, future, {"error": "EXITED"})

    async def generate(self, job: Job, out: Outcome) -> None:
        if self.proc is None or self.proc.stdin is None:
            raise TargetError("WORKER_NOT_RUNNING")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        rid = next(self.ids)
        with self.lock:
            self.waiting[rid] = (loop, future)
        request = {"id": rid, "prompt_ids": list(job.prompt_ids), "max_tokens": job.spec.output_tokens}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            with self.lock:
                self.waiting.pop(rid, None)
            raise TargetError("WORKER_EXITED") from e
        read_reply(await future, out)

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # the worker ends when its input ends
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=10)
        self.proc = None


def _settle(future: asyncio.Future[dict[str, Any]], reply: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(reply)
