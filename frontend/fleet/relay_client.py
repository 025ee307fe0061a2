"""Reaching the frontend that runs a generation this one does not: Resume and Cancel forwarded to
the owner's internal relay (frontend/fleet/relay.py serves it), whatever frontend the client reached.

    Forwarding   looks the owner up in the store (control/frontends.py), then opens the owner's
                 relay stream (a Follower) or forwards the cancel. An owner that is gone (its
                 registration expired, or it does not answer) is answered from the store at once:
                 its recorded state, never a wait
    RelayStream  one forwarded Resume: the owner's events passed through as they come, so the
                 client sees the owner's sequence numbers (no gap, no duplicate); the owner's
                 refusals (NOT_FOUND, CURSOR_EXPIRED, ...) reach it with their status unchanged
    RelayClient  one channel per owner address, and the relay credential on every call

The relay has no .proto of its own: its messages are the public API's (ResumeRequest,
CancelGenerationRequest, GenerationEvent, Generation) and it is not part of the public API or the
SDKs. The tenant travels in metadata, vouched for by the credential (the caller authenticated it).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime

import grpc
from grpc_status import rpc_status

from control.frontends import Owner, generation_owner
from datastore.store import Store
from frontend.api_errors import ApiError, relayed
from frontend.auth import Tenant
from frontend.refusals import EventsExpired, Refusal, Unavailable
from llm.v1 import generations_pb2 as pb

log = logging.getLogger(__name__)
SERVICE = "llm.internal.v1.Relay"
RESUME = f"/{SERVICE}/Resume"
CANCEL = f"/{SERVICE}/Cancel"
KEY_HEADER = "llm-relay-key"  # the relay credential
TENANT_HEADER = "llm-tenant"  # the tenant the forwarding frontend authenticated
CANCEL_TIMEOUT_S = 60.0  # the owner waits up to 30 s for the run to end, then answers


def relay_credential(frontend_key: str) -> str:
    """The relay's credential, derived from the frontends' shared secret ([fleet] frontend_key)."""
    return hmac.new(frontend_key.encode(), b"llm relay credential", hashlib.sha256).hexdigest()


def failure(e: grpc.aio.AioRpcError) -> ApiError | None:
    """The owner's own refusal carried by a failed relay call; None for a transport failure."""
    status = rpc_status.from_call(e)
    return relayed(status) if status is not None else None


def owner_gone(owner: Owner) -> Refusal:
    """The answer for a generation whose owner is gone: its recorded state."""
    state = str(owner.state)
    if owner.state.terminal:
        return EventsExpired(
            owner.generation_id,
            f"generation {owner.generation_id} ended {state}; the frontend that ran it is gone, and its "
            "events with it: GetGeneration reports its state and usage",
            state=state,
        )
    return Unavailable(
        "OWNER_UNAVAILABLE",
        f"the frontend running generation {owner.generation_id} ({state}) does not answer; once its "
        "lease expires the generation is recorded INTERRUPTED",
        retry_after_s=2.0,
    )


class RelayClient:
    def __init__(self, credential: str) -> None:
        self._credential = credential
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _channel(self, address: str) -> grpc.aio.Channel:
        if address not in self._channels:
            self._channels[address] = grpc.aio.insecure_channel(address)
        return self._channels[address]

    def _metadata(self, tenant: Tenant) -> tuple[tuple[str, str], ...]:
        return ((KEY_HEADER, self._credential), (TENANT_HEADER, tenant.id))

    def resume(self, address: str, tenant: Tenant, request: pb.ResumeRequest) -> grpc.aio.UnaryStreamCall:
        method = self._channel(address).unary_stream(
            RESUME,
            request_serializer=pb.ResumeRequest.SerializeToString,
            response_deserializer=pb.GenerationEvent.FromString,
        )
        return method(request, metadata=self._metadata(tenant))

    async def cancel(
        self, address: str, tenant: Tenant, request: pb.CancelGenerationRequest
    ) -> pb.Generation:
        method = self._channel(address).unary_unary(
            CANCEL,
            request_serializer=pb.CancelGenerationRequest.SerializeToString,
            response_deserializer=pb.Generation.FromString,
        )
        answer: pb.Generation = await method(
            request, metadata=self._metadata(tenant), timeout=CANCEL_TIMEOUT_S
        )
        return answer

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


class RelayStream:
    """A forwarded Resume, read as a Follower. A transport failure before the first event means the
    owner went away: the answer is then its recorded state (`unreachable`); after it, the client
    gets UNAVAILABLE OWNER_LOST and may Resume again from its last sequence."""

    def __init__(
        self,
        call: grpc.aio.UnaryStreamCall,
        generation_id: str,
        unreachable: Callable[[], Awaitable[Exception]],
    ) -> None:
        self.call = call
        self._generation_id = generation_id
        self._unreachable = unreachable
        self.on_close: Callable[[], None] | None = None  # called once, by the first close()

    @property
    def generation_id(self) -> str:
        return self._generation_id

    async def events(self) -> AsyncGenerator[pb.GenerationEvent, None]:
        seen = False
        try:
            async for event in self.call:
                seen = True
                yield event
        except grpc.aio.AioRpcError as e:
            refused = failure(e)
            if refused is not None:
                raise refused from None
            log.warning("generation %s: relay to its owner failed (%s)", self._generation_id, e.code().name)
            if not seen:
                raise await self._unreachable() from None
            raise Unavailable(
                "OWNER_LOST", "the frontend running this generation went away; Resume from the last sequence"
            ) from None

    def close(self) -> None:
        self.call.cancel()
        done, self.on_close = self.on_close, None
        if done is not None:
            done()


class Forwarding:
    """What a frontend does with a generation it does not run (`frontend_id` names this frontend)."""

    def __init__(
        self,
        store: Store,
        frontend_id: str,
        relay: RelayClient,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.frontend_id = frontend_id
        self.relay = relay
        self.clock = clock

    async def owner(self, tenant_id: str, generation_id: str) -> Owner:
        """GenerationNotFound (NOT_FOUND) for unknown ids and other tenants' generations."""

        def read() -> Owner:
            with self.store.transaction() as session:
                return generation_owner(session, tenant_id, generation_id, now=self.clock())

        return await asyncio.to_thread(read)

    async def resume(self, tenant: Tenant, request: pb.ResumeRequest) -> RelayStream | None:
        """The owner's stream of the generation after `after_sequence`; None when this frontend is
        its owner (it has not retained it); the recorded state's ApiError when the owner is gone."""
        owner = await self.owner(tenant.id, request.generation_id)
        if owner.frontend_id == self.frontend_id:
            return None
        if not owner.relay_address:
            raise owner_gone(owner)

        async def unreachable() -> Exception:
            return owner_gone(await self.owner(tenant.id, request.generation_id))

        call = self.relay.resume(owner.relay_address, tenant, request)
        return RelayStream(call, owner.generation_id, unreachable)

    async def cancel(self, tenant: Tenant, request: pb.CancelGenerationRequest) -> pb.Generation | None:
        """The owner's answer to the cancel; None when this frontend must record it itself (it owns
        the generation, or the owner is gone: the intent is then persisted, and the sweeper ends it)."""
        owner = await self.owner(tenant.id, request.generation_id)
        if owner.frontend_id == self.frontend_id or not owner.relay_address or owner.state.terminal:
            return None
        try:
            return await self.relay.cancel(owner.relay_address, tenant, request)
        except grpc.aio.AioRpcError as e:
            refused = failure(e)
            if refused is not None:
                raise refused from None
            log.warning("generation %s: cancel not forwarded (%s)", request.generation_id, e.code().name)
            return None
