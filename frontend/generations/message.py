"""The API's view of a recorded generation (GetGeneration, CancelGeneration answers)."""

from __future__ import annotations

from control.states import GenerationState
from lifecycle.reads import GenerationRecord
from llm.v1 import generations_pb2 as pb

Reason = pb.Finished.Reason


def generation_message(g: GenerationRecord) -> pb.Generation:
    """Its usage is final once every attempt is sealed, or when it ended before any attempt (nothing
    ran, nothing is billed: as its stream's `finished` says)."""
    billed = g.usage
    never_ran = g.epoch is None and GenerationState(g.state).terminal
    return pb.Generation(
        generation_id=g.generation_id,
        request_id=g.request_id,
        state=pb.Generation.State.Value(str(g.state)),
        model_version=g.model_version_id,
        finish_reason=_reason(g.terminal_reason, GenerationState(g.state)),
        epoch=g.epoch or 0,
        usage=pb.TokenUsage(
            input_tokens=billed.billed.input_tokens,
            cached_input_tokens=billed.billed.cached_input_tokens,
            output_tokens=billed.billed.output_tokens,
        ),
        usage_final=billed.final or never_ran,
    )


def _reason(name: str | None, state: GenerationState) -> pb.Finished.Reason:
    """The API's finish reason of a recorded terminal reason (SLOW_CONSUMER is CANCELED, ...)."""
    value = pb.Finished.Reason.DESCRIPTOR.values_by_name.get(name or "")
    if value is not None:
        return Reason.Value(value.name)
    by_state = {
        GenerationState.CANCELED: Reason.CANCELED,
        GenerationState.INTERRUPTED: Reason.INTERRUPTED,
        GenerationState.FAILED: Reason.FAILED,
    }
    return by_state.get(state, Reason.REASON_UNSPECIFIED)
