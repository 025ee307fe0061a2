"""The serving benchmark (`python -m bench serve`, also `compare`): the platform against baselines
on the same weights, workload and arrivals.

serve.py              the suite: its options, the loads and rounds, each target in turn
serve_setup.py        a run's requests and the platform's config for it (sections or TOML)
targets.py            PlatformTarget (gRPC), the HTTP and split targets, SequentialTransformers
serve_runs.py         a load on a fresh in-process platform (gRPC, HTTP, both) and on transformers
platform_process.py   the platform in a process tree of its own, as `make serve` runs it
fleet.py              the fleet shape: two worker hosts, two frontends, PostgreSQL; the store's cost
serve_report.py       the Markdown table and JSON of a run, and the rounds' ratios
plots.py              the report's PNG plots: CDFs of TTFT and ITL, and the rate sweep
"""
