"""One generation's event stream: worker token ids in, ordered GenerationEvents out.

    started -> delta ... -> usage -> finished

Sequence numbers start at 1 and increase by one per event. Text is detokenized incrementally
(never splitting a UTF-8 character) and passed through the stop-string matcher; a stop string ends
the generation and cancels the worker request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from frontend.registry import ServedVersion
from frontend.stops import StopMatcher
from frontend.validation import GenerationParams
from frontend.worker import TritonWorker, WorkerError, WorkerLost, WorkerRequest
from llm.v1 import generations_pb2 as pb

Reason = pb.Finished.Reason


@dataclass(slots=True)
class GenerationRun:
    generation_id: str
    request_id: str
    version: ServedVersion
    prompt_ids: tuple[int, ...]
    params: GenerationParams
    cache_salt: str  # server-controlled prefix-cache scope (the tenant)
    epoch: int = 1
    _sequence: int = 0
    output_ids: list[int] = field(default_factory=list)
    delivered_tokens: int = 0

    def _event(self, **kind: Any) -> pb.GenerationEvent:
        self._sequence += 1
        return pb.GenerationEvent(
            generation_id=self.generation_id, epoch=self.epoch, sequence=self._sequence, **kind
        )

    def usage(self) -> pb.TokenUsage:
        return pb.TokenUsage(
            input_tokens=len(self.prompt_ids),
            cached_input_tokens=0,
            output_tokens=len(self.output_ids),
            delivered_output_tokens=self.delivered_tokens,
        )

    def worker_request(self) -> WorkerRequest:
        p = self.params
        return WorkerRequest(
            model=self.version.triton_model_name,
            prompt_ids=self.prompt_ids,
            max_output_tokens=p.max_output_tokens,
            end_id=None if p.ignore_eos else self.version.eos_token_id,
            temperature=p.temperature,
            top_k=p.top_k,
            top_p=p.top_p,
            seed=p.seed,
            generation_id=self.generation_id,
            epoch=self.epoch,
            cache_salt=self.cache_salt,
        )

    async def events(self, worker: TritonWorker) -> AsyncIterator[pb.GenerationEvent]:
        yield self._event(
            started=pb.Started(
                model_version=self.version.version_id,
                input_tokens=len(self.prompt_ids),
                cached_input_tokens=0,
                request_id=self.request_id,
            )
        )
        detok = self.version.tokenizer.detokenizer()
        stops = StopMatcher(self.params.stop)
        reason: pb.Finished.Reason = Reason.INTERRUPTED
        tokens = worker.generate(self.worker_request())
        try:
            async for new_ids in tokens:
                self.output_ids.extend(new_ids)
                result = stops.feed("".join(detok.step(t) for t in new_ids))
                self.delivered_tokens += len(new_ids)
                yield self._event(delta=pb.Delta(text=result.emit, token_ids=new_ids))
                if result.stopped:
                    reason = Reason.STOP_SEQUENCE
                    break
            else:
                reason = self._natural_reason()
        except WorkerLost:
            reason = Reason.INTERRUPTED
        except WorkerError:
            reason = Reason.FAILED
        finally:
            await tokens.aclose()  # cancels the worker request if it is still running
        if reason in (Reason.COMPLETED, Reason.OUTPUT_LIMIT):
            tail = stops.flush()
            if tail:
                yield self._event(delta=pb.Delta(text=tail))
        usage = self.usage()
        yield self._event(usage=pb.UsageUpdate(usage=usage))
        final = reason not in (Reason.INTERRUPTED, Reason.FAILED)
        yield self._event(finished=pb.Finished(reason=reason, usage=usage, usage_final=final))

    def _natural_reason(self) -> pb.Finished.Reason:
        """Why the worker ended the request on its own."""
        if (
            not self.params.ignore_eos
            and self.output_ids
            and self.output_ids[-1] == self.version.eos_token_id
        ):
            return Reason.COMPLETED
        if len(self.output_ids) >= self.params.max_output_tokens:
            return Reason.OUTPUT_LIMIT
        return Reason.INTERRUPTED
