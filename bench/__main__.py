"""`python -m bench <suite>`: engine (engine/ against transformers), billing (usage ingestion),
fairness (tenants' interactive TTFT under another tenant's long documents, fair share vs FCFS),
quality (quantized versions' greedy agreement and perplexity against fp32), profile (where a
decode step's time goes at batch 1, 8 and 32), platform-profile (the same through the whole
platform: the worker loop's parts and every process's CPU a step), request-cost (every
process's CPU and the control store's work a request, for bursts of short requests), soak (random cancels,
disconnects and resumes for minutes, then the books are checked), chaos (the same while the
worker's stub and server are killed or stopped and the store's lock is held, then the invariants),
hostile (health latency while oversized
requests are refused), startup (launch to ready, cold and warm), structured (32 streams
constrained by JSON schemas against the same streams free, and schemas' compile time), limits
(memory bandwidth and matmul peaks here, and the ceilings they set on decode and on the batch), aiperf
(NVIDIA's AIPerf against the platform's OpenAI endpoint and the HTTP peers, beside our client),
speculative (speculative decoding against none: fp32 + int4 draft, int4 + prompt lookup, loads),
serve (the platform over gRPC against transformers and llama.cpp on a seeded workload; compare is
the same), fleet (routing by cached prefix against least-loaded routing on two worker hosts), capacity (one
worker's curve under the mixed workload, and the workers and frontends a demand needs)."""

from __future__ import annotations

import importlib
import sys

from bench.processes.server_process import exit_on_sigterm

SUITES = {
    "engine": "bench.engine",
    "billing": "bench.billing",
    "fairness": "bench.fairness",
    "quality": "bench.quality",
    "profile": "bench.step_profile",
    "platform-profile": "bench.platform_profile",
    "request-cost": "bench.request_cost",
    "serve": "bench.compare.serve",
    "soak": "bench.soak",
    "chaos": "bench.chaos",
    "hostile": "bench.hostile",
    "startup": "bench.startup",
    "structured": "bench.structured",
    "limits": "bench.limits",
    "aiperf": "bench.aiperf",
    "speculative": "bench.speculative",
    "compare": "bench.compare.serve",
    "fleet": "bench.fleet_routing",
    "capacity": "bench.capacity",
}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in SUITES:
        print(f"usage: python -m bench {{{'|'.join(SUITES)}}} [options]", file=sys.stderr)
        return 2
    exit_on_sigterm()  # a benchmark stopped by `timeout` stops the servers it started
    module = importlib.import_module(SUITES[sys.argv[1]])
    sys.argv = [f"bench {sys.argv[1]}", *sys.argv[2:]]
    result: int = module.main()
    return result


if __name__ == "__main__":
    sys.exit(main())
