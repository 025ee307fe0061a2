"""Sizing from a measured curve: the best point that met the objectives, the scarcer dimension
decides the workers, headroom divides, frontends follow the frontend CPU per relayed token."""

from __future__ import annotations

import pytest

from bench.capacity_plan import Demand, Objectives, Point, best, plan

SLO = Objectives(ttft_p95_s=2.0, itl_p95_s=0.25)


def point(
    rate: float, tin: float, tout: float, ttft: float = 1.0, itl: float = 0.1, errors: int = 0
) -> Point:
    return Point(rate, tin, tout, ttft, itl, kv_peak=0.5, frontend_cores=0.1, errors=errors)


def test_the_best_point_is_the_fastest_that_met_every_objective() -> None:
    points = [
        point(0.5, 200, 30),
        point(1.0, 400, 60),
        point(1.5, 600, 90, ttft=3.0),  # TTFT broken
        point(2.0, 800, 120, errors=1),  # refusals
    ]
    assert best(points, SLO) == points[1]
    assert best([point(1.5, 600, 90, itl=0.3)], SLO) is None


def test_workers_frontends_and_memory_for_a_demand() -> None:
    points = [point(1.0, 400, 50)]
    got = plan(points, SLO, Demand(400_000, 60_000, headroom=0.2), 700.0, 300.0, 45.0)
    # input needs 1,000 workers, output 1,200: output decides; / 0.8 for headroom
    assert (got["workers"], got["workers_bound_by"]) == (1500, "output")
    # 1,200 workers' worth of traffic x 0.1 frontend cores each = 120 cores; 2 cores at 70% a frontend
    assert got["frontends"] == 86
    assert got["memory_mib"]["workers_total"] == 1500 * 700.0
    assert got["memory_mib"]["frontends_total"] == 86 * 300.0
    assert got["assumptions"]


def test_no_point_within_the_objectives_or_a_bad_headroom_is_refused() -> None:
    with pytest.raises(ValueError, match="objectives"):
        plan([point(1.0, 400, 60, ttft=9.0)], SLO, Demand(1, 1, 0.2), 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="headroom"):
        plan([point(1.0, 400, 60)], SLO, Demand(1, 1, 1.0), 1.0, 1.0, 1.0)


def test_workers_by_cpu_time_scale_the_worker_to_cores_of_its_own() -> None:
    shared = Point(0.3, 120, 15, 5.0, 0.2, kv_peak=0.2, frontend_cores=0.02, errors=0, worker_cores=0.5)
    refused = Point(0.6, 240, 30, 9.0, 0.4, kv_peak=0.4, frontend_cores=0.04, errors=2, worker_cores=0.6)
    got = plan([shared, refused], Objectives(6.0, 0.3), Demand(400_000, 60_000, 0.2), 1.0, 1.0, 1.0)
    cpu = got["by_cpu_time"]
    # half a core served 120 / 15 tok/s: 2 cores of its own serve 480 / 60; output decides
    assert cpu["per_dedicated_worker"] == {"input_tok_s": 480.0, "output_tok_s": 60.0}
    assert (cpu["at_rate_req_s"], cpu["workers"]) == (0.3, 1250)  # 60,000 / 60 / 0.8
