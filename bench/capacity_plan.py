"""Sizing from a measured curve, without I/O: how many workers and frontends a stated demand needs.

    Point     one load level measured on one worker: the tokens/s it served, its TTFT and ITL p95,
              its peak KV use, and the frontend's CPU while it ran
    best      the highest-throughput point that met the objectives (None: none did)
    workers   ceil(max(input demand / the best point's input tokens/s,
                       output demand / its output tokens/s) / (1 - headroom))
              (a worker serves prompt and output tokens at once: the scarcer one decides)
    frontends ceil(workers' total frontend CPU at that load / (cores per frontend x its target
              utilisation)): the frontend's CPU scales with the tokens it relays, measured per
              worker's worth of traffic at the best point

Assumptions are returned with the plan: the demand's prompt/output ratio is the measured mix's
(roughly 6.7 : 1 for `mixed`), the load divides evenly over workers, a worker's curve does not
depend on how many others run, and the frontend's CPU per token does not depend on the frontend's
size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Objectives:
    ttft_p95_s: float
    itl_p95_s: float


@dataclass(slots=True, frozen=True)
class Point:
    rate: float  # offered requests per second (Poisson)
    input_tok_s: float  # prompt tokens served per second (completed requests)
    output_tok_s: float
    ttft_p95_s: float
    itl_p95_s: float
    kv_peak: float  # the worker's largest share of KV blocks in use, sampled during the level
    frontend_cores: float  # the frontend process's CPU seconds per second of the level
    errors: int  # requests that failed (refused, timed out)
    worker_cores: float = 0.0  # the worker's (tritonserver and its stub) CPU seconds per second

    def meets(self, objectives: Objectives) -> bool:
        return (
            self.errors == 0
            and self.ttft_p95_s <= objectives.ttft_p95_s
            and self.itl_p95_s <= objectives.itl_p95_s
        )


@dataclass(slots=True, frozen=True)
class Demand:
    input_tok_s: float
    output_tok_s: float
    headroom: float  # share of measured capacity kept free (0.2: run workers at 80% of it)
    frontend_cores: float = 2.0  # cores of one frontend
    frontend_utilization: float = 0.7  # the share of them a frontend is planned to use
    worker_cores: float = 2.0  # cores of one dedicated worker (the CPU-time scaling below)


def best(points: list[Point], objectives: Objectives) -> Point | None:
    good = [p for p in points if p.meets(objectives)]
    return max(good, key=lambda p: (p.output_tok_s, p.input_tok_s), default=None)


def by_cpu_time(points: list[Point], demand: Demand) -> dict[str, Any] | None:
    """Workers if each had `demand.worker_cores` to itself, from the CPU time a token cost the
    worker at the most loaded point that served without errors: on a host shared with other work,
    what a worker measures in tokens/s is its share of the cores, while its CPU seconds per token
    are its own. A lower bound on a dedicated worker's rate (idle polling and small batches at a
    light load cost more per token than a saturated worker pays); no latency objective transfers."""
    served = [p for p in points if p.errors == 0 and p.worker_cores > 0 and p.output_tok_s > 0]
    if not served:
        return None
    top = max(served, key=lambda p: p.output_tok_s)
    scale = demand.worker_cores / top.worker_cores
    per_in, per_out = top.input_tok_s * scale, top.output_tok_s * scale
    need = max(demand.input_tok_s / per_in, demand.output_tok_s / per_out) / (1.0 - demand.headroom)
    return {
        "at_rate_req_s": top.rate,
        "worker_cores_used": top.worker_cores,
        "per_dedicated_worker": {"input_tok_s": per_in, "output_tok_s": per_out},
        "workers": math.ceil(need),
    }


def plan(
    points: list[Point],
    objectives: Objectives,
    demand: Demand,
    worker_mib: float,
    frontend_mib: float,
    kv_pool_mib: float,
) -> dict[str, Any]:
    """The plan for `demand` from one worker's measured `points` (ValueError if none met the
    objectives); memory in MiB, as measured (PSS) for one worker and one frontend."""
    if not 0 <= demand.headroom < 1:
        raise ValueError("headroom must be in [0, 1)")
    top = best(points, objectives)
    if top is None:
        raise ValueError("no measured load met the objectives: nothing to scale from")
    usable = 1.0 - demand.headroom
    by_input = demand.input_tok_s / top.input_tok_s
    by_output = demand.output_tok_s / top.output_tok_s
    workers = math.ceil(max(by_input, by_output) / usable)
    # the frontend CPU the whole demand needs, at the best point's CPU per token relayed
    frontend_cores = top.frontend_cores * max(by_input, by_output)
    frontends = max(2, math.ceil(frontend_cores / (demand.frontend_cores * demand.frontend_utilization)))
    return {
        "by_cpu_time": by_cpu_time(points, demand),
        "demand": asdict(demand),
        "objectives": asdict(objectives),
        "per_worker": {
            "input_tok_s": top.input_tok_s,
            "output_tok_s": top.output_tok_s,
            "at_rate_req_s": top.rate,
            "kv_peak": top.kv_peak,
        },
        "workers": workers,
        "workers_bound_by": "input" if by_input >= by_output else "output",
        "frontends": frontends,
        "frontend_cores_needed": frontend_cores,
        "memory_mib": {
            "per_worker": worker_mib,
            "per_worker_kv_pool": kv_pool_mib,
            "per_frontend": frontend_mib,
            "workers_total": worker_mib * workers,
            "frontends_total": frontend_mib * frontends,
        },
        "assumptions": [
            "the demand's prompt/output ratio is the measured mix's; the scarcer dimension decides",
            "load divides evenly over workers; one worker's curve does not change with their number",
            f"workers run at {usable:.0%} of the best point that met the objectives (headroom)",
            f"a frontend has {demand.frontend_cores:g} cores, planned at {demand.frontend_utilization:.0%}; "
            "its CPU per relayed token is the measured one (at least 2 frontends, for availability)",
            "memory is the measured PSS of one worker (tritonserver and its stub, KV pool included) "
            "and one frontend process, at the peak of the run",
        ],
    }
