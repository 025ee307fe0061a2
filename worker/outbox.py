"""The worker's outbox: every response and every cancellation check of the worker's requests, on a
thread of its own, so their round trips to tritonserver overlap the next engine step.

Each `send()` and each "is it cancelled?" is a round trip through the stub's shared memory that waits
for tritonserver's answer (the stub releases the GIL while it waits). Made on the engine loop's
thread they stall it: at a batch of 64, about 7% of the loop's time went to them. Here the loop
only posts; one thread makes the calls in the order they were posted, so each request's responses
keep their order and its FINAL comes last.

    loop (adapter.py)                         outbox thread
    take()  <- waits for the checks it posted last turn, then: cancelled ids, broken streams
    check(live streams)      ------------->   is_cancelled() of each, during the step
    engine step
    send(stream, response)   ------------->   sender.send(), while the loop goes on

A cancellation is seen during the step after the one it arrived in and reaches the engine at the next
step boundary: one step later than asking before each step, bounded, and `take()` keeps the loop at
most one step of responses ahead of what has been sent.

A stream whose send or check raises is broken: the outbox sends it an error FINAL itself (or logs
that it could not), drops whatever is posted for it later, and `take()` reports it, so the loop
forgets it and the engine aborts it. Streams, not ids, are reported: an id may be reused by a new
request once the old one has ended. Nothing else is touched.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from contracts.worker import Refusal, refusal_message
from worker.os_thread import name_os_thread
from worker.protocol import ErrorResponse, Log, Request, Response


class Stream:
    """One admitted request's responses; `broken` is set (by the outbox thread only) when one of
    its calls raised."""

    __slots__ = ("broken", "request", "rid")

    def __init__(self, rid: str, request: Request) -> None:
        self.rid = rid  # the id the engine knows it by
        self.request = request  # kept until its FINAL is sent: Triton frees it after that
        self.broken = False


@dataclass(slots=True)
class Taken:
    """What the outbox learned since the last take()."""

    cancelled: list[Stream] = field(default_factory=list)  # the client cancelled them
    broken: list[Stream] = field(default_factory=list)  # a call of theirs raised (error FINAL sent)


_Job = Callable[[], None]


class Outbox:
    def __init__(self, log: Log) -> None:
        self.log = log
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._taken = Taken()
        self._checked = threading.Event()  # the checks posted last have been made
        self._checked.set()
        thread = threading.Thread(target=self._serve, name="outbox", daemon=True)
        thread.start()
        self._thread: threading.Thread | None = thread

    # --- the loop's side ------------------------------------------------------------------------

    def send(self, stream: Stream, response: Response, final: bool) -> None:
        """Posts one response of an admitted request."""
        self._post(lambda: self._send(stream, response, final))

    def end(self, request: Request, message: str) -> None:
        """Posts an error FINAL to a request that has no stream (refused, or ended wholesale)."""
        self._post(lambda: self._end(request, message))

    def check(self, streams: Iterable[Stream]) -> None:
        """Posts one cancellation check of each stream; take() waits for them."""
        pending = list(streams)
        self._checked.clear()

        def run() -> None:
            try:
                for stream in pending:
                    self._check(stream)
            finally:
                self._checked.set()

        self._post(run)

    def take(self) -> Taken:
        """Waits for the checks posted last, then hands over what was learned since the last take."""
        self._checked.wait()
        with self._lock:
            taken, self._taken = self._taken, Taken()
        return taken

    def flush(self) -> None:
        """Returns once every posted call has been made."""
        if self._thread is not None:
            self._jobs.join()

    def close(self) -> None:
        """Makes every posted call, then stops the thread."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    # --- the outbox thread ----------------------------------------------------------------------

    def _post(self, job: _Job) -> None:
        if self._thread is None:
            raise RuntimeError("the outbox is closed")
        self._jobs.put(job)

    def _serve(self) -> None:
        name_os_thread("llm-outbox")
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                job()
            except Exception as e:  # a bug here must not stop every response: log it, go on
                self.log.log_error(f"outbox call failed: {type(e).__name__}")
            finally:
                self._jobs.task_done()

    def _send(self, stream: Stream, response: Response, final: bool) -> None:
        if stream.broken:
            return
        try:
            stream.request.sender.send(response, final=final)
        except Exception as e:  # this request's sender: it alone ends
            self._break(stream, e)

    def _check(self, stream: Stream) -> None:
        if stream.broken:
            return
        try:
            cancelled = stream.request.is_cancelled()
        except Exception as e:  # this request's handle: it alone ends
            self._break(stream, e)
            return
        if cancelled:
            with self._lock:
                self._taken.cancelled.append(stream)

    def _break(self, stream: Stream, e: Exception) -> None:
        stream.broken = True
        self.log.log_error(f"request {stream.rid[:64]} failed: {type(e).__name__}")
        self._end(stream.request, refusal_message(Refusal.INTERNAL_ERROR, type(e).__name__))
        with self._lock:
            self._taken.broken.append(stream)

    def _end(self, request: Request, message: str) -> None:
        try:
            request.sender.send(ErrorResponse(message), final=True)
        except Exception as e:  # one broken sender must not keep the others from their FINAL
            self.log.log_error(f"could not end request {request.request_id()[:64]}: {type(e).__name__}")
