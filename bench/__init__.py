"""Benchmarks: `python -m bench <suite>` (bench/__main__.py lists them); reports, never timed tests.

The suites, each a module here: engine.py (its report: engine_report.py), billing.py, fairness.py
(its scenario and report: fairness_scenario.py, fairness_report.py), quality.py (its held-out text:
data/), step_profile.py (`profile`), platform_profile.py, request_cost.py, soak.py, hostile.py,
startup.py, structured.py; the serving comparison (`serve`, `compare`) is compare/serve.py. What they
share:

load/        the load generator: workloads, prompts, the driver, and the figures of what clients saw
processes/   child process trees: a server on a loopback port, its memory and CPU, what it leaves
peers/       the serving benchmark's peers (llama.cpp, vLLM) from their scratch environments
compare/     the serving benchmark (the platform against its peers): the targets, the runs, the report
"""
