"""How a run records its end when the store was away for longer than its attempt's lease."""

from __future__ import annotations

from typing import Any, cast

from config.settings import FrontendSettings, StoreSettings
from control.generations import get_generation
from control.states import GenerationState
from datastore.store import Store
from frontend.generations.live import LiveGeneration
from frontend.generations.run_loop import RunLoop, relabelled
from frontend.generations.stream_log import EventLog
from llm.v1 import generations_pb2 as pb
from tests.builders import TENANT, at, running, seed
from tests.datastore.stores import migrated, store

__all__ = ["migrated", "store"]  # the store fixtures: both backends


def run_loop(store: Store, seconds: float) -> RunLoop:
    unused = cast(Any, None)  # what recording an end does not touch
    return RunLoop(
        store, unused, unused, unused, FrontendSettings(), StoreSettings(), lambda: at(seconds), unused
    )


def test_a_completed_run_whose_lease_lapsed_is_recorded_interrupted(store: Store) -> None:
    seed(store)
    lease = running(store)  # leased for 30 s from T0
    live = LiveGeneration(lease.generation_id, TENANT, EventLog(lease.generation_id, 8, 1 << 16))
    live.lease = lease
    lapsed = run_loop(store, 45)._end(live, GenerationState.COMPLETED, "OUTPUT_LIMIT")
    with store.transaction() as session:
        g = get_generation(session, TENANT, lease.generation_id)
    assert lapsed and (g.state, g.terminal_reason) == (GenerationState.INTERRUPTED, "LEASE_EXPIRED")


def test_within_its_lease_it_completes(store: Store) -> None:
    seed(store)
    lease = running(store)
    live = LiveGeneration(lease.generation_id, TENANT, EventLog(lease.generation_id, 8, 1 << 16))
    live.lease = lease
    assert not run_loop(store, 10)._end(live, GenerationState.COMPLETED, "OUTPUT_LIMIT")
    with store.transaction() as session:
        assert get_generation(session, TENANT, lease.generation_id).state is GenerationState.COMPLETED


def test_the_client_is_told_interrupted_with_final_or_queued_usage() -> None:
    usage = pb.TokenUsage(input_tokens=5, output_tokens=7)
    done = pb.GenerationEvent(
        sequence=9, finished=pb.Finished(reason=pb.Finished.OUTPUT_LIMIT, usage=usage, usage_final=True)
    )
    for final in (True, False):
        f = relabelled(done, final=final).finished
        assert (f.reason, f.usage, f.usage_final) == (pb.Finished.INTERRUPTED, usage, final)
    assert done.finished.reason == pb.Finished.OUTPUT_LIMIT  # a copy
