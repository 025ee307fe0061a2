"""Small client helpers of the fleet tests (requests, reading streams, errors)."""

from __future__ import annotations

import grpc
from grpc_status import rpc_status

from frontend.api_errors import error_info
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from tests.e2e.conftest import KEY_ALPHA, auth

MODEL = "smollm2-135m"
Reason = pb.Finished.Reason
State = pb.Generation.State
TIMEOUT_S = 180.0  # hang guard of one call


def stub(channel: grpc.aio.Channel) -> generations_pb2_grpc.GenerationsStub:
    return generations_pb2_grpc.GenerationsStub(channel)


def request(tokens: int, prompt: str = "Count:", request_id: str = "") -> pb.GenerateRequest:
    """`tokens` output tokens exactly (ignore_eos), greedy."""
    return pb.GenerateRequest(
        request_id=request_id,
        model=MODEL,
        prompt=prompt,
        max_output_tokens=tokens,
        sampling=pb.SamplingParams(ignore_eos=True),
    )


def generate(
    channel: grpc.aio.Channel, req: pb.GenerateRequest, key: str = KEY_ALPHA
) -> grpc.aio.UnaryStreamCall:
    return stub(channel).Generate(req, metadata=auth(key), timeout=TIMEOUT_S)


def resume(
    channel: grpc.aio.Channel, generation_id: str, after: int, key: str = KEY_ALPHA
) -> grpc.aio.UnaryStreamCall:
    req = pb.ResumeRequest(generation_id=generation_id, after_sequence=after)
    return stub(channel).Resume(req, metadata=auth(key), timeout=TIMEOUT_S)


async def read(call: grpc.aio.UnaryStreamCall, n: int) -> list[pb.GenerationEvent]:
    """The next `n` events of a call (fewer if it ends)."""
    events: list[pb.GenerationEvent] = []
    while len(events) < n and (event := await call.read()) is not grpc.aio.EOF:
        events.append(event)
    return events


async def read_rest(call: grpc.aio.UnaryStreamCall) -> list[pb.GenerationEvent]:
    """Every event left, until the call ends (raising its error, if it fails)."""
    events: list[pb.GenerationEvent] = []
    while (event := await call.read()) is not grpc.aio.EOF:
        events.append(event)
    return events


async def get(channel: grpc.aio.Channel, generation_id: str, key: str = KEY_ALPHA) -> pb.Generation:
    req = pb.GetGenerationRequest(generation_id=generation_id)
    got: pb.Generation = await stub(channel).GetGeneration(req, metadata=auth(key), timeout=TIMEOUT_S)
    return got


async def cancel(channel: grpc.aio.Channel, generation_id: str, key: str = KEY_ALPHA) -> pb.Generation:
    req = pb.CancelGenerationRequest(generation_id=generation_id)
    got: pb.Generation = await stub(channel).CancelGeneration(req, metadata=auth(key), timeout=TIMEOUT_S)
    return got


def reason_of(e: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of a failed call ("" when it has none)."""
    status = rpc_status.from_call(e)
    info = error_info(status) if status is not None else None
    return info.reason if info is not None else ""


def metadata_of(e: grpc.aio.AioRpcError) -> dict[str, str]:
    status = rpc_status.from_call(e)
    info = error_info(status) if status is not None else None
    return dict(info.metadata) if info is not None else {}


def sequences(events: list[pb.GenerationEvent]) -> list[int]:
    return [e.sequence for e in events]


def output_tokens(events: list[pb.GenerationEvent]) -> list[int]:
    return [t for e in events if e.HasField("delta") for t in e.delta.token_ids]
