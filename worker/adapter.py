"""WorkerAdapter: the CPU worker's requests over the engine (decoupled: many responses per request).

`submit()` only enqueues (Triton's `execute()` calls it and returns). One thread, the torch thread
(loader.py), runs `run()`, the engine loop: it admits what arrived, learns which requests were
cancelled, runs the step and posts every request its responses (tensors.py says what they carry).
The calls that reach tritonserver, the responses and the once-a-step cancellation checks, are made
by the outbox's own thread while the next step runs (outbox.py). Every request gets exactly one
FINAL, on every path:

    finished      its last tokens carry FINAL
    cancelled     the engine aborts it at the step boundary; a bare FINAL follows
    refused       "capacity: ..." when the KV pool cannot take it now (the frontend answers
                  UNAVAILABLE), "invalid request: ..." when it can never be served as sent
    one failed    a request whose own part fails (the engine could not sample its logits, its
                  sender or handle raised: outbox.py) ends alone with "internal error: <type>";
                  the others and the engine go on
    engine error  a step that raises ends every live request with "internal error: <type>" and
                  rebuilds the engine (loop_guard.py); the loop goes on
    unloading     "model is unloading": the loop ends its live requests, `close()` the queued

Batch-tier streams are coalesced while a step answers at least `coalesce_from` requests, and then
asked about cancellation only every few steps (live_request.py says why and how).

Each admitted request has an engine span while it is in the engine, when the deployment names a
traces URL (request_spans.py). Prompts and outputs are never logged.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from contracts.tier import Tier
from contracts.worker import Refusal, refusal_message
from engine.engine import CapacityError, EngineError, FinishReason, StepOutput
from worker.live_request import CHECK_EVERY, LiveRequest, end_span, to_check
from worker.loop_guard import UNAVAILABLE, Handover, Rebuilder
from worker.outbox import Outbox
from worker.prefix_summary import PrefixSummaryWriter
from worker.protocol import ErrorResponse, Log, Request, StepEngine
from worker.request_spans import NoSpans, RequestSpans
from worker.tensors import admission_outputs, engine_request, full_outputs, is_streaming, step_outputs
from worker.torch_thread import TorchThread
from worker.worker_metrics import WorkerMetrics

IDLE_WAIT_S = 0.05  # an idle loop waits this long for a request before it publishes metrics again


COALESCE_FROM = 16  # requests answered in one step from which batch-tier streams are coalesced
CLOSE_WAIT_S = 10.0  # close() waits this long for the loop's step to return


class WorkerAdapter:
    def __init__(
        self,
        engine: StepEngine,
        new_engine: Callable[[], StepEngine],
        eos_ids: frozenset[int],
        metrics: WorkerMetrics,
        log: Log,
        clock: Callable[[], float] = time.perf_counter,
        coalesce_from: int = COALESCE_FROM,
        spans: RequestSpans | None = None,
        summary: PrefixSummaryWriter | None = None,
    ) -> None:
        """engine: built on the thread that will run the loop; new_engine: builds a fresh one
        there after a failed step. eos_ids: the stop tokens of a request that names no end_id.
        coalesce_from: see the module docstring. spans: each admitted request's engine span
        (request_spans.py; default: none). summary: writes the prefix cache's (prefix_summary.py)."""
        self.engine = engine
        self._rebuilder = Rebuilder(new_engine, log, clock)
        self.eos_ids = eos_ids
        self.metrics = metrics
        self.log = log
        self._clock = clock
        self.incoming: queue.Queue[Request] = queue.Queue()
        self.outbox = Outbox(log)  # makes the calls that reach tritonserver, in order
        self.live: dict[str, LiveRequest] = {}  # request id in the engine -> the request
        self._aborting: set[str] = set()  # ended here, their ABORTED not yet out of the engine
        self._stopping = threading.Event()
        self._handover = Handover()  # who closes the outputs at unload (loop_guard.py)
        self._loop_thread: threading.Thread | None = None
        self._was_busy = False
        self.coalesce_from = coalesce_from
        self.spans = spans or NoSpans()
        self.summary = summary
        self._coalescing = False  # this step answers at least coalesce_from requests
        self._admitted = 0  # requests admitted so far: their turns for cancellation checks
        self._steps = 0

    def submit(self, request: Request) -> None:
        self.incoming.put(request)

    def start(self, torch_thread: TorchThread) -> None:
        """Hands the torch thread over to the loop for good."""
        self._loop_thread = torch_thread.thread
        torch_thread.run(self.run)

    def run(self) -> None:
        """The engine loop, until close(). It owns the live requests: it ends them on its way out."""
        try:
            while not self._stopping.is_set():
                self.run_once(block=True)
        finally:
            self._fail_live(Refusal.UNLOADING)
            if self._handover.loop_ended():
                self._close_outputs()

    def run_once(self, block: bool = False) -> None:
        """One turn of the loop: admit what arrived (when idle and `block`, waiting up to IDLE_WAIT_S
        for it), one engine step if any work is left, the metrics."""
        try:
            self._admit_incoming(block=block and not self.engine.has_unfinished())
            busy = self.engine.has_unfinished()
            if busy:
                self._step()
                busy = self.engine.has_unfinished()
            # periodically while busy, and at once when the engine goes idle
            self.metrics.publish(self.engine.stats, force=self._was_busy and not busy)
            if self.summary is not None:
                self.summary.maybe_write(self.engine.prefix_keys)
            self._was_busy = busy
        except Exception as e:  # a bug must not kill the loop silently: fail every live request
            self.log.log_error(f"engine step failed: {type(e).__name__}: {e}")
            self._fail_live(Refusal.INTERNAL_ERROR, type(e).__name__)
            self.engine = UNAVAILABLE  # dropped before another is built (loop_guard.py)
        if self.engine is UNAVAILABLE:
            self.engine, self._aborting = self._rebuilder.build(), set()
            if self.engine is not UNAVAILABLE:
                self.metrics.engine_replaced()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Stops the loop, then ends every queued and live request (Triton is unloading the model).
        A loop still in its step after `wait_s` keeps its live requests and closes the outputs
        itself when the step returns (run()); only the requests it has not taken end here."""
        self._stopping.set()
        thread = self._loop_thread
        if thread is not None:
            thread.join(timeout=wait_s)
        message = refusal_message(Refusal.UNLOADING)
        while True:
            try:
                self.outbox.end(self.incoming.get_nowait(), message)
            except queue.Empty:
                break
        if self._handover.close_gives_up(thread is not None and thread.is_alive()):
            self.log.log_error(f"engine loop still in a step after {wait_s:g} s: it ends its own requests")
            return
        self._fail_live(Refusal.UNLOADING)  # the loop's own when it never ran on a thread (tests)
        self._close_outputs()

    def _close_outputs(self) -> None:
        self.outbox.close()  # every posted response sent
        self.metrics.close()
        self.spans.close()

    # --- the loop's parts --------------------------------------------------------------------

    def _admit_incoming(self, block: bool) -> None:
        try:
            request = self.incoming.get(timeout=IDLE_WAIT_S) if block else self.incoming.get_nowait()
        except queue.Empty:
            return
        while True:
            self._admit(request)
            try:
                request = self.incoming.get_nowait()
            except queue.Empty:
                return

    def _admit(self, request: Request) -> None:
        try:
            streaming = is_streaming(request)
            rid = self._unique_id(request.request_id())
            taken = engine_request(request, rid, self.eos_ids)
            admitted = self.engine.add_request(taken)
        except CapacityError as e:
            self.outbox.end(request, refusal_message(Refusal.CAPACITY, str(e)))
            return
        except (EngineError, ValueError, TypeError) as e:
            self.outbox.end(request, refusal_message(Refusal.INVALID_REQUEST, str(e)))
            return
        except Exception as e:  # the engine failed: this request ends here, the loop's guard does the rest
            self.outbox.end(request, refusal_message(Refusal.INTERNAL_ERROR, type(e).__name__))
            raise
        turn = self._admitted % CHECK_EVERY
        live = self.live[rid] = LiveRequest(rid, request, streaming, taken.tier is Tier.BATCH, turn)
        live.span = self.spans.start(
            request, taken.tier.name, len(taken.prompt_ids), admitted.num_cached_tokens
        )
        self._admitted += 1
        if streaming:
            self.outbox.send(live, admission_outputs(admitted), final=False)

    def _unique_id(self, rid: str) -> str:
        rid = rid or uuid.uuid4().hex
        while rid in self.live or rid in self._aborting:  # never the id of an abort under way
            rid = f"{rid}+{uuid.uuid4().hex[:8]}"
        return rid

    def _step(self) -> None:
        """What the outbox learned (cancellations, broken streams), one engine step, its responses
        posted (one per request that got tokens)."""
        started = self._clock()
        taken = self.outbox.take()  # the checks posted before the last step
        for stream in taken.broken:  # its error FINAL is sent: forget it, the engine drops it
            if self.live.get(stream.rid) is stream:
                end_span(self.live.pop(stream.rid), "BROKEN_STREAM")
                self._abort(stream.rid)
        for stream in taken.cancelled:
            if self.live.get(stream.rid) is stream:
                self.engine.abort(stream.rid)
        self.outbox.check(self._to_check())  # made while this step runs
        checked = self._clock()
        scheduled_before = self.engine.schedule_s
        outputs = self.engine.step()
        stepped = self._clock()
        schedule_s = self.engine.schedule_s - scheduled_before
        self._coalescing = len(outputs) >= self.coalesce_from
        for out in outputs:
            self._respond(out)
        responded = self._clock()
        self.metrics.on_step(
            self.engine.last_batch_tokens,
            cancel_check_s=checked - started,
            schedule_s=schedule_s,
            model_s=stepped - checked - schedule_s,
            respond_s=responded - stepped,
        )

    def _to_check(self) -> Iterable[LiveRequest]:
        """The streams to ask about cancellation during this step; the outbox copies them as it
        posts the checks."""
        self._steps += 1
        return to_check(self.live.values(), self._steps, self._coalescing)

    def _respond(self, out: StepOutput) -> None:
        live = self.live.get(out.request_id)
        if live is None:  # ended here already (a broken stream, its own failure): its abort is done
            if out.finish_reason is not None:
                self._aborting.discard(out.request_id)
            return
        done = out.finish_reason is not None
        if live.span is not None:
            live.span.produced(out.num_output_tokens)
        if done:
            del self.live[out.request_id]
        try:
            self._send_step(out, live, done)
        except Exception as e:  # this request's tensors: it alone ends
            self._fail_one(live, e, abort=not done)
            return
        if out.finish_reason is not None:  # answered: its span ends with the engine's reason
            end_span(live, out.finish_reason.name, error=out.finish_reason is FinishReason.ERROR)

    def _send_step(self, out: StepOutput, live: LiveRequest, done: bool) -> None:
        send = self.outbox.send
        if out.finish_reason is FinishReason.ABORTED:
            send(live, None, final=True)  # the client cancelled: nothing more to say
        elif out.finish_reason is FinishReason.ERROR:  # the engine ended this request alone
            self.log.log_error(f"request {out.request_id[:64]} failed in the engine: {out.error}")
            send(live, ErrorResponse(refusal_message(Refusal.INTERNAL_ERROR, out.error or "")), final=True)
        elif live.streaming:
            due = live.to_send(out.new_token_ids, out.logprobs, out.num_output_tokens, done, self._coalescing)
            if due is not None:
                send(live, step_outputs(*due), final=done)
        else:
            live.held.extend(out.new_token_ids)
            live.held_logprobs.extend(out.logprobs)
            if done:
                send(live, full_outputs(live.held, live.held_logprobs, out), final=True)

    def _fail_one(self, live: LiveRequest, e: Exception, abort: bool) -> None:
        """Ends one request whose own part raised, with an error FINAL; with `abort`, the engine
        drops it at the next step boundary. Nothing else is touched."""
        self.live.pop(live.rid, None)
        end_span(live, Refusal.INTERNAL_ERROR.name)
        if abort:
            self._abort(live.rid)
        self.log.log_error(f"request {live.rid[:64]} failed: {type(e).__name__}")
        self.outbox.send(live, ErrorResponse(refusal_message(Refusal.INTERNAL_ERROR, type(e).__name__)), True)

    def _abort(self, rid: str) -> None:
        """The engine drops a request already ended here; its id stays taken until its ABORTED."""
        self.engine.abort(rid)
        self._aborting.add(rid)

    def _fail_live(self, refusal: Refusal, detail: str = "") -> None:
        live, self.live = self.live, {}
        for entry in live.values():
            end_span(entry, refusal.name)
            self.outbox.send(entry, ErrorResponse(refusal_message(refusal, detail)), final=True)
