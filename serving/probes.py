"""Whether a running local worker must be restarted (the supervisor restarts it; docs/architecture.md,
"Failure and lifecycle"). Beyond its `tritonserver` process exiting, a worker fails when:

    stub       a Python-backend stub of a model it serves exited (serving/stubs.py: every pass, so the
               worker stops being routable, and health turns NOT_SERVING, as soon as a stub is gone)
    identity   the server answering on its port is not this launch (serving/triton.py `check`)
    readiness  a model it loaded is not ready (every probe interval)
    canary     a model silent for the probe interval (frontend/dispatch/worker_liveness.py) gets a tiny
               request: one prompt token, one output token. A live model answers within one engine step, with
               its admission response or one of the worker's own refusals (capacity: the engine
               loop turned). Triton's own error instead ("stub process is not healthy": the
               Python-backend stub died or is stopped, which Triton still reports as a READY
               model), a broken stream, or no answer within the inactivity timeout means it is not
               alive. After its first answer the canary is read on to its FINAL (its one token, a
               step later) and never cancelled: cancelling a stream whose FINAL is being written
               leaks the request in Triton 2.51's gRPC stream handler (see `send_canary`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from contracts import worker as wire
from contracts.tier import Tier
from frontend.catalog.registry import ServedVersion
from frontend.dispatch.worker_client import (
    TritonWorker,
    WorkerCapacityError,
    WorkerDown,
    WorkerError,
    WorkerLost,
    WorkerRequest,
)
from frontend.dispatch.worker_pool import WorkerHandle
from serving.stubs import StubWatch
from serving.triton_host import ModelNotReady, TritonError
from serving.workers import LocalWorker

CANARY_SALT = "canary"  # the canary's prefix-cache scope: no tenant's


class CanaryFailed(Exception):
    """The model did not answer the canary as a live model does (the message says how)."""


class CanaryRefused(CanaryFailed):
    """Triton refused the canary itself (a stopped stub, or a model not loaded or unloading)."""


def canary_request(version: ServedVersion, request_id: str) -> WorkerRequest:
    """A canary carries W3C trace context marked not sampled (flags 00): the worker's engine span,
    parented on it, is not recorded, so an idle platform's canaries send nothing to the collector.
    Triton traces by its own rate whatever the flag: its spans of a canary name its request id
    (`canary-<worker>-<n>`, docs/observability.md says how to drop them)."""
    unsampled = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-00"
    return WorkerRequest(
        model=version.triton_model_name,
        prompt_ids=(version.eos_token_id,),  # any token of the vocabulary
        max_output_tokens=1,
        end_id=None,
        generation_id=request_id,
        cache_salt=CANARY_SALT,
        tier=Tier.BATCH,  # it never takes a prefill turn from interactive work
        trace_headers=(("traceparent", unsampled),),
    )


async def send_canary(client: TritonWorker, req: WorkerRequest, timeout_s: float) -> None:
    """Returns once the model answered the request within `timeout_s`; CanaryFailed otherwise.

    The first answer is the sign of life. The rest of the stream (its one output token and FINAL,
    which can wait behind long prefill steps on a slow host) is then read in the background, with
    no say in the verdict, so the request ends as a completed one and is never cancelled:
    cancelling a Triton request just as its FINAL is sent is the one moment Triton 2.51's gRPC
    stream handler loses a cancellation (its state stays CANCELLATION_ISSUED, "Waiting for the
    callback to retrieve cancellation", and never releases the request, so Triton counts it in
    flight for ever and the model can never unload: a retired version stayed UNLOADING)."""
    chunks = client.generate(req)
    drain = False
    try:
        async with asyncio.timeout(timeout_s):
            drain = await anext(chunks, None) is not None
    except WorkerCapacityError:
        pass  # refused for memory now: the engine loop answered
    except (WorkerError, WorkerDown) as e:
        if wire.parse_refusal(str(e))[0] is None:  # Triton's error, not the worker's refusal
            raise CanaryRefused(f"canary refused by Triton: {e}") from None
    except WorkerLost as e:
        raise CanaryFailed(f"canary stream lost: {e}") from None
    except TimeoutError:
        raise CanaryFailed(f"canary unanswered for {timeout_s:g}s") from None
    finally:
        if drain:
            task = asyncio.get_running_loop().create_task(_read_to_the_end(chunks))
            _DRAINING.add(task)
            task.add_done_callback(_DRAINING.discard)
        else:
            await chunks.aclose()


_DRAINING: set[asyncio.Task[None]] = set()  # canaries read on after their verdict (kept referenced)


async def canaries_drained() -> None:
    """Waits until every answered canary has been read to its end."""
    while _DRAINING:
        await asyncio.gather(*_DRAINING)


async def _read_to_the_end(chunks: AsyncIterator[object]) -> None:
    """What is left of an answered canary's stream, to its FINAL; how it ends no longer matters."""
    try:
        async for _ in chunks:
            pass
    except (WorkerError, WorkerLost, asyncio.CancelledError):
        pass
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]


@dataclass(slots=True, eq=False)
class Canaries:
    """The canaries of one worker client, one in flight per model at most: a model this client
    has heard nothing from for `interval_s` gets one (its answer is a sign of life for every stream
    of the client to that model, frontend/dispatch/worker_liveness.py)."""

    client: TritonWorker
    name: str  # the worker's, in the canaries' request ids
    interval_s: float
    timeout_s: float  # a canary unanswered this long fails
    _inflight: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # model -> in flight
    _sent: int = 0

    def failure(self, serving: Iterable[str]) -> str | None:
        """Why a canary that ended since the last call failed, or None (the ended ones are done with).
        Triton's refusal counts only for a model the worker is `serving`: a canary sent just before
        its model began unloading is refused, which says nothing about the worker. A canary left
        unanswered or a broken stream always counts (a hung stub would hold its unload for ever)."""
        serving = set(serving)
        for model, task in list(self._inflight.items()):
            if task.done():
                del self._inflight[model]
                error = None if task.cancelled() else task.exception()
                if error is not None and (model in serving or not isinstance(error, CanaryRefused)):
                    return f"model {model}: {error}"
        return None

    def send_due(self, versions: Iterable[ServedVersion]) -> None:
        """Starts a canary to each of the versions' models that is due one."""
        for version in versions:
            model = version.triton_model_name
            if model not in self._inflight and self.client.liveness_of(model).silent_s() >= self.interval_s:
                self._sent += 1
                req = canary_request(version, f"canary-{self.name}-{self._sent}")
                self._inflight[model] = asyncio.create_task(send_canary(self.client, req, self.timeout_s))

    async def reset(self) -> None:
        """No canary in flight, and every model counts as just seen."""
        tasks = list(self._inflight.values())
        self._inflight.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for liveness in self.client.liveness.values():
            liveness.seen()


@dataclass(slots=True, eq=False)
class WorkerProbe:
    """The probes of one running worker (its process is the supervisor's to check): its stubs are
    watched every pass (serving/stubs.py), identity and readiness checked and canaries sent at its
    probe interval."""

    worker: LocalWorker
    handle: WorkerHandle
    interval_s: float  # identity and readiness checked this often; a model this silent gets a canary
    timeout_s: float  # a canary unanswered this long fails
    clock: Callable[[], float] = time.monotonic
    _canaries: Canaries = field(init=False)
    _stubs: StubWatch = field(default_factory=StubWatch)  # its stubs: one that exits fails it at once
    _next_check: float = 0.0

    def __post_init__(self) -> None:
        self._canaries = Canaries(self.handle.client, self.worker.worker_id, self.interval_s, self.timeout_s)

    async def failure(self) -> str | None:
        """Why the worker must be restarted now, or None; starts the canaries that are due.

        A version leaves `worker.versions` before it is unloaded (serving/worker_set.py), and a
        not-ready verdict or Triton's refusal counts only for the models the worker still serves once
        it is in: a readiness check or a canary in flight as a retired version unloads finds it not
        ready, which is no failure."""
        process = self.worker.server.process  # None: not running
        gone = None if process is None else self._stubs.gone(process.pid, self._serving())
        failed = gone or self._canaries.failure(self._serving())
        if failed is not None:
            return failed
        now = self.clock()
        if now >= self._next_check:
            self._next_check = now + self.interval_s
            try:
                if process is not None:
                    await asyncio.to_thread(self._stubs.discover, process.pid)
                await asyncio.to_thread(self.worker.server.check, list(self._serving()))
            except ModelNotReady as e:
                if e.model in self._serving():
                    return str(e)
                self._next_check = 0.0  # unloaded meanwhile: check the others on the next pass
            except TritonError as e:
                return str(e)
        self._canaries.send_due(v for _, v in self.worker.versions)
        return None

    def _serving(self) -> list[str]:
        """The models the worker serves now."""
        return [v.triton_model_name for _, v in self.worker.versions]

    async def reset(self) -> None:
        """Before and after a restart: no canary in flight, and every model counts as just seen."""
        await self._canaries.reset()
        self._next_check = 0.0
