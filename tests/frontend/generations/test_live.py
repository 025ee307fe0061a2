"""The live registry's retention: a run whose log closed stays resumable `retain_s`, and while the
closed runs' logs fit `retain_max_bytes`, then is forgotten, oldest first (frontend/generations/live.py). The
registry's clock is a counter set by the test."""

from __future__ import annotations

from frontend.generations.live import LiveGeneration, LiveRegistry
from frontend.generations.stream_log import EventLog
from llm.v1 import generations_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(gid: str, tenant: str = "t1") -> LiveGeneration:
    return LiveGeneration(gid, tenant, EventLog(gid))


def delta(gid: str, sequence: int, text: str = "word") -> pb.GenerationEvent:
    return pb.GenerationEvent(generation_id=gid, sequence=sequence, delta=pb.Delta(text=text))


def registry(clock: Clock, retain_s: float = 10.0, retain_max_bytes: int = 64 << 20) -> LiveRegistry:
    return LiveRegistry(grace_s=1.0, retain_s=retain_s, retain_max_bytes=retain_max_bytes, clock=clock)


def test_a_closed_run_is_retained_for_retain_s_then_forgotten_oldest_first() -> None:
    clock = Clock()
    live = registry(clock)
    runs = [run(f"g{i}") for i in range(3)]
    for i, r in enumerate(runs):
        live.add(r)
        clock.now = float(i)
        live.closed(r)
    assert [r.closed_at for r in runs] == [0.0, 1.0, 2.0]
    clock.now = 10.0  # g0 closed exactly retain_s ago: still retained
    live.forget_expired()
    assert [live.get(f"g{i}") for i in range(3)] == runs
    clock.now = 11.5  # g0 and g1 older than retain_s
    live.forget_expired()
    assert live.get("g0") is None and live.get("g1") is None
    assert live.retained("t1", "g2") is runs[2]
    clock.now = 12.5
    assert live.retained("t1", "g2") is None  # retained() forgets first


def test_a_run_whose_log_is_open_is_never_forgotten() -> None:
    clock = Clock()
    live = registry(clock)
    open_run, done = run("open"), run("done")
    live.add(open_run)
    live.add(done)
    live.closed(done)
    clock.now = 1_000.0
    live.forget_expired()
    assert live.get("open") is open_run and live.get("done") is None
    assert live.open() == [open_run]


def test_a_run_added_again_under_its_id_outlives_the_old_ones_expiry() -> None:
    """A generation run again on this frontend (a new attempt under the same id) replaces the
    retained run; the old run's expiry must not drop the new one."""
    clock = Clock()
    live = registry(clock)
    old = run("g")
    live.add(old)
    live.closed(old)
    clock.now = 5.0
    new = run("g")
    live.add(new)
    clock.now = 20.0  # the old run's retention is over; the new one is still running
    live.forget_expired()
    assert live.get("g") is new
    live.closed(new)
    clock.now = 30.5
    live.forget_expired()
    assert live.get("g") is None


def test_another_tenants_retained_run_is_not_found() -> None:
    clock = Clock()
    live = registry(clock)
    r = run("g", tenant="t1")
    live.add(r)
    live.closed(r)
    assert live.retained("t1", "g") is r
    assert live.retained("t2", "g") is None


def closed_run(live: LiveRegistry, gid: str, deltas: int) -> LiveGeneration:
    """A run whose log holds `deltas` delta events when it closes."""
    r = run(gid)
    for seq in range(1, deltas + 1):
        r.log.append(delta(gid, seq))
    r.log.close()
    live.add(r)
    live.closed(r)
    return r


def test_beyond_the_byte_budget_the_oldest_closed_runs_go_first() -> None:
    clock = Clock()
    probe = run("probe")
    probe.log.append(delta("g0", 1))
    one = probe.log.retained_bytes  # a delta event of these runs, serialized
    live = LiveRegistry(grace_s=1.0, retain_s=300.0, retain_max_bytes=25 * one, clock=clock)
    a, b = closed_run(live, "g0", 10), closed_run(live, "g1", 10)
    assert live.retention() == (2, 20 * one, 0)
    c = closed_run(live, "g2", 10)  # 30 events' bytes: g0, the oldest, goes at once
    assert live.get("g0") is None and live.get("g1") is b and live.get("g2") is c
    assert live.retention() == (2, 20 * one, 1)
    assert a.log.closed and a.log.retained == 10  # a reader already following it keeps reading
    clock.now = 301.0  # then retain_s: expired, not evicted
    live.forget_expired()
    assert live.retention() == (0, 0, 1)


def test_a_running_run_is_not_charged_to_the_budget() -> None:
    live = registry(Clock(), retain_s=300.0, retain_max_bytes=1)  # any finished run is over it
    running = run("running")
    running.log.append(delta("running", 1, "x"))
    live.add(running)
    closed_run(live, "done", 1)  # forgotten at once
    assert live.get("running") is running and live.get("done") is None
    assert live.retention() == (0, 0, 1)


def test_a_drain_waits_for_the_reader_of_a_run_forgotten_for_the_budget() -> None:
    live = registry(Clock(), retain_s=300.0, retain_max_bytes=1)  # any finished run is over it
    r = run("g")
    r.log.append(delta("g", 1, "tail"))
    live.add(r)
    live.client_joined(r)
    r.log.close()
    live.closed(r)  # forgotten at once, its client still reading
    assert live.get("g") is None
    assert not live.idle()
    live.client_left(r)
    assert live.idle()


def test_the_lease_round_expires_retained_runs_on_an_idle_frontend() -> None:
    clock = Clock()
    live = registry(clock)
    done = run("done")
    live.add(done)
    live.closed(done)
    clock.now = 11.0
    assert live.open() == [] and live.retention() == (0, 0, 0)
