"""The internal relay between frontends, over real gRPC on loopback with a fake owner's calls:
its credential, the tenant it carries, refusals passed through unchanged, and the answers for an
owner that is gone (frontend/fleet/relay.py, frontend/fleet/relay_client.py)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import grpc
import pytest
from grpc_status import rpc_status

from control.frontends import Owner
from control.states import GenerationState
from frontend.api_errors import ApiError, api_error, error_info, relayed
from frontend.auth import Tenant
from frontend.fleet.relay import relay_server
from frontend.fleet.relay_client import (
    KEY_HEADER,
    RESUME,
    RelayClient,
    RelayStream,
    owner_gone,
    relay_credential,
)
from frontend.refusals import EventsExpired
from llm.v1 import generations_pb2 as pb
from tests.refusals import refused

CREDENTIAL = relay_credential("frontends-secret")
TENANT = Tenant("alpha", 1.0)


class FakeReader:
    def __init__(self, tenant: Tenant, request: pb.ResumeRequest) -> None:
        self.generation_id = request.generation_id
        self.after = request.after_sequence
        self.closed = False

    async def events(self) -> AsyncGenerator[pb.GenerationEvent, None]:
        for sequence in range(self.after + 1, 4):
            yield pb.GenerationEvent(generation_id=self.generation_id, sequence=sequence)

    def close(self) -> None:
        self.closed = True


class FakeCalls:
    """The owner's side: generation "g1" is alpha's; anything else is not retained here."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def resume_here(self, tenant: Tenant, request: pb.ResumeRequest) -> FakeReader:
        self.seen.append((tenant.id, request.generation_id))
        if tenant.id != "alpha" or request.generation_id != "g1":
            raise EventsExpired(request.generation_id)
        return FakeReader(tenant, request)

    async def cancel_here(self, tenant: Tenant, request: pb.CancelGenerationRequest) -> pb.Generation:
        self.seen.append((tenant.id, request.generation_id))
        return pb.Generation(generation_id=request.generation_id, state=pb.Generation.State.CANCELED)


@pytest.fixture
async def relay() -> AsyncIterator[tuple[str, FakeCalls]]:
    calls = FakeCalls()
    async with relay_server("127.0.0.1:0", calls, CREDENTIAL) as port:  # type: ignore[arg-type]
        yield f"127.0.0.1:{port}", calls


async def test_resume_and_cancel_reach_the_owner_with_the_tenant(relay: tuple[str, FakeCalls]) -> None:
    address, calls = relay
    client = RelayClient(CREDENTIAL)
    try:
        call = client.resume(address, TENANT, pb.ResumeRequest(generation_id="g1", after_sequence=1))
        assert [e.sequence async for e in call] == [2, 3]
        answer = await client.cancel(address, TENANT, pb.CancelGenerationRequest(generation_id="g1"))
        assert answer.state == pb.Generation.State.CANCELED
        assert calls.seen == [("alpha", "g1"), ("alpha", "g1")]
    finally:
        await client.close()


async def test_the_owners_refusal_comes_through_unchanged(relay: tuple[str, FakeCalls]) -> None:
    address, _ = relay
    client = RelayClient(CREDENTIAL)
    try:
        call = client.resume(address, TENANT, pb.ResumeRequest(generation_id="g2"))
        stream = RelayStream(call, "g2", unreachable=_never)
        with refused() as refusal:
            _ = [e async for e in stream.events()]
        assert (refusal.value.code, refusal.value.reason) == (grpc.StatusCode.OUT_OF_RANGE, "CURSOR_EXPIRED")
        assert refusal.value.metadata == {"generation_id": "g2"}
    finally:
        await client.close()


@pytest.mark.parametrize("key", [None, "wrong", "key-alpha"])
async def test_the_relay_needs_its_own_credential(relay: tuple[str, FakeCalls], key: str | None) -> None:
    address, calls = relay
    async with grpc.aio.insecure_channel(address) as channel:
        resume = channel.unary_stream(
            RESUME, pb.ResumeRequest.SerializeToString, pb.GenerationEvent.FromString
        )
        metadata = [] if key is None else [(KEY_HEADER, key)]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            _ = [e async for e in resume(pb.ResumeRequest(generation_id="g1"), metadata=metadata)]
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert calls.seen == []


async def test_a_relayed_call_names_its_tenant(relay: tuple[str, FakeCalls]) -> None:
    address, calls = relay
    async with grpc.aio.insecure_channel(address) as channel:
        resume = channel.unary_stream(
            RESUME, pb.ResumeRequest.SerializeToString, pb.GenerationEvent.FromString
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            _ = [
                e
                async for e in resume(
                    pb.ResumeRequest(generation_id="g1"), metadata=[(KEY_HEADER, CREDENTIAL)]
                )
            ]
    status = rpc_status.from_call(refused.value)
    assert status is not None
    info = error_info(status)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and info is not None
    assert info.reason == "MISSING_TENANT" and calls.seen == []


async def test_an_owner_that_stops_answering_is_the_recorded_state_then_owner_lost() -> None:
    """Before any event, a transport failure asks the store (the recorded state); after events,
    the client is told to Resume again (UNAVAILABLE OWNER_LOST)."""
    gone = owner_gone(Owner("g1", GenerationState.RUNNING, "f1", ""))

    async def recorded() -> Exception:
        return gone

    for events_first, expected in ((0, gone.reason), (2, "OWNER_LOST")):
        stream = RelayStream(FailingCall(events_first), "g1", recorded)
        seen = []
        with refused() as failed:
            async for event in stream.events():
                seen.append(event.sequence)
        assert failed.value.reason == expected and seen == list(range(1, events_first + 1))
        assert failed.value.code == grpc.StatusCode.UNAVAILABLE


def test_the_answer_for_a_gone_owner_is_its_recorded_state() -> None:
    ended = api_error(owner_gone(Owner("g1", GenerationState.INTERRUPTED, "f1", "")))
    assert (ended.code, ended.reason) == (grpc.StatusCode.OUT_OF_RANGE, "CURSOR_EXPIRED")
    assert ended.metadata == {"generation_id": "g1", "state": "INTERRUPTED"}
    running = api_error(owner_gone(Owner("g1", GenerationState.RUNNING, "f1", "")))
    assert (running.code, running.reason) == (grpc.StatusCode.UNAVAILABLE, "OWNER_UNAVAILABLE")
    assert running.retry_after_s is not None


def test_an_api_error_survives_the_hop() -> None:
    error = ApiError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
        "tenant quota concurrent_generations exhausted",
        {"quota": "concurrent_generations"},
        retry_after_s=1.0,
        quota=("tenant:alpha", "limit 2"),
    )
    back = relayed(error.to_proto())
    assert back is not None
    assert (back.code, back.reason, back.message, back.metadata, back.quota) == (
        error.code,
        error.reason,
        error.message,
        error.metadata,
        error.quota,
    )
    assert back.retry_after_s is not None and 1.0 <= back.retry_after_s <= 1.5
    foreign = ApiError(grpc.StatusCode.INTERNAL, "X", "y").to_proto()
    del foreign.details[:]  # no ErrorInfo of this API: a transport's status, not a refusal
    assert relayed(foreign) is None


def test_the_credential_is_derived_from_the_shared_secret() -> None:
    assert relay_credential("frontends-secret") == CREDENTIAL != relay_credential("other")
    assert "frontends-secret" not in CREDENTIAL


async def _never() -> ApiError:
    raise AssertionError("the owner answered: its refusal is passed on, the store is not asked")


class FailingCall:
    """A relay call whose transport breaks after `events` events."""

    def __init__(self, events: int) -> None:
        self.events = events

    def __aiter__(self) -> FailingCall:
        self.sent = 0
        return self

    async def __anext__(self) -> pb.GenerationEvent:
        if self.sent == self.events:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
            )
        self.sent += 1
        return pb.GenerationEvent(generation_id="g1", sequence=self.sent)

    def cancel(self) -> None:
        pass
